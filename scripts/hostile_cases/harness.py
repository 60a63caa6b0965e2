"""What every hostile case shares: the case record and its registry (`case`, `CASES`), a verdict,
and running a real `kvarena` process with a bound."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-canary-7Hq2Zt9WmXv4Lp8Rk3Nd6Bf1Jc5Ys0Ga"
GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'


@dataclass
class Outcome:
    surface: str
    case: str
    verdict: str = "clean"
    """clean, crash, hang, lost, leak or skipped."""
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Done:
    rc: int | None
    out: str
    err: str
    seconds: float
    timed_out: bool = False


Verdict = tuple[str, str]
CaseFn = Callable[[Path], Verdict]


@dataclass(frozen=True)
class Case:
    surface: str
    name: str
    fn: CaseFn
    fast: bool = False
    """Part of the fast part the test suite runs (a few seconds at most)."""


CASES: list[Case] = []


def case(surface: str, name: str, *, fast: bool = False) -> Callable[[CaseFn], CaseFn]:
    def register(fn: CaseFn) -> CaseFn:
        CASES.append(Case(surface, name, fn, fast))
        return fn

    return register


def kvarena(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Done:
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "evals.cli", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as expired:
        return Done(None, str(expired.stdout or ""), str(expired.stderr or ""), timeout, True)
    return Done(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def one_line_error(done: Done, expected: str, status: int = 2) -> tuple[str, str]:
    """clean when `done` exited `status` with one `error:` line holding `expected`."""
    if done.timed_out:
        return "hang", f"no answer in {done.seconds:.0f}s"
    text = done.err.strip()
    if "Traceback" in text or "(a bug" in text:
        return "crash", text.splitlines()[-1][:160] if text else ""
    last = text.splitlines()[-1] if text else ""
    if done.rc != status or not last.startswith("error:") or expected not in text:
        return "crash", f"exit {done.rc}: {last[:160]}"
    return "clean", f"exit {status} in {done.seconds:.1f}s: {last[:110]}"
