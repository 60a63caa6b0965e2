"""Time to first output of every `kvarena` command: how long a user waits, from pressing Enter,
for the first line (on stdout or stderr, through a pipe: no spinner counts), over several
fresh processes each. Long commands are stopped once they have said something.

    uv run --no-sync python scripts/bench_first_output.py [--repeats 5] [--json]

It prints one row per command: the median, the fastest and the slowest time to the first
byte, and that first line. The target is 1 s on a quiet machine; this is a measurement, not
a test (a shared machine's load moves it).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0
LIMIT_S = 60.0
"""A command that says nothing for this long is recorded as silent."""


def commands(tmp: Path, run: Path) -> dict[str, list[str]]:
    """Name -> arguments: every command, and `--help` of the app and of `eval`."""
    return {
        "--help": ["--help"],
        "eval --help": ["eval", "--help"],
        "eval": ["eval", "-o", str(tmp / "eval"), "--force"],
        "context-eval": ["context-eval", "-n", "1", "-l", "easy", "-o", str(tmp / "context")],
        "cache-replay": [
            "cache-replay",
            str(run),
            "--price-in",
            "3",
            "--price-cached",
            "0.3",
            "--price-write",
            "3.75",
        ],
        "policies": ["policies"],
        "scenarios": ["scenarios"],
        "traces": ["traces"],
        "serve-policy": ["serve-policy", "lru", "--port", "0"],
        "serve-model": ["serve-model", "local:smollm2", "--port", "0"],
        "report": ["report", str(run), "-o", str(tmp / "report")],
        "validate": ["validate", "-n", "2", "-j", "1"],
        "bench": ["bench", "-n", "10", "--no-speed"],
    }


def first_output(args: list[str]) -> tuple[float, str]:
    """(seconds to the first byte on stdout or stderr, the first line) of one fresh run; the
    process (and its children) is stopped after its first line."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'environments'}{os.pathsep}{ROOT}"}
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "evals.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    assert process.stdout is not None
    seconds, text = LIMIT_S, ""
    try:
        ready, _, _ = select.select([process.stdout], [], [], LIMIT_S)
        if ready:
            seconds = time.perf_counter() - started
            chunk = os.read(process.stdout.fileno(), 4096).decode(errors="replace")
            text = next((line.strip() for line in chunk.splitlines() if line.strip()), "")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        process.stdout.close()
    return seconds, text


def tiny_run(tmp: Path) -> Path:
    """A two-episode eval run, for `report` and `cache-replay` to read (not timed)."""
    out = tmp / "tiny"
    arguments = ("eval", "-p", "lru", "-s", "easy", "-n", "2", "-o", str(out))
    subprocess.run(
        [sys.executable, "-m", "evals.cli", *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'environments'}{os.pathsep}{ROOT}"},
        capture_output=True,
        check=True,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per command")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("only", nargs="*", help="commands to time (default: all)")
    options = parser.parse_args()
    figures = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        run = tiny_run(tmp)
        for label, args in commands(tmp, run).items():
            if options.only and label not in options.only:
                continue
            times, line = [], ""
            for _ in range(options.repeats):
                seconds, line = first_output(args)
                times.append(seconds)
            figures[label] = {
                "median_s": round(statistics.median(times), 3),
                "min_s": round(min(times), 3),
                "max_s": round(max(times), 3),
                "first_line": line[:120],
            }
            if not options.json:
                f = figures[label]
                mark = "" if f["median_s"] <= TARGET_S else "  (over 1 s)"
                print(
                    f"{label:<14} {f['median_s']:6.2f} s  ({f['min_s']:.2f}-{f['max_s']:.2f})"
                    f"{mark}  {f['first_line'][:60]}",
                    flush=True,
                )
    if options.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
