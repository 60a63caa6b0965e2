"""A full disk: `eval` and `report` on a 64 KiB tmpfs (skipped where mounting one is refused)."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

from .harness import (
    case,
    kvarena,
    one_line_error,
)


@contextlib.contextmanager
def tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


EVAL_SMALL = ["eval", "-p", "lru,fifo", "-s", "easy,medium", "-n", "10", "-j", "1"]


@case("disk full", "eval on a 64 KiB tmpfs, then resume")
def _disk_full_eval(tmp: Path) -> tuple[str, str]:
    with tmpfs(tmp / "disk", "64k") as mounted:
        if not mounted:
            return "skipped", "mounting a tmpfs is not allowed here"
        out = tmp / "disk" / "run"
        done = kvarena(*EVAL_SMALL, "-o", str(out))
        verdict, detail = one_line_error(done, "No space left on device (ENOSPC)", status=1)
        if verdict != "clean":
            return verdict, detail
        data = (out / "results.jsonl").read_bytes()
        info = json.loads((out / "run.json").read_text())
        if data and not data.endswith(b"\n"):
            return "lost", "results.jsonl ends in a partial line"
        if info.get("status") != "error" or "ENOSPC" not in str(info.get("error")):
            return "lost", f"run.json says {info.get('status')!r}"
        subprocess.run(["mount", "-o", "remount,size=8m", str(tmp / "disk")], check=True)
        resumed = kvarena(*EVAL_SMALL, "-o", str(out), "--resume")
        if resumed.rc != 0 or (out / "results.jsonl").read_bytes().count(b"\n") != 40:
            return "lost", f"resume exit {resumed.rc}"
        kept = data.count(b"\n")
        return "clean", f"{kept} lines kept, run.json error, resume finished"


@case("disk full", "report onto a full tmpfs")
def _disk_full_report(tmp: Path) -> tuple[str, str]:
    run = tmp / "run"
    if kvarena(*EVAL_SMALL[:5], "-n", "2", "-o", str(run)).rc != 0:
        return "crash", "the run to report failed"
    with tmpfs(tmp / "disk", "16k") as mounted:
        if not mounted:
            return "skipped", "mounting a tmpfs is not allowed here"
        (tmp / "disk" / "filler").write_bytes(b"x" * 12_000)
        done = kvarena("report", str(run), "-o", str(tmp / "disk" / "rep"))
        verdict, detail = one_line_error(done, "No space left on device", status=1)
        if verdict != "clean":
            return verdict, detail
        for name in ("index.html", "leaderboard.md"):
            if (tmp / "disk" / "rep" / name).exists():
                return "lost", f"a partial {name} was left"
        return "clean", detail
