"""Honesty: the `expert` acts alike on episodes whose rendered observations agree.

Each pair is an episode some turns in and a *twin*: a copy whose rendered text is byte-identical
(checked) but whose hidden parts this module has changed with its own code, which shares nothing
with the expert's world sampler (`policies.worlds`):
- waiting requests (the `waiting:` line shows only an id and a need): block type, priority,
  decode speed, the current call's output, the calls still to come, plan and pace;
- listed requests (table rows): the current call's output within its `max_tokens` and above what
  it has generated (keeping the shown phase), how long the pause it is in lasts (at least as long
  as it has lasted), the calls still to come, pace;
- discarded, failed and finished requests (not shown at all): block type, priority, decode speed,
  plan, pace, and whatever has not happened yet (a discarded session's pause and later calls, a
  failed request's unfinished output and later calls);
- every arrival still to come (a generator of this module's own).
What has already happened (arrival steps, the prompts that arrived, completed outputs, ended
pauses) and the engine's own accounting (blocks, clocks, which call a session is on) stay.

The expert (a small one, so that the test is cheap) must act the same on both while their texts
agree (at most `TURNS` turns); the clairvoyant `bound`, with the same pool and macros, must act
differently on at least a third of the same pairs: the negative control, which shows that the
changes reach the future (or the changes are too weak to test anything).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from kv_cache_env.policies import create
from kv_cache_env.policies.bound import MACROS, BoundPolicy
from kv_cache_env.policies.expert import ExpertPolicy
from kv_cache_env.policies.heuristics import NoopPolicy, OffloadOrDiscardPolicy
from kv_cache_env.policies.session_rules import MinWastePolicy
from kv_cache_env.sim import (
    SUITE,
    BlockType,
    FollowUp,
    PauseKind,
    Request,
    Scenario,
    Simulator,
    Status,
    get_scenario,
    render,
)
from kv_cache_env.sim.catalogue import max_tokens, output_bounds

PAIRS = 20
"""Pairs per scenario."""
TURNS = 3
"""Turns compared per pair, at most (observations rarely agree much longer)."""
BEFORE = ("offload-or-discard", "lru", "discard-paused", "swap-paused+compress-all", "noop")
"""Policies that play an episode up to the turn of its pair: they leave sessions offloaded,
discarded and preempted, requests failed and finished."""
POOL = (NoopPolicy, OffloadOrDiscardPolicy, MinWastePolicy)

_LISTED = (Status.RUNNING, Status.PAUSED, Status.SWAPPED)
_BETWEEN = (Status.PAUSED, Status.SWAPPED, Status.DISCARDED)
"""Statuses of a session whose call has completed, waiting for its next."""


def _small_expert() -> ExpertPolicy:
    return ExpertPolicy(worlds=2, pool=POOL, macros=MACROS)


def _small_bound() -> BoundPolicy:
    return BoundPolicy(list(POOL), macros=MACROS, continuations=1)


# --- the pairs ---------------------------------------------------------------------------------
def _episode(scenario: str, i: int) -> Simulator:
    """Seed 830000 + i of `scenario`, played 3-12 turns by one of `BEFORE`."""
    sim = Simulator(get_scenario(scenario), 830_000 + i)
    policy = create(BEFORE[i % len(BEFORE)])
    policy.reset(sim.seed)
    for _ in range(3 + (7 * i) % 10):
        sim.play_turn(policy.act(sim.observe(hints=False)))
    return sim


def _twin(sim: Simulator, rng: np.random.Generator) -> Simulator:
    """A copy of `sim` with its hidden parts changed (module doc), and everything that derives
    from them recomputed: where a call ends, when a pause ends, the schedule and its reference."""
    twin = sim.clone()
    engine = twin.engine
    t = engine.t
    changed = {
        seq_id: _changed(seq, twin.scenario, t, rng) for seq_id, seq in engine.sequences.items()
    }
    twin.rewrite(changed, _arrivals(sim, len(changed), rng))
    twin.check_invariants()
    return twin


def _changed(seq, scenario: Scenario, t: int, rng: np.random.Generator) -> Request:
    """`seq.request` with everything changed that the text does not show of it in its status and
    that has not happened yet (module doc)."""
    request = seq.request
    status, call = seq.status, seq.call
    listed = status in _LISTED
    between = status in _BETWEEN
    block_type, priority, rate = request.block_type, request.priority, request.decode_rate
    if not listed:
        block_type = _pick(scenario.type_mix, rng)
        lo, hi = scenario.profile(block_type).priority
        priority = round(float(rng.uniform(lo, hi)), 2)
        slowest, fastest = scenario.decode_tokens_per_step
        rate = int(rng.integers(slowest, 2 * fastest))
    history = list(request.followups[:call])
    output = request.output_tokens
    reasoning = request.reasoning_tokens
    if status not in _BETWEEN and status is not Status.FINISHED:  # its call has not completed
        done = seq.generated - (seq.call_end - seq.call_output)  # generated by the call so far
        lo, hi = 1, 8 * seq.call_output + 400
        if listed:  # within what its max_tokens shows
            lo, hi = output_bounds(max_tokens(seq.call_output))
        new = int(rng.integers(max(lo, done + 1), max(hi, done + 1) + 1))
        if call == 0:
            output = new
            reasoning = int(new * rng.uniform(0.0, 0.9))
            shown_phase = status is Status.RUNNING and not seq.prefill_remaining
            if shown_phase and seq.generated < request.reasoning_tokens:
                reasoning = max(reasoning, seq.generated + 1)  # still reasoning
            elif shown_phase:
                reasoning = min(reasoning, seq.generated)  # past it
        else:
            history[call - 1] = replace(history[call - 1], output_tokens=new)
    calls = list(history)
    if between:  # the pause it is in: its kind shows on a table row; it has not ended yet
        kind = request.followups[call].pause if listed else _kind(block_type, scenario, rng)
        elapsed = t - seq.paused_since
        calls.append(_call(kind, max(elapsed, 1) + int(rng.integers(0, 80)), rng))
    if status is not Status.FINISHED:
        for _ in range(int(rng.integers(0, 6))):
            calls.append(_call(_kind(block_type, scenario, rng), int(rng.integers(1, 60)), rng))
    plan = request.plan if listed else int(rng.integers(0, 9))
    return replace(
        request,
        block_type=block_type,
        priority=priority,
        decode_rate=rate,
        output_tokens=output,
        reasoning_tokens=reasoning,
        followups=tuple(calls),
        plan=plan,
        pace=float(math.exp(rng.normal(0.0, 1.0))),
    )


def _call(kind: PauseKind, pause_steps: int, rng: np.random.Generator) -> FollowUp:
    return FollowUp(kind, pause_steps, int(rng.integers(16, 600)), int(rng.integers(16, 600)))


def _kind(block_type: BlockType, scenario: Scenario, rng: np.random.Generator) -> PauseKind:
    if block_type in scenario.chat_types:
        return PauseKind.HUMAN
    return _pick(scenario.tool_mix, rng)


def _pick(mix, rng: np.random.Generator):
    """One of a scenario mix's items, uniformly (not by the mix's weights: any will do)."""
    return mix[int(rng.integers(len(mix)))][0]


def _arrivals(sim: Simulator, first: int, rng: np.random.Generator) -> list[Request]:
    """Arrivals for the steps still to come, numbered from `first`: a Poisson count per step at
    a rate within twice the scenario's range, each request drawn uniformly within the scenario's
    types and wide ranges of lengths, half of them sessions, some sharing a prefix seen so far."""
    scenario = sim.scenario
    block = scenario.block_size
    prefixes = sorted({r.prefix_hashes for r in sim.schedule.requests if r.prefix_hashes})
    rate = float(rng.uniform(0.5 * scenario.arrival_rate[0], 3 * scenario.arrival_rate[1]))
    out: list[Request] = []
    for step in range(sim.engine.t, sim.schedule.horizon):
        for _ in range(int(rng.poisson(rate * scenario.step_seconds))):
            block_type = _pick(scenario.type_mix, rng)
            lo, hi = scenario.profile(block_type).priority
            prefix = prefixes[int(rng.integers(len(prefixes)))] if prefixes else ()
            if rng.random() < 0.4:
                prefix = ()
            output = int(rng.integers(16, 1500))
            calls = []
            if rng.random() < 0.5:
                for _ in range(int(rng.integers(1, 6))):
                    kind = _kind(block_type, scenario, rng)
                    calls.append(_call(kind, int(rng.integers(1, 60)), rng))
            out.append(
                Request(
                    seq_id=f"r{first + len(out)}",
                    arrival_step=step,
                    block_type=block_type,
                    priority=round(float(rng.uniform(lo, hi)), 2),
                    prompt_tokens=int(rng.integers(16, 4000)) + len(prefix) * block,
                    output_tokens=output,
                    decode_rate=int(rng.integers(*scenario.decode_tokens_per_step)),
                    prefix_hashes=prefix,
                    shared_prefix_id=f"p{prefix[0]}" if prefix else None,
                    reasoning_tokens=int(output * rng.uniform(0.0, 0.9)),
                    followups=tuple(calls),
                    plan=int(rng.integers(0, 9)) if calls else 0,
                    pace=float(math.exp(rng.normal(0.0, 1.0))),
                )
            )
    return out


# --- playing a pair ----------------------------------------------------------------------------
def _text(sim: Simulator) -> str:
    return render(sim.observe(hints=False))


def _differ(make, sim: Simulator, twin: Simulator) -> bool:
    """Whether `make()`'s policies act differently on the two while their texts agree."""
    sim, twin = sim.clone(), twin.clone()
    a, b = make(), make()
    a.reset(sim.seed)
    b.reset(twin.seed)
    for _ in range(TURNS):
        if sim.done or _text(sim) != _text(twin):
            return False
        first, second = a.act_in(sim), b.act_in(twin)
        if first != second:
            return True
        sim.play_turn(first)
        twin.play_turn(second)
    return False


@pytest.mark.parametrize("scenario", SUITE)
def test_the_expert_acts_alike_on_twins_whose_texts_agree_and_the_bound_does_not(scenario):
    expert: list[int] = []  # pairs on which the expert acted differently
    bound = 0
    for i in range(PAIRS):
        sim = _episode(scenario, i)
        twin = _twin(sim, np.random.default_rng([831, SUITE.index(scenario), i]))
        assert _text(twin) == _text(sim), (scenario, i)
        if _differ(_small_expert, sim, twin):
            expert.append(i)
        bound += _differ(_small_bound, sim, twin)
    assert expert == [], f"{scenario}: the expert acted differently on pairs {expert} of {PAIRS}"
    assert 3 * bound >= PAIRS, f"{scenario}: the bound acted differently on {bound} of {PAIRS}"
