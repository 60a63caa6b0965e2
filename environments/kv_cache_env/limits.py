"""The limits on the numbers kvarena reads (listed on the docs' Failure behaviour page). Every
number from a trace file passes through here where its record is parsed, so a bad one is a
`ValueError` naming the field, which the reader turns into FILE:LINE.

- `MAX_REQUEST_TOKENS`: the most prompt (or output) tokens one request may have. It is the
  replay's `max_prompt_tokens` (2^20): a larger request could never be served as recorded.
- `MAX_TRACE_SPAN_S`: the longest span of arrival times a trace may cover (8 days; the public
  traces cover one hour to one week). `--full` replays one engine step per trace second, so a
  bogus timestamp (1e12 ms) would otherwise ask for billions of steps.
- `MAX_TRACE_REQUESTS`: the most requests a trace may hold (memory grows with each).
- `MAX_EPISODE_STEPS`, `MAX_WEIGHT`: the episode length and rubric weights every entry point
  (the CLI, the Gymnasium envs) accepts.
- `MAX_GYM_SLOTS`, `MAX_GYM_CALLS_PER_TURN`, `MAX_SEED`: the Gymnasium envs' size arguments and
  seeds. `whole_number` is the one check of such an argument: an integer (a NumPy integer too;
  never a bool, a float or a string) within an inclusive range, or ValueError naming it.
"""

from __future__ import annotations

import math
import operator

MAX_REQUEST_TOKENS = 1 << 20
MAX_TRACE_SPAN_S = 8 * 24 * 3600
MAX_TRACE_REQUESTS = 500_000
"""Most requests a trace file may hold. A full replay holds ~2.3 KB of memory a request (a
tiled Mooncake conversation trace: 174 MB of peak RSS at 50,000 requests, 522 MB at 200,000;
the loaded trace itself ~0.8 KB a request), so this cap keeps a replay near 1.2 GB and two
minutes; it is ~1.7 days of the Mooncake conversation trace's density (12,000 an hour)."""
MAX_EPISODE_STEPS = 10_000
"""Most turns an episode may be asked for (`--steps`, `steps=` of the Gymnasium envs). Building
a `hard` episode's arrivals takes ~0.6 s per 1,000 steps here (10,000: seconds; 10^7 ran
over 45 s inside `reset`). A `--full` trace replay sets its own length from the trace."""
MAX_WEIGHT = 1e6
"""Largest |weight| of a rubric component (`--weights`, `weights=`): rewards stay finite."""
MAX_GYM_SLOTS = 4096
"""Most observation rows (`max_slots`) a Gymnasium env may be made with. Each row is 31 float32
features and three mask entries, so 4,096 rows are ~0.5 MB an observation; the suite's busiest
episodes show 89 sequences. (10^8 rows asked for 12 GB and ran past 45 s in `reset`.)"""
MAX_GYM_CALLS_PER_TURN = 4096
"""Most tool calls one turn of `kvcache/Serving-v0` may take before it ends by itself."""
MAX_SEED = 2**63 - 1
"""Largest episode seed (a signed 64-bit integer, as NumPy's generators take it)."""


def check_request_count(count: int) -> None:
    """ValueError once a trace holds more than `MAX_TRACE_REQUESTS` requests (`count` is the
    number read so far, the new one included): reading stops there."""
    if count > MAX_TRACE_REQUESTS:
        raise ValueError(
            f"more than {MAX_TRACE_REQUESTS:,} requests, the most a trace replay accepts "
            "(~2.3 KB of memory each); replay a shorter part of the trace"
        )


def check_tokens(number: int, name: str) -> int:
    """`number` if it is a token count a replay accepts; ValueError naming `name` otherwise."""
    if number < 0:
        raise ValueError(f"{name} must be >= 0, got {number}")
    if number > MAX_REQUEST_TOKENS:
        raise ValueError(
            f"{name} {number} exceeds the largest request a replay accepts "
            f"({MAX_REQUEST_TOKENS} tokens)"
        )
    return number


def trace_seconds(value: object, name: str, per_second: float = 1.0) -> float:
    """A timestamp (`per_second` units per second, e.g. 1000 for ms) in seconds; ValueError
    unless it is a finite number within [0, MAX_TRACE_SPAN_S] seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {str(value)[:40]!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {number}")
    seconds = number / per_second
    check_span(seconds, name)
    return seconds


def check_span(seconds: float, name: str) -> None:
    if not 0 <= seconds <= MAX_TRACE_SPAN_S:
        raise ValueError(
            f"{name} is {seconds:.6g} s from the trace's start; it must lie within "
            f"[0, {MAX_TRACE_SPAN_S}] s (the longest trace span a replay accepts)"
        )


def whole_number(value: object, name: str, low: int, high: int) -> int:
    """`value` as an int when it is an integer (Python or NumPy, not a bool) in [low, high];
    ValueError naming `name` and the range otherwise."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ValueError(f"{name} must be an integer in {low}..{high}, got a bool ({value!r})")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        shown = repr(value)[:40]
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {shown}") from None
    if not low <= number <= high:
        digits = len(str(number))
        shown = str(number) if digits <= 24 else f"an integer of {digits} digits"
        raise ValueError(f"{name} must be between {low} and {high}, got {shown}")
    return number
