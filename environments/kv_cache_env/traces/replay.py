"""Trace replay: read public serving traces and turn them into simulator schedules.

Formats (see `trace_data/README.md`; a `.gz` file is read decompressed):
- Mooncake JSONL: `{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}`;
  `hash_ids` name 512-token prefix blocks, so requests sharing leading ids share a prefix.
- Azure LLM inference CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`; no prefix information.

Trace seconds map to steps one to one by default (`step_seconds`). Timestamps that come in
buckets (Mooncake's ~3 s) are spread evenly over the gap to the next distinct timestamp. A trace
episode is a window of `warmup_steps + steps` at an offset drawn from the seed; `full=True`
replays the whole trace. Traces carry no block type, priority or decode speed: those are drawn
per request from the scenario's mix and ranges with the episode's seed, and documented as such.
Sessions: Mooncake's chats are read from its chained hashes (`trace_sessions`), its hash blocks
split into the scenario's engine blocks and private unless several sessions share them; Azure
requests get sessions drawn from the scenario's session mix (`trace_schedule`).
Files are read through `bounded_read` (`TRACE_LIMITS`: size after decompression, line length,
UTF-8, gzip that is truncated or corrupt). A malformed line raises `TraceError` naming the file
and the line: JSON nested too deep and numbers outside `limits` (non-finite or negative
timestamps, a span over `MAX_TRACE_SPAN_S`, requests over `MAX_REQUEST_TOKENS`, more than
`MAX_TRACE_REQUESTS` requests) included.
"""

from __future__ import annotations

import csv
import difflib
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import groupby, pairwise
from operator import itemgetter
from pathlib import Path

import numpy as np

from ..bounded_read import TRACE_LIMITS, FileReadError, iter_lines
from ..limits import (
    MAX_REQUEST_TOKENS,
    MAX_TRACE_REQUESTS,
    MAX_TRACE_SPAN_S,
    check_request_count,
    check_span,
    check_tokens,
    trace_seconds,
)
from ..sim import (
    BlockType,
    FollowUp,
    PauseKind,
    Request,
    RequestProfile,
    Scenario,
    Schedule,
    get_scenario,
)
from ..sim.frozen import slot_constructor
from ..sim.workload import draw_sessions, make_followup, make_request
from .trace_data import BUILTIN_TRACES, resolve_trace, trace_format

MOONCAKE_BLOCK_TOKENS = 512
TRACE_SESSION_MAX_PAUSE_S = 60
"""Longest gap (after the previous call's estimated end) at which a Mooncake request is read as
its chat's next turn. The conversation trace's turn gaps run from seconds to many minutes; past
a minute a serving engine would not hold the KV anyway, so the turn arrives as a new request
that may hit the prefix cache."""
_INT_ONLY = {int}
_NUMBER = (int, float)
_DECODER = json.JSONDecoder()
_JSON_WHITESPACE = " \t\n\r"
"""What `json.loads` allows around a value."""


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    arrival_s: float
    """Seconds since the trace's first request."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


make_trace_request = slot_constructor(TraceRequest)
"""`TraceRequest(...)` at ~40% of the cost (`sim/frozen.py`): a trace builds one per line."""


@dataclass(frozen=True, slots=True)
class Trace:
    path: str
    kind: str
    """"mooncake" or "azure"."""
    requests: tuple[TraceRequest, ...]
    block_tokens: int | None
    """Prefix-block granularity the trace's hashes are defined at (None: no prefix info)."""

    @property
    def duration_s(self) -> float:
        return self.requests[-1].arrival_s if self.requests else 0.0


def load_trace(path: str | Path) -> Trace:
    """Read a Mooncake `.jsonl` or Azure `.csv` trace (optionally `.gz`), or a built-in trace by
    name (`kv_cache_env.traces.trace_data`); the trace keeps the name or path it was asked for."""
    file = resolve_trace(path)
    if not file.is_file():
        close = difflib.get_close_matches(str(path), list(BUILTIN_TRACES), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        known = ", ".join(BUILTIN_TRACES)
        raise TraceError(f"{path}: no such trace file{hint} (built-in traces: {known})")
    if trace_format(file) == ".jsonl":
        return replace(load_mooncake(file), path=str(path))
    if trace_format(file) == ".csv":
        return replace(load_azure(file), path=str(path))
    raise TraceError(f"{path}: unknown trace format (expected .jsonl Mooncake or .csv Azure)")


def load_mooncake(path: str | Path) -> Trace:
    path = Path(path)
    rows: list[tuple[float, int, int, tuple[int, ...]]] = []
    canon = {}.setdefault
    for number, line in _trace_lines(path):
        try:
            item = _json_line(line)
            if type(item) is not dict:
                raise ValueError("not a JSON object")
            # Fast paths for plain numbers in range (the same values); anything else goes
            # through `limits` and `_count`, which convert it or say what is wrong. They
            # save five Python calls per line (~15% of a load).
            stamp = item["timestamp"]
            timestamp = float(stamp) / 1000.0 if type(stamp) in _NUMBER else -1.0
            if not 0 <= timestamp <= MAX_TRACE_SPAN_S:
                timestamp = trace_seconds(stamp, "timestamp", 1000.0)
            input_tokens = item["input_length"]
            if type(input_tokens) is not int or not 0 <= input_tokens <= MAX_REQUEST_TOKENS:
                input_tokens = _count(input_tokens, "input_length")
            output_tokens = item["output_length"]
            if type(output_tokens) is not int or not 0 <= output_tokens <= MAX_REQUEST_TOKENS:
                output_tokens = _count(output_tokens, "output_length")
            hashes = item["hash_ids"]
            # type() is int: JSON ints, never bools (one C-level pass, not 2 isinstance
            # calls per hash)
            if not isinstance(hashes, list) or not set(map(type, hashes)) <= _INT_ONLY:
                raise ValueError("hash_ids must be a list of integers")
            expected = math.ceil(input_tokens / MOONCAKE_BLOCK_TOKENS)
            if len(hashes) != expected:
                raise ValueError(
                    f"{len(hashes)} hash_ids for {input_tokens} tokens (expected {expected})"
                )
            if len(set(hashes)) != len(hashes):
                raise ValueError("hash_ids repeat within one request")
        except RecursionError:
            raise TraceError(f"{path}:{number}: JSON nested too deep") from None
        except (ValueError, KeyError, TypeError) as error:
            detail = f"missing field {error}" if isinstance(error, KeyError) else str(error)
            if "integer string conversion" in detail:
                detail = "an integer of more than 4,300 digits"
            raise TraceError(f"{path}:{number}: {detail.splitlines()[0][:200]}") from None
        if len(rows) >= MAX_TRACE_REQUESTS:
            _too_many(path, number, len(rows) + 1)
        # one int object per distinct hash id (JSON makes a new one per occurrence): a
        # third of the trace's ids repeat, and each copy costs 28 bytes
        rows.append((timestamp, input_tokens, output_tokens, tuple(map(canon, hashes, hashes))))
    return Trace(str(path), "mooncake", _spread(rows, path), MOONCAKE_BLOCK_TOKENS)


def _trace_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, read within `TRACE_LIMITS`
    (`bounded_read`: size, compression, line length, UTF-8); TraceError naming FILE[:LINE]."""
    try:
        yield from iter_lines(path, TRACE_LIMITS)
    except FileReadError as error:
        raise TraceError(str(error)) from None


def _json_line(line: str) -> object:
    """`json.loads(line)`, a fifth faster on a line that is one JSON value and whitespace: the
    decoder's `raw_decode` skips `loads`' checks; any other line goes to `loads` itself, which
    accepts it (leading whitespace) or raises its own error."""
    try:
        item, end = _DECODER.raw_decode(line)
    except ValueError:
        return json.loads(line)
    if line[end:].strip(_JSON_WHITESPACE):
        return json.loads(line)  # "Extra data"
    return item


def load_azure(path: str | Path) -> Trace:
    path = Path(path)
    rows: list[tuple[float, int, int, tuple[int, ...]]] = []
    lines = _trace_lines(path)
    first = next(lines, None)
    header = _csv_fields(path, *first) if first is not None else None
    if header is None or [h.strip() for h in header] != [
        "TIMESTAMP",
        "ContextTokens",
        "GeneratedTokens",
    ]:
        at = first[0] if first is not None else 1
        raise TraceError(f"{path}:{at}: expected header TIMESTAMP,ContextTokens,GeneratedTokens")
    start: datetime | None = None
    parsed: dict[str, datetime] = {}
    for number, line in lines:
        # csv only where a field is quoted: the same fields, a fifth of a load saved
        fields = line.split(",") if '"' not in line else _csv_fields(path, number, line)
        if not fields:
            continue
        try:
            if len(fields) != 3:
                raise ValueError(f"expected 3 columns, got {len(fields)}")
            moment = _azure_time(fields[0], parsed)
            start = start or moment
            seconds = (moment - start).total_seconds()
            check_span(abs(seconds), "TIMESTAMP")
            check_request_count(len(rows) + 1)
            rows.append(
                (
                    seconds,
                    _count(fields[1], "ContextTokens"),
                    _count(fields[2], "GeneratedTokens"),
                    (),
                )
            )
        except ValueError as error:
            raise TraceError(f"{path}:{number}: {error}") from None
    return Trace(str(path), "azure", _spread(rows, path), None)


def _too_many(path: Path, number: int, count: int) -> None:
    try:
        check_request_count(count)
    except ValueError as error:
        raise TraceError(f"{path}:{number}: {error}") from None


def _csv_fields(path: Path, number: int, line: str) -> list[str]:
    """One CSV line's fields; a line csv cannot split is a TraceError naming it."""
    try:
        return next(csv.reader((line,)), [])
    except csv.Error as error:
        raise TraceError(f"{path}:{number}: {error}") from None


def _azure_time(text: str, seconds: dict[str, datetime]) -> datetime:
    """`seconds`: whole seconds already parsed in this file (strptime was half of a load, and
    the conversation trace has ~5 requests per second)."""
    # "2023-11-16 18:15:46.6805900": seven fractional digits, more than fromisoformat takes.
    text = text.strip()
    head, _, fraction = text.partition(".")
    moment = seconds.get(head)
    if moment is None:
        moment = seconds[head] = datetime.strptime(head, "%Y-%m-%d %H:%M:%S")
    if fraction:
        if not fraction.isdigit():
            raise ValueError(f"bad timestamp {text!r}")
        moment = moment.replace(microsecond=int(fraction[:6].ljust(6, "0")))
    return moment


def _count(value: object, name: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    return check_tokens(number, name)


def _spread(
    rows: list[tuple[float, int, int, tuple[int, ...]]], path: Path
) -> tuple[TraceRequest, ...]:
    """Sort by time, rebase to 0 and spread requests sharing a timestamp evenly over the gap to
    the next distinct timestamp (the last bucket over the median gap)."""
    if not rows:
        raise TraceError(f"{path}: the trace holds no requests")
    by_time = itemgetter(0)
    rows = sorted(rows, key=by_time)
    t0 = rows[0][0]
    times = sorted({r[0] for r in rows})
    gaps = {a: b - a for a, b in pairwise(times)}
    default_gap = float(np.median(list(gaps.values()))) if gaps else 1.0
    out = []
    # rows sharing a timestamp are adjacent once sorted: one group per bucket instead of two
    # dict lookups per row
    for timestamp, group in groupby(rows, key=by_time):
        bucket = list(group)
        gap = gaps.get(timestamp, default_gap)
        for k, (when, input_tokens, output_tokens, hashes) in enumerate(bucket):
            offset = gap * k / len(bucket)
            out.append(make_trace_request(when - t0 + offset, input_tokens, output_tokens, hashes))
    return tuple(out)


def infinite_cache_hit_fraction(trace: Trace) -> float:
    """Share of prefix-block references already seen earlier in the trace (an infinite cache)."""
    seen: set[int] = set()
    hits = total = 0
    for request in trace.requests:
        for h in request.hash_ids:
            total += 1
            if h in seen:
                hits += 1
            else:
                seen.add(h)
    return hits / total if total else 0.0


def trace_scenario(trace: Trace, base: Scenario | None = None, *, full: bool = False) -> Scenario:
    """The scenario a trace replays under: `base` (default `medium`) with its own block size
    (a trace's prefix blocks are split into engine blocks), for a Mooncake trace human pauses
    of the trace's own length, and for a full replay the trace's whole length and no warm-up."""
    base = base or get_scenario("medium")
    changes: dict[str, object] = {"name": f"trace:{Path(trace.path).name}"}
    if trace.block_tokens is not None:
        if trace.block_tokens % base.block_size:
            raise TraceError(
                f"{trace.path}: its {trace.block_tokens}-token prefix blocks do not split into "
                f"{base.block_size}-token engine blocks"
            )
        changes["prefix_hash_blocks"] = trace.block_tokens // base.block_size
        # Sessions come from the trace (`trace_sessions`): chat turns whose gaps are the
        # trace's, from one step up to `TRACE_SESSION_MAX_PAUSE_S`.
        changes["tool_mix"] = ((PauseKind.HUMAN, 1.0),)
    # Production traces come from whole clusters; a single engine's 8k-token prefill budget
    # would turn every trace into a prefill queue, so replays prefill 64k tokens/s.
    changes["prefill_tokens_per_s"] = max(base.prefill_tokens_per_s, 65536)
    changes["max_prompt_tokens"] = max(base.max_prompt_tokens, 1 << 20)
    if full:
        changes["warmup_steps"] = 0
        changes["steps"] = max(1, math.ceil(trace.duration_s / base.step_seconds) + 1)
    return base.with_options(**changes)


def trace_sessions(
    window: Sequence[TraceRequest],
    arrival_steps: Sequence[int],
    service_steps: Sequence[int],
    max_pause_steps: int,
) -> list[list[int]]:
    """Group a Mooncake window into chat sessions; each session is a list of indices into
    `window`, its calls in order.

    Mooncake's `hash_ids` are chained (an id names its block and everything before it: checked
    on the built-in trace, no id ever appears at two positions or after two different ids), so a
    request whose chain holds the last full prompt block of an earlier request carries that
    request's whole prompt: it is that chat's next turn when it arrives after the earlier call
    could have finished (`service_steps`: 1 prefill step + its output at its decode rate) and at
    most `max_pause_steps` later. Each call continues at most one earlier call (the latest
    match); a request matching none, or one arriving too early or too late, starts a session of
    its own (it may still hit the prefix cache)."""
    owner_of: dict[int, int] = {}
    """Hash of a call's last full prompt block -> that call's index, while it has no next turn."""
    head_of: list[int] = list(range(len(window)))
    calls: dict[int, list[int]] = {}
    owned = owner_of.__contains__
    for i, request in enumerate(window):
        hashes = request.hash_ids
        # the owned hash at the latest position of the chain, scanned backwards by `filter`
        # in C (a Python loop over the ~200 k positions scanned on the full Mooncake trace took
        # a fifth more time)
        last = next(filter(owned, reversed(hashes)), None)
        if last is not None:
            j = owner_of[last]
            gap = arrival_steps[i] - arrival_steps[j] - service_steps[j]
            if 0 <= gap <= max_pause_steps:
                del owner_of[last]
                head_of[i] = head_of[j]
        calls.setdefault(head_of[i], []).append(i)
        if len(hashes) >= 2:
            owner_of[hashes[-2]] = i
    return list(calls.values())


def trace_schedule(trace: Trace, scenario: Scenario, seed: int, *, full: bool = False) -> Schedule:
    """The requests of one trace episode as a schedule on the engine clock.

    Sessions: a Mooncake window's chats (`trace_sessions`) become sessions whose later turns
    are human-paused follow-ups: the pause is the trace's gap after the previous call's
    estimated end, the new prompt is what the turn adds to the conversation so far (at least
    one token: a turn that dropped history still continues the session). Hash blocks only one
    session uses are private KV; the leading blocks several sessions share are prefix blocks,
    each 512-token hash block one unit of engine blocks. Azure traces hold no sessions: they
    are drawn per request from the scenario's session mix with the episode's seed, after every
    other draw (the first calls are the trace's own)."""
    rng = np.random.default_rng(seed)
    horizon = scenario.warmup_steps + scenario.steps
    total_steps = math.ceil(trace.duration_s / scenario.step_seconds) + 1
    offset = 0 if full else int(rng.integers(0, max(1, total_steps - horizon + 1)))
    step = scenario.step_seconds
    # each request's step, computed once for both windows below
    step_of = [int(r.arrival_s / step) for r in trace.requests]
    window = [
        r for r, s in zip(trace.requests, step_of, strict=True) if offset <= s < offset + horizon
    ]
    types = [t for t, _ in scenario.type_mix]
    weights = np.array([w for _, w in scenario.type_mix], dtype=float)
    type_index = rng.choice(len(types), size=len(window), p=weights / weights.sum())
    uniforms = rng.random(len(window))
    lo, hi = scenario.decode_tokens_per_step
    rates = rng.integers(lo, hi + 1, size=len(window))
    if trace.block_tokens is None:
        arrivals = [s - offset for s in step_of if offset <= s < offset + horizon]
        sessions = [[i] for i in range(len(window))]
        drawn = draw_sessions(scenario, [types[int(t)] for t in type_index], rng)
        followups = {i: d.followups for i, d in drawn.items()}
        plan_of = {i: d.plan for i, d in drawn.items()}
        pace_of = {i: d.pace for i, d in drawn.items()}
    else:
        # A window's sessions keep their later turns that arrive after the window (up to the
        # longest pause): they return in the drain. Requests are sorted by arrival, so the
        # window's own requests keep their indices (and their draws above).
        max_pause = scenario.pause_steps(TRACE_SESSION_MAX_PAUSE_S)
        end = offset + horizon + max_pause
        window = [r for r, s in zip(trace.requests, step_of, strict=True) if offset <= s < end]
        arrivals = [s - offset for s in step_of if offset <= s < end]
        # The estimated call length uses the middle of the decode range: drawn rates are per
        # session, and which request heads a session is what this decides.
        rate = (lo + hi) / 2
        service = [1 + math.ceil(max(1, r.output_tokens) / rate) for r in window]
        sessions = [
            calls
            for calls in trace_sessions(window, arrivals, service, max_pause)
            if arrivals[calls[0]] < horizon
        ]
        followups = _trace_followups(window, sessions, arrivals, service)
        plan_of: dict[int, int] = {}  # a chat's later turns are not announced: no plan
        pace_of: dict[int, float] = {}  # its pauses are the trace's own gaps
    # Python numbers (the same values) and each type's profile once: numpy scalar indexing and
    # a profile lookup per request were a third of a full Mooncake schedule's time
    profiles = dict(scenario.profiles)
    draws = _Draws(
        [(t, profiles[t]) for t in types], type_index.tolist(), uniforms.tolist(), rates.tolist()
    )
    requests = _session_requests(
        trace, window, sessions, arrivals, draws, (followups, plan_of, pace_of)
    )
    return Schedule(requests=tuple(requests), horizon=horizon)


@dataclass(frozen=True)
class _Draws:
    """The per-request draws of a trace window: block type (with its profile), priority uniform
    and decode rate, indexed like the window."""

    per_type: list[tuple[BlockType, RequestProfile]]
    type_of: list[int]
    uniform_of: list[float]
    rate_of: list[int]


def _session_requests(
    trace: Trace,
    window: Sequence[TraceRequest],
    sessions: list[list[int]],
    arrivals: list[int],
    draws: _Draws,
    plans: tuple[dict[int, tuple[FollowUp, ...]], dict[int, int], dict[int, float]],
) -> list[Request]:
    """One request per session, from its first call (`trace_schedule`'s last part): the
    session's follow-ups, plan and pace as `plans` gives them."""
    followups, plan_of, pace_of = plans
    shared = _shared_hashes(window, sessions)
    per_type, type_of, uniform_of, rate_of = (
        draws.per_type,
        draws.type_of,
        draws.uniform_of,
        draws.rate_of,
    )
    requests = []
    for calls in sessions:
        i = calls[0]
        r = window[i]
        block_type, profile = per_type[type_of[i]]
        p_lo, p_hi = profile.priority
        output = max(1, r.output_tokens)
        prompt = max(1, r.input_tokens)
        prefix = _engine_prefix(r.hash_ids, shared, trace.block_tokens, prompt)
        requests.append(
            make_request(
                seq_id=f"r{i}",
                arrival_step=arrivals[i],
                block_type=block_type,
                priority=round(p_lo + (p_hi - p_lo) * uniform_of[i], 2),
                prompt_tokens=prompt,
                output_tokens=output,
                decode_rate=rate_of[i],
                prefix_hashes=prefix,
                shared_prefix_id=f"h{r.hash_ids[0]}" if prefix else None,
                reasoning_tokens=int(output * profile.reasoning_fraction),
                followups=followups.get(i, ()),
                plan=plan_of.get(i, -1),
                pace=pace_of.get(i, 1.0),
            )
        )
    return requests


def _trace_followups(
    window: Sequence[TraceRequest],
    sessions: list[list[int]],
    arrivals: Sequence[int],
    service: Sequence[int],
) -> dict[int, tuple[FollowUp, ...]]:
    """Follow-up calls of each Mooncake session, keyed by its first call's index."""
    out: dict[int, tuple[FollowUp, ...]] = {}
    for calls in sessions:
        if len(calls) < 2:
            continue
        head = window[calls[0]]
        context = max(1, head.input_tokens) + max(1, head.output_tokens)
        steps = []
        for before, after in pairwise(calls):
            turn = window[after]
            added = max(1, turn.input_tokens - context)
            output = max(1, turn.output_tokens)
            pause = max(1, arrivals[after] - arrivals[before] - service[before])
            steps.append(make_followup(PauseKind.HUMAN, pause, added, output))
            context += added + output
        out[calls[0]] = tuple(steps)
    return out


def _shared_hashes(window: Sequence[TraceRequest], sessions: list[list[int]]) -> set[int]:
    """Hash blocks that two or more sessions of the window use; the others are private KV."""
    # C-level set passes per session instead of a per-hash count (3x faster on the full
    # Mooncake trace): a session's hashes already seen in an earlier session are shared.
    seen: set[int] = set()
    shared: set[int] = set()
    for calls in sessions:
        if len(calls) == 1:
            used: Iterable[int] = window[calls[0]].hash_ids
        else:
            used = set().union(*(window[i].hash_ids for i in calls))
        shared.update(seen.intersection(used))
        seen.update(used)
    return shared


def _engine_prefix(
    hashes: tuple[int, ...], shared: set[int], trace_block: int | None, prompt: int
) -> tuple[int, ...]:
    """The leading hash blocks of a prompt that several sessions share (each one prefix unit of
    `Scenario.prefix_hash_blocks` engine blocks). Only whole hash blocks of the prompt are
    shareable, as vLLM caches full blocks only."""
    if trace_block is None or not hashes or hashes[0] not in shared:
        return ()
    lead = 0
    limit = min(len(hashes), prompt // trace_block)
    while lead < limit and hashes[lead] in shared:
        lead += 1
    return hashes[:lead]
