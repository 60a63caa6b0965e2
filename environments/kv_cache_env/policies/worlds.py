"""Sampled worlds: copies of a simulator whose hidden parts are redrawn from what an agent sees.

`sample_world(sim, rng)` clones the simulator and replaces everything `kv_cache_env.sim.hidden`
marks hidden — each active request's current output, its session's pace and further calls
(count, tools, pauses, prompts, outputs), the pause a paused session is in, and every arrival
still to come — with draws from the published signal table (`catalogue`) conditioned on what
the observation shows: a call's `max_tokens` and what it has generated, the phase, a session's
history and plan, how long it has waited, the recent arrivals; derived fields (`call_end`,
`resume_step`, `total_output`, `reasoning_tokens`, the reference run) are recomputed. The
draws come from `rng` alone, never from the episode's generator, so two episodes that differ
only in hidden parts give the same worlds as long as their observations agree (the `expert`'s
honesty test). The scenario itself (its published parameters) is known.
"""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import numpy as np

from kv_cache_env.sim import (
    BlockType,
    FollowUp,
    PauseKind,
    Request,
    Scenario,
    Simulator,
    Status,
    run_reference,
)
from kv_cache_env.sim import catalogue as cat
from kv_cache_env.sim.hidden import FOLLOWUP_FIELDS, REQUEST_FIELDS, SEQUENCE_FIELDS
from kv_cache_env.sim.sequence import Sequence
from kv_cache_env.sim.workload import Schedule, draw_followups, synthesize

REDRAWN = frozenset({"output_tokens", "followups", "pace"})
"""The hidden `Request` fields this module redraws (checked against `sim.hidden` below)."""
RECOMPUTED = frozenset({"reasoning_tokens", "call_end", "resume_step", "total_output"})
assert {k for k, v in REQUEST_FIELDS.items() if v == "hidden"} == REDRAWN, "unhandled field"
assert {
    k for table in (REQUEST_FIELDS, SEQUENCE_FIELDS) for k, v in table.items() if v == "derived"
} == RECOMPUTED, "a derived field is not recomputed"
assert set(FOLLOWUP_FIELDS.values()) == {"hidden"}, "follow-ups are redrawn whole"

_NORMAL = NormalDist()
_ACTIVE = (Status.RUNNING, Status.WAITING, Status.PAUSED, Status.SWAPPED, Status.DISCARDED)
_PAUSED = (Status.PAUSED, Status.SWAPPED, Status.DISCARDED)


PARTS = frozenset({"pauses", "outputs", "calls", "arrivals"})
"""The hidden parts a world can be told instead of drawing (`reveal`; for measurements only)."""


def sample_world(
    sim: Simulator, rng: np.random.Generator, reveal: frozenset[str] = frozenset()
) -> Simulator:
    """A copy of `sim` with every hidden part redrawn (module doc). `reveal` keeps some parts
    true instead (a planner *told* the true pause lengths, say: a measurement of what reading
    the signals could be worth, never an honest policy)."""
    assert reveal <= PARTS, f"unknown parts {set(reveal) - PARTS}"
    world = sim.clone()
    engine = world.engine
    scenario = sim.scenario
    t = engine.t
    past = [r for r in sim.schedule.requests if r.arrival_step < t]
    redrawn: dict[str, Request] = {}
    for seq in engine.sequences.values():
        if seq.status in _ACTIVE:
            drawn = _redraw_active(seq, scenario, t, rng)
            redrawn[seq.seq_id] = _told(drawn, seq, reveal) if reveal else drawn
    requests = [redrawn.get(r.seq_id, r) for r in past]
    if "arrivals" in reveal:
        requests += [r for r in sim.schedule.requests if r.arrival_step >= t]
    else:
        requests += _future_arrivals(sim, len(past), rng)
    schedule = Schedule(requests=tuple(requests), horizon=sim.schedule.horizon)
    _install(world, schedule, redrawn)
    return world


def _install(world: Simulator, schedule: Schedule, redrawn: dict[str, Request]) -> None:
    """Point the world's engine at the redrawn requests and recompute what derives from them."""
    engine = world.engine
    for seq_id, request in redrawn.items():
        seq = engine.sequences[seq_id]
        seq.call_end = seq.call_end - seq.call_output + _call_output(request, seq.call)
        seq.request = request
        seq.total_output = request.total_output
        if seq.status in _PAUSED:
            seq.resume_step = seq.paused_since + request.followups[seq.call].pause_steps
    engine._next_return = min((s.resume_step for s in engine.paused), default=1 << 62)
    world.schedule = engine.schedule = schedule
    engine._arrivals = schedule.arrivals_by_step()
    block = engine.tokens_per_block
    fastest = max((r.decode_rate for r in schedule.requests), default=0)
    engine.max_decode_blocks = -(-fastest // min(block.values()))
    world.reference = run_reference(world.scenario, schedule)


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


def _call_output(request: Request, call: int) -> int:
    return request.output_tokens if call == 0 else request.followups[call - 1].output_tokens


# --- one arrived request ---------------------------------------------------------------------
def _redraw_active(seq: Sequence, scenario: Scenario, t: int, rng: np.random.Generator) -> Request:
    """`seq.request` with its hidden parts redrawn given what its row (or the queue) shows."""
    request = seq.request
    shown = seq.status is not Status.WAITING or seq.preemptions > 0 or seq.call > 0
    pace = _pace(seq, rng)
    followups = list(request.followups[: seq.call])  # ended pauses and their calls: history
    output = request.output_tokens
    if seq.call == 0:
        output = _output_for(seq, scenario, rng, shown)
    else:
        current = followups[seq.call - 1]
        followups[seq.call - 1] = replace(
            current, output_tokens=_output_for(seq, scenario, rng, shown, current.pause)
        )
    pending = 0
    if seq.status in _PAUSED:
        kind = request.followups[seq.call].pause  # visible: what it waits on
        steps = _pause_at_least(kind, pace, t - seq.paused_since, scenario.step_seconds, rng)
        (after,) = draw_followups(scenario, [kind], pace, rng)
        followups.append(replace(after, pause_steps=steps))
        pending = 1
    calls = _calls_total(seq, scenario, rng, shown, len(followups))
    kinds = [_kind_of(request.block_type, scenario, rng) for _ in range(calls - len(followups))]
    followups += draw_followups(scenario, kinds, pace, rng)
    plan = request.plan
    if not shown and plan >= 0:
        plan = cat.plan_estimate(calls, float(rng.standard_normal()))
    assert len(followups) >= seq.call + pending
    fraction = dict(scenario.profiles)[request.block_type].reasoning_fraction
    reasoning = _reasoning(seq, output, fraction) if seq.call == 0 else request.reasoning_tokens
    return replace(
        request,
        output_tokens=output,
        followups=tuple(followups),
        pace=pace,
        plan=plan,
        reasoning_tokens=reasoning,
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
    rng: np.random.Generator,
    shown: bool,
    kind: PauseKind | None = None,
) -> int:
    """The current call's output: log-normal around its profile, within the bounds its shown
    `max_tokens` gives, above what it has generated (a prior draw for an unseen request)."""
    if kind is None:
        profile = dict(scenario.profiles)[seq.request.block_type]
        median, sigma = profile.output_median, profile.output_sigma
    else:
        median, sigma = cat.CATALOGUE[kind].output_median, 0.5
    out = seq.generated - (seq.call_end - seq.call_output)
    lo, hi = 1, 16384
    if shown:
        lo, hi = cat.output_bounds(cat.max_tokens(seq.call_output))
    done = seq.status in _PAUSED or (not seq.prefill_remaining and seq.generated >= seq.call_end)
    if done:
        return out  # the call has ended: its output is known
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


def _calls_total(
    seq: Sequence, scenario: Scenario, rng: np.random.Generator, shown: bool, at_least: int
) -> int:
    """How many further calls the session makes in all: its plan's posterior (a uniform prior
    over the scenario's range), at least those made and the one it waits for."""
    lo, hi = scenario.followups
    request = seq.request
    if shown and request.plan == 0:
        return at_least  # a single call: a session's plan shows at least one call
    counts = np.arange(max(lo, at_least), max(hi, at_least) + 1)
    if shown and request.plan > 0:
        weights = np.array([_plan_likelihood(request.plan, int(n)) for n in counts])
    else:
        weights = np.ones(len(counts))
    if weights.sum() <= 0:
        weights = np.ones(len(counts))
    if not shown:
        p = dict(scenario.session_probability).get(request.block_type, 0.0)
        if float(rng.random()) >= p:
            return at_least  # an unseen request: a single call, as the prior says
    return int(rng.choice(counts, p=weights / weights.sum()))


def _plan_likelihood(plan: int, calls: int) -> float:
    """P(the plan shows `plan` | `calls` further calls) (`catalogue.plan_estimate`)."""
    hi = _NORMAL.cdf(math.log((plan + 0.5) / calls) / cat.PLAN_SIGMA)
    lo = _NORMAL.cdf(math.log((plan - 0.5) / calls) / cat.PLAN_SIGMA) if plan > 1 else 0.0
    return hi - lo


def _kind_of(block_type: BlockType, scenario: Scenario, rng: np.random.Generator) -> PauseKind:
    if block_type in scenario.chat_types:
        return PauseKind.HUMAN
    kinds = [k for k, _ in scenario.tool_mix]
    weights = np.array([w for _, w in scenario.tool_mix], dtype=float)
    return kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]


def _reasoning(seq: Sequence, output: int, fraction: float) -> int:
    """The reasoning share of a redrawn first output, kept on the side of `generated` the
    shown phase says (reasoning, or past it)."""
    reasoning = int(output * fraction)
    if seq.status is Status.WAITING or not fraction:
        return reasoning
    if seq.generated < seq.request.reasoning_tokens:  # shown: reasoning
        return max(reasoning, seq.generated + 1)
    return min(reasoning, seq.generated)


# --- what is still to arrive -----------------------------------------------------------------
def _future_arrivals(sim: Simulator, arrived: int, rng: np.random.Generator) -> list[Request]:
    """Fresh arrivals for the steps still to come, at a rate drawn from its posterior given the
    arrivals the header shows, numbered after those that have arrived."""
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


__all__ = ["RECOMPUTED", "REDRAWN", "FollowUp", "sample_world"]
