"""Output under faults: a full disk (a real 64 KiB tmpfs where mounting is allowed, and an
injected ENOSPC everywhere), symbolic links inside the run directory, and partial writes. The
run must stop with one line, keep `results.jsonl` on a whole line, record `error` with the
reason in `run.json`, and finish with `--resume` (byte-identical to an undisturbed run) once
the disk has room again."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common import durable
from evals.common.durable import LineLog, OutputError, write_atomic

runner = CliRunner()
EVAL = ["eval", "-p", "lru,fifo", "-s", "easy,medium", "-n", "4", "--steps", "4", "-j", "1"]


def _lines_whole(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "results.jsonl must end on a whole line"
    return [json.loads(line) for line in data.splitlines()]


def _reference(tmp_path: Path) -> bytes:
    done = runner.invoke(app, [*EVAL, "-o", str(tmp_path / "reference")])
    assert done.exit_code == 0, done.output
    return (tmp_path / "reference" / "results.jsonl").read_bytes()


def test_injected_enospc_stops_the_run_and_resume_finishes_it(tmp_path, monkeypatch):
    reference = _reference(tmp_path)
    out = tmp_path / "run"
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 6:  # part of the sixth line fits, then the disk is full
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        if calls["n"] > 6:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(durable.os, "write", full_disk)
    done = runner.invoke(app, [*EVAL, "-o", str(out)])
    monkeypatch.undo()
    assert done.exit_code == 1, done.output
    assert (
        "error: cannot write" in done.output and "No space left on device (ENOSPC)" in done.output
    )
    assert "Traceback" not in done.output and "unexpected" not in done.output
    kept = _lines_whole(out / "results.jsonl")
    assert len(kept) == 5
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "error" and "ENOSPC" in info["error"]
    assert info["episodes_run"] == 5

    done = runner.invoke(app, [*EVAL, "-o", str(out), "--resume"])
    assert done.exit_code == 0, done.output
    assert (out / "results.jsonl").read_bytes() == reference
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def _mount_tmpfs(where: Path, size: str) -> str | None:
    """None when mounted, else why not."""
    if shutil.which("mount") is None:
        return "no mount command"
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root here"
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else f"mount refused: {done.stderr.strip()[:120]}"


def test_a_full_tmpfs_stops_the_run_cleanly_and_resume_finishes_it(tmp_path):
    disk = tmp_path / "disk"
    why = _mount_tmpfs(disk, "64k")
    if why is not None:
        pytest.skip(f"cannot mount a small tmpfs ({why}); the injected-ENOSPC test covers it")
    try:
        out = disk / "run"
        args = [sys.executable, "-m", "evals.cli", *EVAL[:5], "-n", "10", "-j", "1"]
        done = subprocess.run([*args, "-o", str(out)], capture_output=True, text=True)
        assert done.returncode == 1, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("error: cannot write") and "ENOSPC" in last, done.stderr
        assert "Traceback" not in done.stderr
        kept = _lines_whole(out / "results.jsonl")
        info = json.loads((out / "run.json").read_text())
        assert info["status"] == "error" and "ENOSPC" in info["error"]
        assert info["episodes_run"] == len(kept) < 40
        # the report of a full disk writes nothing partial
        report = subprocess.run(
            [sys.executable, "-m", "evals.cli", "report", str(out), "-o", str(disk / "rep")],
            capture_output=True,
            text=True,
        )
        assert report.returncode == 1 and "ENOSPC" in report.stderr, report.stderr
        for name in ("index.html", "leaderboard.md"):
            assert not (disk / "rep" / name).exists()
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
        done = subprocess.run([*args, "-o", str(out), "--resume"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert json.loads((out / "run.json").read_text())["status"] == "complete"
        assert len(_lines_whole(out / "results.jsonl")) == 40
    finally:
        subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.parametrize("entry", ["results.jsonl", "run.json", "transcripts"])
def test_symlinked_entries_of_the_run_directory_are_refused(tmp_path, entry):
    out = tmp_path / "run"
    out.mkdir()
    target = tmp_path / "elsewhere"
    (out / entry).symlink_to(target)  # dangling: writing through it would create `target`
    done = runner.invoke(app, [*EVAL, "-o", str(out)])
    assert done.exit_code == 2, done.output
    assert f"{entry} is a symbolic link" in "".join(done.output.split("\n"))
    assert not target.exists()


def test_resume_refuses_a_linked_results_file_and_leaves_its_target(tmp_path):
    out = tmp_path / "run"
    assert runner.invoke(app, [*EVAL, "-o", str(out)]).exit_code == 0
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (out / "results.jsonl").unlink()
    (out / "results.jsonl").symlink_to(precious)
    done = runner.invoke(app, [*EVAL, "-o", str(out), "--resume"])
    assert done.exit_code == 2 and "is a symbolic link" in done.output
    assert precious.read_text() == "keep me\n"


def test_out_itself_may_be_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    done = runner.invoke(app, [*EVAL, "-o", str(tmp_path / "link")])
    assert done.exit_code == 0, done.output
    assert len(_lines_whole(real / "results.jsonl")) == 16


def test_write_atomic_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text('{"status": "running"}\n')

    def no_space(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable.os, "fsync", no_space)
    with pytest.raises(OutputError, match=r"cannot write .*run.json: No space left on device"):
        write_atomic(target, '{"status": "complete"}\n')
    assert target.read_text() == '{"status": "running"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"], "no temporary file left"


def test_run_json_is_rewritten_in_place_when_no_temporary_file_fits(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text('{"status": "running"}\n')

    def no_space(**kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable.tempfile, "mkstemp", no_space)
    write_atomic(target, '{"status": "error"}\n', in_place_fallback=True)
    assert target.read_text() == '{"status": "error"}\n'
    with pytest.raises(OutputError):
        write_atomic(target, "{}\n")  # without the fallback: refused, the file kept
    assert target.read_text() == '{"status": "error"}\n'


def test_a_line_cut_by_a_full_disk_is_taken_back(tmp_path, monkeypatch):
    log = LineLog(tmp_path / "results.jsonl")
    log.append('{"a": 1}')
    real_write = os.write

    def half(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[:3])
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(durable.os, "write", half)
    with pytest.raises(OutputError, match=r"Input/output error \(EIO\)"):
        log.append('{"b": 2}')
    monkeypatch.undo()
    log.append('{"c": 3}')
    log.close()
    assert (tmp_path / "results.jsonl").read_text() == '{"a": 1}\n{"c": 3}\n'


def test_new_files_get_the_usual_permissions(tmp_path):
    write_atomic(tmp_path / "x.json", "{}\n")
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == durable.FILE_MODE


def test_several_files_appear_together_or_not_at_all(tmp_path, monkeypatch):
    from evals.common.durable import write_all_atomic

    (tmp_path / "a.md").write_text("old a\n")
    real_stage = durable._stage

    def second_fails(path: Path, data: bytes) -> str:
        if path.name == "b.html":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_stage(path, data)

    monkeypatch.setattr(durable, "_stage", second_fails)
    with pytest.raises(OutputError, match=r"b\.html: No space left on device"):
        write_all_atomic([(tmp_path / "a.md", "new a\n"), (tmp_path / "b.html", "b\n")])
    assert (tmp_path / "a.md").read_text() == "old a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]
    monkeypatch.undo()
    write_all_atomic([(tmp_path / "a.md", "new a\n"), (tmp_path / "b.html", "b\n")])
    assert (tmp_path / "a.md").read_text() == "new a\n" and (tmp_path / "b.html").exists()
