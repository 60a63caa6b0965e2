"""How runs end: kill -9 of `kvarena eval -j 2` leaves no worker alive, SIGTERM closes a run
like Ctrl-C (`run.json` `interrupted`, exit 143, `--resume` finishes it), a run that finished
with failed episodes exits 3, and an empty list option is refused."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.edge import EXIT_EPISODES_FAILED
from kv_cache_env.policies.heuristics import NoopPolicy

runner = CliRunner()
SLOW = ["-p", "lookahead", "-s", "hard", "-n", "40"]
"""Episodes of a second or so each: a run that is still going when the test acts."""


def _kvarena(*args: str, log: Path | None = None) -> subprocess.Popen[str]:
    """`kvarena ARGS` in a subprocess; with `log`, its output goes to that file (no pipe a
    surviving worker could hold open)."""
    if log is None:
        return subprocess.Popen(
            [sys.executable, "-m", "evals.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    with log.open("w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "evals.cli", *args], stdout=sink, stderr=sink, text=True
        )


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(c) for c in text.split()]
    return found


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z"  # a zombie has exited (its reaper may be slow in a container)


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_kill_9_of_the_parent_leaves_no_worker(tmp_path):
    log = tmp_path / "log"
    process = _kvarena("eval", *SLOW, "-j", "2", "-o", str(tmp_path / "run"), log=log)
    workers: list[int] = []
    try:
        _wait_for(lambda: len(_children(process.pid)) >= 2, 60, "two workers")
        workers = _children(process.pid)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [w for w in workers if _alive(w)]
        assert not survivors, "workers outlived their parent by 5 s"
    finally:
        process.kill()
        process.wait()
        for worker in workers:  # never leave a survivor behind, even when the test fails
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)


def test_sigterm_closes_the_run_as_interrupted_and_resume_finishes_it(tmp_path):
    out = tmp_path / "run"
    args = ["eval", "-p", "lookahead", "-s", "hard", "-n", "6", "-j", "1", "-o", str(out)]
    process = _kvarena(*args)
    results = out / "results.jsonl"
    try:
        _wait_for(lambda: results.exists() and results.read_bytes().count(b"\n") >= 1, 120, "1")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 143, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "interrupted"
    kept = results.read_bytes()
    assert kept.endswith(b"\n") and info["episodes_run"] == kept.count(b"\n") < 6
    done = subprocess.run(
        [sys.executable, "-m", "evals.cli", *args, "--resume"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert results.read_bytes().count(b"\n") == 6


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_while_a_line_is_fsynced_keeps_the_line_and_its_record(
    tmp_path, monkeypatch, signum
):
    """The signal lands once the whole line is written, during its fsync (as a reader may
    already have seen it): the run stops after the line and its record are both kept."""
    from evals.common import durable
    from evals.common.processes import Terminated, terminate_as_interrupt
    from evals.common.run_dir import RunDir
    from evals.serving.jobs import EpisodeJob, run_job
    from kv_cache_env.episodes import EpisodeSpec

    first, second = (run_job(EpisodeJob("lru", EpisodeSpec("easy", s, steps=3))) for s in (0, 1))
    run = RunDir(tmp_path / "run")
    run.add(first)
    real_fsync = durable.os.fsync

    def fsync_then_signal(descriptor: int) -> None:
        real_fsync(descriptor)
        signal.raise_signal(signum)

    monkeypatch.setattr(durable.os, "fsync", fsync_then_signal)
    expected = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
    # Ctrl-C's usual handler: a suite started in the background (`cmd &`) inherits SIGINT
    # ignored, and an ignored signal is, rightly, still ignored after the deferred write
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(expected), terminate_as_interrupt():
            run.add(second)
    finally:
        signal.signal(signal.SIGINT, previous_int)
    monkeypatch.undo()
    run.close()
    lines = run.results_path.read_bytes().splitlines()
    assert len(lines) == len(run.results) == 2
    assert [json.loads(line)["seed"] for line in lines] == [0, 1]


class _Crashing(NoopPolicy):
    def act(self, observation):  # type: ignore[no-untyped-def]
        raise RuntimeError("this policy always fails")


def test_a_run_with_failed_episodes_exits_3(tmp_path, monkeypatch):
    from evals.serving import jobs

    real = jobs.create
    monkeypatch.setattr(
        jobs, "create", lambda name, weights: _Crashing() if name == "fifo" else real(name, weights)
    )
    out = tmp_path / "run"
    args = ["eval", "-p", "lru,fifo", "-s", "easy", "-n", "2", "--steps", "3", "-j", "1"]
    done = runner.invoke(app, [*args, "-o", str(out)])
    assert done.exit_code == EXIT_EPISODES_FAILED == 3, done.output
    assert "2 of 4 episode(s) failed" in done.output
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete" and info["episodes_failed"] == 2


@pytest.mark.parametrize("option", ["-s", "-p"])
def test_an_empty_list_is_refused(tmp_path, option):
    done = runner.invoke(app, ["eval", option, ",", "-n", "1", "-o", str(tmp_path / "o")])
    assert done.exit_code == 2, done.output
    name = {"-s": "--scenario", "-p": "--policy"}[option]
    assert f"{name}: the list is empty" in done.output
    assert not (tmp_path / "o").exists()
