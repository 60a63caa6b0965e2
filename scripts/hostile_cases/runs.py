"""Runs that are interrupted or broken: kill -9, SIGTERM, every episode failed, and resume across
versions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .harness import (
    ROOT,
    CaseFn,
    Verdict,
    case,
    kvarena,
    one_line_error,
)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@case("runs", "kill -9 of eval -j 2, 12 times")
def _kill9(tmp: Path) -> tuple[str, str]:
    survivors = 0
    for attempt in range(12):
        with (tmp / f"log{attempt}").open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "evals.cli", "eval", "-p", "lookahead", "-s", "hard",
                 "-n", "40", "-j", "2", "-o", str(tmp / f"run{attempt}")],
                cwd=ROOT, stdout=log, stderr=log,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(_children(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(process.pid)
        time.sleep(0.2 * (attempt % 4))  # kill at different moments of the run
        process.kill()
        process.wait()
        end = time.monotonic() + 5
        while any(_alive(w) for w in workers) and time.monotonic() < end:
            time.sleep(0.05)
        alive = [w for w in workers if _alive(w)]
        survivors += bool(alive)
        for worker in alive:
            with contextlib.suppress(OSError):
                os.kill(worker, signal.SIGKILL)
    if survivors:
        return "leak", f"workers outlived the parent by 5 s in {survivors} of 12 kills"
    return "clean", "no worker alive 5 s after any of 12 kills"


@case("runs", "SIGTERM during eval")
def _sigterm(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "evals.cli", "eval", "-p", "lookahead", "-s", "hard", "-n", "6",
         "-j", "1", "-o", str(out)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        results.exists() and results.read_bytes().count(b"\n") >= 1
    ):
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        return "hang", "SIGTERM did not stop the run in 30 s"
    info = json.loads((out / "run.json").read_text())
    if process.returncode != 143 or info.get("status") != "interrupted":
        return "lost", f"exit {process.returncode}, run.json {info.get('status')!r}"
    return "clean", "exit 143, run.json interrupted"


@case("runs", "every episode failed")
def _all_failed(tmp: Path) -> tuple[str, str]:
    done = kvarena(
        "eval", "-m", "x", "--base-url", "http://127.0.0.1:9/v1", "-s", "easy", "-n", "2",
        "--steps", "2", "--max-retries", "0", "--timeout", "2", "-o", str(tmp / "run"),
    )  # fmt: skip
    if done.rc != 3:
        return "crash", f"exit {done.rc}"
    return "clean", "exit 3 (finished, episodes failed)"


@case("runs", "-s ,", fast=True)
def _empty_list(tmp: Path) -> tuple[str, str]:
    return one_line_error(kvarena("eval", "-s", ",", "-o", str(tmp / "o")), "the list is empty")


def _edit_lines(path: Path, indices: tuple[int, ...], **changes: Any) -> None:
    lines = path.read_text().splitlines()
    for i in indices:
        line = json.loads(lines[i])
        line.update(changes)
        lines[i] = json.dumps(line, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")


def _resume_case(args: list[str], edit: dict[str, Any], dropped: int) -> CaseFn:
    def run(tmp: Path) -> Verdict:
        out = tmp / "run"
        if kvarena(*args, "-o", str(out), timeout=120).rc != 0:
            return "crash", "the first run failed"
        whole = (out / "results.jsonl").read_bytes()
        _edit_lines(out / "results.jsonl", (0, 2), **edit)
        done = kvarena(*args, "-o", str(out), "--resume", timeout=120)
        if done.rc != 0 or "Traceback" in done.err:
            return "crash", f"resume exit {done.rc}: {done.err.strip()[-120:]}"
        if (out / "results.jsonl").read_bytes() != whole:
            return "lost", "the resumed file differs from the undisturbed run"
        said = f"dropped {dropped} line(s) of another schema or suite version"
        if said not in " ".join(done.err.split()):
            return "crash", "the resume did not say how many lines it dropped"
        report = kvarena("report", str(out), "-o", str(tmp / "rep"), timeout=120)
        if report.rc != 0:
            return "crash", f"report refused the resumed run: {report.err.strip()[-120:]}"
        return "clean", f"{said}; rerun byte-identically; report accepts it"

    return run


SERVING_RUN = ["eval", "-p", "lru,fifo", "-s", "easy", "-n", "2", "--steps", "3", "-j", "1"]
CONTEXT_RUN = ["context-eval", "-p", "noop", "-l", "easy", "-n", "3"]
case("resume", "eval --resume over 2 lines of suite version 2")(
    _resume_case(SERVING_RUN, {"suite_version": "2"}, 2)
)
case("resume", "eval --resume over 2 lines of schema version 2")(
    _resume_case(SERVING_RUN, {"schema_version": 2}, 2)
)
case("resume", "context-eval --resume over 2 lines of another suite version")(
    _resume_case(CONTEXT_RUN, {"suite_version": "0"}, 2)
)
