"""Sampled worlds: copies of a simulator whose hidden parts are redrawn from what an agent sees.

`sample_world(sim, rng)` clones the simulator and gives every request the engine knows a redrawn
record (`Request` and its `FollowUp` calls), and the steps still to come fresh arrivals. What a
world may keep of a request is what the rendered observation shows of it in its role
(`kv_cache_env.sim.hidden`, which derives it from the renderer: a table row, a `waiting:`
entry, or nothing), what has already happened, and the engine's own accounting; everything
else is drawn from the published distributions (the scenario's parameters and the signal table,
`catalogue`) given what the text shows. `TREATMENT` says, per role and field, which it is;
`problems()` checks it against the renderer's reads, and a world is only sampled when it agrees.

- **listed** (a row): its block type, priority, decode speed, plan and prefix show and are kept;
  the current call's output is redrawn within the `max_tokens` bucket the row shows and above
  what it has generated (the reasoning share on the side of `generated` the phase shows); the
  pause a paused session is in keeps its kind and is redrawn given how long it has lasted; its
  pace comes from the posterior its shown history gives; its calls still to come from its plan.
- **queued** (`id:need`): its prompt and prefix make the need and are kept; its block type
  (the scenario's mix, given whether it is a session), priority, decode speed, the current
  call's output (above what the server has generated of it), its calls still to come, plan,
  pace and reasoning share are drawn as for an unseen arrival.
- **unlisted** (discarded, finished, failed): everything that has not happened is drawn as for
  an unseen arrival: block type, priority, decode speed, plan, pace, a discarded session's pause
  (kind and length, given how long it has lasted) and later calls, a failed request's unfinished
  output and later calls. They reach a world's reward through its reference run, and a
  discarded session also through its return.
- **unarrived**: the arrivals still to come are drawn afresh at a rate from its posterior given
  the arrivals the header counts.

What has already happened is kept as the server's record: arrival steps, the prompts that
arrived (a request's prefix among them), the outputs of completed calls and the pauses that
ended (from which the engine computed the `n` / `pace` a row shows). So is the engine's own
accounting of each request (`Sequence`: its blocks and where they are, its context, its clocks,
which call it serves). Derived fields (`call_end`, `resume_step`, `total_output`, the reference
run) are recomputed. The draws come from `rng` alone, in an order fixed by what is kept, so two
episodes whose texts agree give the same worlds (the `expert`'s honesty test,
`tests/test_honesty.py`, changes the hidden parts with code of its own).
"""

from __future__ import annotations

import math
from bisect import bisect
from dataclasses import replace
from functools import cache
from itertools import accumulate
from statistics import NormalDist
from typing import Literal

import numpy as np

from kv_cache_env.sim import (
    BlockType,
    FollowUp,
    PauseKind,
    Request,
    Scenario,
    Simulator,
    Status,
)
from kv_cache_env.sim import catalogue as cat
from kv_cache_env.sim.hidden import ROLE_OF, ROLES, Role, read_fields, record_fields
from kv_cache_env.sim.sequence import BETWEEN_CALLS, Sequence
from kv_cache_env.sim.workload import draw_followups, synthesize

Treatment = Literal[
    "shown", "bounded", "history", "identity", "redrawn", "recomputed", "server", "container"
]
"""What a world does with a field:
- `shown`: the role's rendering reads it; kept;
- `bounded`: read, but the text shows only what it produces; redrawn within that;
- `history`: it has already happened (the server's record); kept;
- `identity`: the request's name; kept;
- `redrawn`: drawn from the published distributions given what the text shows;
- `recomputed`: a function of the others;
- `server`: the engine's own accounting of the request (`Sequence`); kept;
- `container`: a record whose fields are classified one by one."""

_REQUEST: dict[str, tuple[Treatment, Treatment, Treatment]] = {
    # field: (listed, queued, unlisted)
    "seq_id": ("shown", "shown", "identity"),
    "arrival_step": ("history", "history", "history"),
    "block_type": ("shown", "redrawn", "redrawn"),
    "priority": ("shown", "redrawn", "redrawn"),
    "decode_rate": ("shown", "redrawn", "redrawn"),
    "prefix_hashes": ("shown", "shown", "history"),  # a part of the first prompt
    "shared_prefix_id": ("history", "history", "history"),  # its prefix's name
    "followups": ("container", "container", "container"),  # by call, below
    "plan": ("shown", "redrawn", "redrawn"),
    "pace": ("redrawn", "redrawn", "redrawn"),  # a listed session's from its shown history
}
_CALL: dict[str, dict[str, tuple[Treatment, Treatment, Treatment]]] = {
    # a call's field at its place: (listed, queued, unlisted); `Call.<field>@<place>`
    "past": {
        f: ("history",) * 3
        for f in ("pause", "pause_steps", "prompt_tokens", "output_tokens", "reasoning_tokens")
    },
    "current": {
        "pause": ("history",) * 3,  # the pause it returned from has ended
        "pause_steps": ("history",) * 3,
        "prompt_tokens": ("history",) * 3,  # arrived
        # its output: kept once the call has completed (a paused row's, a discarded or
        # finished request's), else redrawn: within what a row shows, or as for an arrival
        "output_tokens": ("bounded", "redrawn", "redrawn"),
        "reasoning_tokens": ("bounded", "redrawn", "redrawn"),  # follows the first output
    },
    "next": {
        "pause": ("shown", "redrawn", "redrawn"),  # a paused row shows what it waits on
        "pause_steps": ("redrawn",) * 3,  # given how long it has lasted, if it has begun
        "prompt_tokens": ("redrawn",) * 3,
        "output_tokens": ("redrawn",) * 3,
        "reasoning_tokens": ("redrawn",) * 3,  # (a first call's field: never at this place)
    },
    "later": {
        f: ("redrawn",) * 3
        for f in ("pause", "pause_steps", "prompt_tokens", "output_tokens", "reasoning_tokens")
    },
}
SEQUENCE: dict[str, tuple[Treatment, str]] = {
    # the engine's record of one request, field by field: what a world does with it, and why
    "request": ("container", "its fields are classified above"),
    "private_prompt": ("server", "the context it holds past the prefix: prompts that arrived"),
    "prefix_tokens": ("server", "the part of its context in shared prefix blocks"),
    "generated": ("server", "the tokens it has generated (its context; recompute restores them)"),
    "prefill_remaining": ("server", "context the server still has to compute"),
    "quantization_level": ("server", "the precision its KV is stored at"),
    "status": ("server", "where it is: its role"),
    "call": ("server", "which call of its session the server is serving"),
    "paused_since": ("server", "when the server saw its call end"),
    # its client's wait clock: set when it arrived, returned from a pause or last got a token,
    # each of which an earlier turn showed (this turn shows the oldest wait)
    "wait_since": ("server", "its client's wait clock (when it arrived, returned, last ran)"),
    "not_before": ("server", "when the server may readmit it"),
    "first_token_by": ("server", "the first-token deadline the server set at its return"),
    "token_step": ("server", "when the server last sent it a token"),
    "last_access_step": ("server", "when the server last read its KV"),
    "admitted_order": ("server", "the server's admission counter (the trtllm fallback's order)"),
    "preemptions": ("server", "how often the server preempted it (the queue counts them)"),
    "gpu_blocks": ("server", "its blocks in the pool"),
    "cpu_blocks": ("server", "its blocks on the CPU tier"),
    "outbound": ("server", "blocks still crossing the host link to CPU"),
    "inbound": ("server", "blocks still crossing the host link back"),
    "prefix_held": ("server", "the prefix blocks it references in the pool"),
    "pauses_done": ("server", "the pauses the server saw end (a row's n)"),
    "log_ratio_sum": ("server", "their lengths over their tools' medians (a row's pace)"),
    "first_token_wait": ("server", "how long its first token took (the server's own log)"),
    "resumed_waits": ("server", "how long each resumed call's first token took"),
    "stalls": ("server", "the gaps the server left between its tokens"),
    "lost_tokens": ("server", "context whose discarded KV the server has not recomputed"),
    "call_end": ("recomputed", "where its call began (server) + its redrawn output: `out` stays"),
    "resume_step": ("recomputed", "when its pause began + the pause's redrawn length"),
    "total_output": ("recomputed", "the redrawn request's outputs"),
}
"""`Sequence`, the engine's per-request state: kept as the server's own accounting, or
recomputed from the redrawn request (the same in every role; `server_state(role)` lists those
kept although the role's rendering does not read them)."""


def _treatments() -> dict[Role, dict[str, Treatment]]:
    out: dict[Role, dict[str, Treatment]] = {}
    for k, role in enumerate(("listed", "queued", "unlisted")):
        table: dict[str, Treatment] = {f"Request.{f}": t[k] for f, t in _REQUEST.items()}
        for place, calls in _CALL.items():
            table |= {f"Call.{f}@{place}": t[k] for f, t in calls.items()}
        table |= {f"Sequence.{f}": t for f, (t, _) in SEQUENCE.items()}
        out[role] = table  # type: ignore[index]
    # the arrivals still to come: drawn afresh, every field (they have no `Sequence` yet)
    out["unarrived"] = {
        name: "container" if name == "Request.followups" else "redrawn"
        for name in record_fields()
        if not name.startswith("Sequence.")
    } | {f"Sequence.{f}": t for f, (t, _) in SEQUENCE.items()}
    return out


TREATMENT: dict[Role, dict[str, Treatment]] = _treatments()
"""Per role, what a world does with each field of the engine's records (module doc)."""


def problems() -> list[str]:
    """Where `TREATMENT` disagrees with what the renderer reads (`sim.hidden`): a field left
    unclassified (or no longer there), a field kept as shown that the renderer does not read, a
    read field redrawn freely (the world's text would differ), or kept server state claimed for
    a request's own draw. Empty when the worlds are honest by construction."""
    out = []
    fields = record_fields()
    for role in ROLES:
        table = TREATMENT[role]
        read = read_fields(role)
        out += [f"{role}: {n} is not classified" for n in sorted(fields - set(table))]
        out += [f"{role}: {n} is not a field" for n in sorted(set(table) - fields)]
        for name, treatment in sorted(table.items()):
            if treatment in ("shown", "bounded") and name not in read:
                out.append(f"{role}: {name} is kept as shown, but the renderer never reads it")
            if treatment == "redrawn" and name in read:
                out.append(f"{role}: {name} is read by the renderer, but redrawn freely")
            engine_side = name.startswith("Sequence.")
            if treatment == "server" and not engine_side:
                out.append(f"{role}: {name} is a request's own draw, not server state")
            if treatment in ("history", "identity") and engine_side:
                out.append(f"{role}: {name} is server state, not a request's {treatment}")
    return out


def server_state(role: Role) -> frozenset[str]:
    """The `Sequence` fields a world keeps as server state although the role's rendering does
    not read them (the engine's own accounting: docs, `expert` row)."""
    return frozenset(
        n for n, t in TREATMENT[role].items() if t == "server" and n not in read_fields(role)
    )


@cache
def _checked() -> None:
    found = problems()
    if found:
        raise AssertionError("worlds.TREATMENT disagrees with the renderer: " + "; ".join(found))


_NORMAL = NormalDist()

PARTS = frozenset({"pauses", "outputs", "calls", "arrivals"})
"""The hidden parts a world can be told instead of drawing (`reveal`; for measurements only)."""


def sample_world(
    sim: Simulator, rng: np.random.Generator, reveal: frozenset[str] = frozenset()
) -> Simulator:
    """A copy of `sim` with every hidden part redrawn (module doc). `reveal` keeps some parts
    true instead (a planner *told* the true pause lengths, say: a measurement of what reading
    the signals could be worth, never an honest policy)."""
    assert reveal <= PARTS, f"unknown parts {set(reveal) - PARTS}"
    _checked()
    world = sim.clone()
    engine = world.engine
    scenario = sim.scenario
    t = engine.t
    # a deployment either shows plans or not (trace replays do not): the rows say which
    plans = all(s.request.plan >= 0 for s in engine.running) and all(
        s.request.plan >= 0 for s in engine.paused if s.status is not Status.DISCARDED
    )
    redrawn: dict[str, Request] = {}
    for seq in engine.sequences.values():  # in arrival order
        drawn = _redraw(seq, scenario, t, plans, rng)
        redrawn[seq.seq_id] = _told(drawn, seq, reveal) if reveal else drawn
    if "arrivals" in reveal:
        future = [r for r in sim.schedule.requests if r.arrival_step >= t]
    else:
        future = _future_arrivals(sim, len(engine.sequences), rng)
    world.rewrite(redrawn, future)
    return world


def _told(drawn: Request, seq: Sequence, reveal: frozenset[str]) -> Request:
    """`drawn` with the `reveal`ed parts of the true request put back."""
    true = seq.request
    followups = list(drawn.followups)
    if "calls" in reveal:
        extra = list(true.followups[len(followups) :])
        followups = followups[: len(true.followups)] + extra
    output = true.output_tokens if "outputs" in reveal else drawn.output_tokens
    for j in range(seq.call, min(len(followups), len(true.followups))):
        change: dict[str, int] = {}
        if "pauses" in reveal:
            change["pause_steps"] = true.followups[j].pause_steps
        if "outputs" in reveal:
            change["output_tokens"] = true.followups[j].output_tokens
        if change:
            followups[j] = replace(followups[j], **change)
    if "outputs" in reveal and seq.call > 0 and seq.call - 1 < len(followups):
        current = true.followups[seq.call - 1]
        followups[seq.call - 1] = replace(
            followups[seq.call - 1], output_tokens=current.output_tokens
        )
    return replace(
        drawn,
        output_tokens=output,
        followups=tuple(followups),
        reasoning_tokens=true.reasoning_tokens if "outputs" in reveal else drawn.reasoning_tokens,
    )


# --- one arrived request ---------------------------------------------------------------------
def _redraw(
    seq: Sequence, scenario: Scenario, t: int, plans: bool, rng: np.random.Generator
) -> Request:
    """`seq.request` with what its role does not show and what has not happened redrawn."""
    request = seq.request
    status, call = seq.status, seq.call
    listed = ROLE_OF[status] == "listed"
    between = status in BETWEEN_CALLS
    completed = between or status is Status.FINISHED  # its current call has ended
    if listed:
        block_type, priority, rate = request.block_type, request.priority, request.decode_rate
        pace = _pace(seq, rng)
    else:
        # a session for sure once it has paused; a finished first call was a single one
        session = None if call == 0 and not completed else call > 0 or between
        block_type = _block_type(scenario, session, rng)
        lo, hi = scenario.profile(block_type).priority
        priority = round(lo + (hi - lo) * float(rng.random()), 2)  # as `synthesize` draws it
        slowest, fastest = scenario.decode_tokens_per_step
        rate = int(rng.integers(slowest, fastest + 1))
        pace = math.exp(cat.PACE_SIGMA * float(rng.standard_normal()))
    followups = list(request.followups[:call])  # the calls up to the current one: history
    output, reasoning = request.output_tokens, request.reasoning_tokens
    if not completed:
        kind = followups[call - 1].pause if call else None
        drawn = _output_for(seq, scenario, block_type, kind, listed, rng)
        if call:
            followups[call - 1] = replace(followups[call - 1], output_tokens=drawn)
        else:
            output = drawn
            fraction = scenario.profile(block_type).reasoning_fraction
            reasoning = _reasoning(seq, output, fraction) if listed else int(output * fraction)
    if between:  # the pause it is in: a row shows its kind; it has lasted `t - paused_since`
        kind = request.followups[call].pause if listed else _kind_of(block_type, scenario, rng)
        steps = _pause_at_least(kind, pace, t - seq.paused_since, scenario.step_seconds, rng)
        (after,) = draw_followups(scenario, [kind], pace, rng)
        followups.append(replace(after, pause_steps=steps))
    if status is Status.FINISHED:
        calls = call  # it made them all
    elif listed:
        calls = _calls_total(seq, scenario, rng, len(followups))
    else:
        calls = _calls_prior(scenario, block_type, call > 0 or between, len(followups), rng)
    kinds = [_kind_of(block_type, scenario, rng) for _ in range(calls - len(followups))]
    followups += draw_followups(scenario, kinds, pace, rng)
    plan = request.plan
    if not listed:
        plan = cat.plan_estimate(calls, float(rng.standard_normal())) if plans else -1
    return replace(
        request,
        block_type=block_type,
        priority=priority,
        decode_rate=rate,
        output_tokens=output,
        reasoning_tokens=reasoning,
        followups=tuple(followups),
        plan=plan,
        pace=pace,
    )


def _pace(seq: Sequence, rng: np.random.Generator) -> float:
    """A session's pace from the posterior its shown history gives (the rounded pace)."""
    n = seq.pauses_done
    shown = round(math.exp(seq.log_ratio_sum / n), 2) if n else 1.0
    mean, variance = cat.pace_posterior(n, math.log(shown) if n else 0.0)
    return math.exp(mean + math.sqrt(variance) * float(rng.standard_normal()))


def _output_for(
    seq: Sequence,
    scenario: Scenario,
    block_type: BlockType,
    kind: PauseKind | None,
    listed: bool,
    rng: np.random.Generator,
) -> int:
    """The current call's output: log-normal around its profile (the first call's block type,
    or the tool a later call returned from), above what the server has generated of it, and for
    a listed row within the bounds its shown `max_tokens` gives."""
    if kind is None:
        profile = scenario.profile(block_type)
        median, sigma = profile.output_median, profile.output_sigma
    else:
        median, sigma = cat.CATALOGUE[kind].output_median, 0.5
    out = seq.generated - (seq.call_end - seq.call_output)
    lo, hi = 1, 16384
    if listed:
        lo, hi = cat.output_bounds(cat.max_tokens(seq.call_output))
    lo = max(lo, out + 1)
    hi = max(hi, lo)
    return _truncated_lognormal(median, sigma, lo, hi, rng)


def _truncated_lognormal(
    median: float, sigma: float, lo: int, hi: int, rng: np.random.Generator
) -> int:
    mu = math.log(median)
    a = _NORMAL.cdf((math.log(lo - 0.5) - mu) / sigma) if lo > 1 else 0.0
    b = _NORMAL.cdf((math.log(hi + 0.5) - mu) / sigma)
    u = a + (b - a) * float(rng.random()) if b > a else a
    u = min(max(u, 1e-12), 1 - 1e-12)
    value = round(math.exp(mu + sigma * _NORMAL.inv_cdf(u)))
    return min(max(value, lo), hi)


def _pause_at_least(
    kind: PauseKind, pace: float, elapsed: int, step_seconds: float, rng: np.random.Generator
) -> int:
    """A pause on `kind` for a session of `pace`, conditioned on lasting `elapsed` steps yet."""
    median = cat.CATALOGUE[kind].median_s * pace
    floor = max(elapsed - 0.5, 1e-9) * step_seconds / median
    a = _NORMAL.cdf(math.log(floor) / cat.CALL_SIGMA) if floor > 0 else 0.0
    u = min(max(a + (1 - a) * float(rng.random()), 1e-12), 1 - 1e-12)
    steps = cat.pause_steps(kind, pace, _NORMAL.inv_cdf(u), step_seconds)
    return max(steps, elapsed, 1)


def _calls_total(seq: Sequence, scenario: Scenario, rng: np.random.Generator, at_least: int) -> int:
    """How many further calls a listed session makes in all: its shown plan's posterior (a
    uniform prior over the scenario's range), at least those made and the one it waits for."""
    lo, hi = scenario.followups
    plan = seq.request.plan
    if plan == 0:
        return at_least  # a single call: a session's plan shows at least one call
    counts = np.arange(max(lo, at_least), max(hi, at_least) + 1)
    if plan > 0:
        weights = np.array([_plan_likelihood(plan, int(n)) for n in counts])
    else:
        weights = np.ones(len(counts))
    if weights.sum() <= 0:
        weights = np.ones(len(counts))
    return int(rng.choice(counts, p=weights / weights.sum()))


def _calls_prior(
    scenario: Scenario,
    block_type: BlockType,
    session: bool,
    at_least: int,
    rng: np.random.Generator,
) -> int:
    """How many further calls a request no row shows makes in all, as for an arrival of
    `block_type`: a session with its type's probability (for sure when `session`), then a
    uniform count over the scenario's range, at least `at_least`."""
    if not session:
        p = dict(scenario.session_probability).get(block_type, 0.0)
        if float(rng.random()) >= p:
            return at_least
    lo, hi = scenario.followups
    return int(rng.integers(max(lo, at_least), max(hi, at_least) + 1))


def _plan_likelihood(plan: int, calls: int) -> float:
    """P(the plan shows `plan` | `calls` further calls) (`catalogue.plan_estimate`)."""
    hi = _NORMAL.cdf(math.log((plan + 0.5) / calls) / cat.PLAN_SIGMA)
    lo = _NORMAL.cdf(math.log((plan - 0.5) / calls) / cat.PLAN_SIGMA) if plan > 1 else 0.0
    return hi - lo


def _kind_of(block_type: BlockType, scenario: Scenario, rng: np.random.Generator) -> PauseKind:
    if block_type in scenario.chat_types:
        return PauseKind.HUMAN
    kinds, cumulative = _tools(scenario)
    return kinds[bisect(cumulative, float(rng.random()) * cumulative[-1])]


def _block_type(scenario: Scenario, session: bool | None, rng: np.random.Generator) -> BlockType:
    """A block type from the scenario's mix, given whether the request is a session (None: not
    known)."""
    types, cumulative = _types(scenario, session)
    return types[bisect(cumulative, float(rng.random()) * cumulative[-1])]


@cache
def _tools(scenario: Scenario) -> tuple[tuple[PauseKind, ...], tuple[float, ...]]:
    """The tool mix's kinds and cumulative weights."""
    mix = scenario.tool_mix
    return tuple(k for k, _ in mix), tuple(accumulate(w for _, w in mix))


@cache
def _types(
    scenario: Scenario, session: bool | None
) -> tuple[tuple[BlockType, ...], tuple[float, ...]]:
    """The mix's types and cumulative weights, conditioned on being a session (or not)."""
    p = dict(scenario.session_probability)
    mix = [(t, w) for t, w in scenario.type_mix if w > 0]
    if session is not None:
        given = [(t, w * (p.get(t, 0.0) if session else 1 - p.get(t, 0.0))) for t, w in mix]
        if sum(w for _, w in given) > 0:
            mix = [(t, w) for t, w in given if w > 0]
    return tuple(t for t, _ in mix), tuple(accumulate(w for _, w in mix))


def _reasoning(seq: Sequence, output: int, fraction: float) -> int:
    """The reasoning share of a listed row's redrawn first output, kept on the side of
    `generated` its phase shows (reasoning, or past it; a row in prefill shows neither)."""
    reasoning = int(output * fraction)
    if seq.status is not Status.RUNNING or seq.prefill_remaining or not fraction:
        return reasoning
    if seq.generated < seq.request.reasoning_tokens:  # shown: reasoning
        return max(reasoning, seq.generated + 1)
    return min(reasoning, seq.generated)


# --- what is still to arrive -----------------------------------------------------------------
def _future_arrivals(sim: Simulator, arrived: int, rng: np.random.Generator) -> list[Request]:
    """Fresh arrivals for the steps still to come, at a rate drawn from its posterior given the
    arrivals the header shows, numbered after the `arrived` requests the server has seen."""
    scenario = sim.scenario
    t = sim.engine.t
    if t >= sim.schedule.horizon:
        return []
    seen = sim.engine.recent_arrivals(cat.TREND_STEPS)
    rate = _rate(scenario, seen, min(t, cat.TREND_STEPS), rng)
    fresh = synthesize(scenario.with_options(arrival_rate=(rate, rate)), rng)
    out = []
    for request in fresh.requests:
        if request.arrival_step >= t:
            out.append(replace(request, seq_id=f"r{arrived + len(out)}"))
    return out


def _rate(scenario: Scenario, seen: int, steps: int, rng: np.random.Generator) -> float:
    """An arrival rate per second from its posterior: uniform over the scenario's range, the
    last `steps` steps' arrivals Poisson with the burst-inflated mean."""
    lo, hi = scenario.arrival_rate
    grid = np.linspace(lo, hi, 21)
    if steps <= 0 or hi <= lo:
        return float(rng.choice(grid))
    inflate = 1 + scenario.burst_probability * (scenario.burst_multiplier - 1)
    means = grid * scenario.step_seconds * inflate * steps
    log_like = seen * np.log(np.maximum(means, 1e-12)) - means
    weights = np.exp(log_like - log_like.max())
    return float(rng.choice(grid, p=weights / weights.sum()))


__all__ = ["PARTS", "SEQUENCE", "TREATMENT", "FollowUp", "problems", "sample_world", "server_state"]
