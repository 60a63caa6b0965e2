"""The specialised reference run (`sim/reference.py`) returns exactly the `Reference` of the
engine that plays it step by step (`run_reference_stepwise`): every built-in scenario, trace
windows, whole traces, random small schedules, and prefix hashes that are not hash chains."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kv_cache_env.sim import (
    BlockType,
    FollowUp,
    PauseKind,
    Quantization,
    Request,
    Scenario,
    Simulator,
    get_scenario,
    schedule_from_requests,
)
from kv_cache_env.sim.reference import run_reference
from kv_cache_env.sim.scenario import SCENARIOS
from kv_cache_env.sim.scheduler import Scheduler
from kv_cache_env.sim.simulator import UNLIMITED_BLOCKS, run_reference_stepwise
from kv_cache_env.sim.workload import synthesize
from kv_cache_env.traces import load_trace, trace_scenario, trace_schedule

MOONCAKE = "mooncake-conversation"
AZURE = "azure-conv-2023"


@pytest.fixture(scope="module")
def traces():
    return {name: load_trace(name) for name in (MOONCAKE, AZURE)}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_matches_the_engine(name):
    import numpy as np

    scenario = SCENARIOS[name]
    for seed in range(6):
        schedule = synthesize(scenario, np.random.default_rng(seed))
        assert run_reference(scenario, schedule) == run_reference_stepwise(scenario, schedule)


def test_a_reset_takes_its_capacity_from_the_reference():
    sim = Simulator(get_scenario("hard"), 11)
    assert sim.reference == run_reference_stepwise(sim.scenario, sim.schedule)


@pytest.mark.parametrize("trace", [MOONCAKE, AZURE])
def test_trace_windows_match_the_engine(trace, traces):
    loaded = traces[trace]
    for base in (None, get_scenario("hard")):
        scenario = trace_scenario(loaded, base)
        for seed in (0, 7):
            schedule = trace_schedule(loaded, scenario, seed)
            assert run_reference(scenario, schedule) == run_reference_stepwise(scenario, schedule)


@pytest.mark.parametrize("trace", [MOONCAKE, AZURE])
def test_a_whole_trace_matches_the_engine(trace, traces):
    loaded = traces[trace]
    scenario = trace_scenario(loaded, full=True)
    schedule = trace_schedule(loaded, scenario, 0, full=True)
    fast = run_reference(scenario, schedule)
    assert fast == run_reference_stepwise(scenario, schedule)
    assert fast.tokens > 4_000_000  # the whole trace was served (all its ~12-19 k requests)


# --- random small schedules ------------------------------------------------------------------
# Prefix chains are paths in a small tree of hashes (a hash names its block and every block
# before it, as in vLLM and Mooncake): requests share leading blocks and branch apart.
_paths = st.lists(st.integers(0, 2), min_size=1, max_size=5)


def _chain(path: list[int]) -> tuple[int, ...]:
    return tuple(int("1" + "".join(map(str, path[: i + 1])), 4) for i in range(len(path)))


_followups = st.lists(
    st.builds(
        FollowUp,
        pause=st.just(PauseKind.SEARCH),
        pause_steps=st.integers(1, 4),
        prompt_tokens=st.integers(0, 300),
        output_tokens=st.integers(0, 40),
    ),
    max_size=3,
)


# Any hash lists (repeats, a hash after a miss): what a user's trace might hold.
_scattered = st.lists(st.integers(0, 6), min_size=1, max_size=5).map(tuple)


@st.composite
def _episodes(draw, hashes=None):
    warmup = draw(st.integers(0, 3))
    steps = draw(st.integers(1, 12))
    # tight prefill budgets and short waits: resumed calls contend for the budget and time out
    scenario = Scenario(
        name="random",
        steps=steps,
        warmup_steps=warmup,
        block_size=draw(st.sampled_from([1, 4, 16])),
        prefix_hash_blocks=draw(st.integers(1, 3)),
        prefill_tokens_per_s=draw(st.integers(1, 400)),
        max_wait_steps=draw(st.integers(0, 3)),
        base_quantization=draw(st.sampled_from([Quantization.FP16, Quantization.INT8])),
        tool_mix=((PauseKind.SEARCH, 1.0),),
    )
    horizon = warmup + steps
    n = draw(st.integers(0, 14))
    requests = []
    for i in range(n):
        path = draw(st.none() | _paths)
        prefix = _chain(path) if path else ()
        if hashes is not None:
            prefix = draw(st.just(()) | hashes)
        requests.append(
            Request(
                seq_id=f"r{i}",
                arrival_step=draw(st.integers(0, horizon - 1)),
                block_type=BlockType.CONTEXT,
                priority=0.5,
                prompt_tokens=draw(st.integers(1, 400)),
                output_tokens=draw(st.integers(1, 60)),
                decode_rate=draw(st.integers(1, 30)),
                prefix_hashes=prefix,
                followups=tuple(draw(_followups)),
            )
        )
    return scenario, schedule_from_requests(requests, horizon)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episode=_episodes())
def test_random_schedules_match_the_engine(episode):
    scenario, schedule = episode
    assert run_reference(scenario, schedule) == run_reference_stepwise(scenario, schedule)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episode=_episodes(hashes=_scattered))
def test_prefix_hashes_that_are_not_chains_match_the_engine(episode):
    """Hashes repeated in a request's list, or held after its first miss, are counted per
    occurrence by the pool (`BlockPool._acquire_scattered`) and the reference alike, and the
    engine's accounting holds at every step."""
    scenario, schedule = episode
    engine = Scheduler(scenario, schedule, UNLIMITED_BLOCKS, reference=True)
    for _ in range(scenario.warmup_steps + scenario.steps):
        engine.step()
        engine.check()
    assert run_reference(scenario, schedule) == run_reference_stepwise(scenario, schedule)


def test_a_hash_held_after_a_miss_stays_used_while_others_hold_it():
    # `b` and `c` hold (1, 2) through the drain; `d`'s (3, 2) misses 3 and references 2 a third
    # time: when `d` finishes, 2 is still used (b and c hold it) and only 3 is cached. The pool
    # once stored 2 again with count 1, lost b's and c's references, and failed on release.
    scenario = Scenario(name="odd", steps=4, warmup_steps=0, block_size=4, max_wait_steps=1)
    long = {"output_tokens": 16384, "decode_rate": 1}
    requests = [
        Request("b", 0, BlockType.CONTEXT, 0.5, 8, prefix_hashes=(1, 2), **long),
        Request("c", 0, BlockType.CONTEXT, 0.5, 8, prefix_hashes=(1, 2), **long),
        Request("d", 1, BlockType.CONTEXT, 0.5, 8, 1, 1, prefix_hashes=(3, 2)),
    ]
    schedule = schedule_from_requests(requests, 4)
    engine = Scheduler(scenario, schedule, UNLIMITED_BLOCKS, reference=True)
    for _ in range(4):
        engine.step()
        engine.check()
    assert engine.kv.pool.ref_counts == {1: 2, 2: 2} and list(engine.kv.pool.cached) == [3]
    assert run_reference(scenario, schedule) == run_reference_stepwise(scenario, schedule)


def test_the_peak_counts_an_admission_in_a_step_whose_timeout_frees_more():
    # 4-token blocks, a 4-token prefill budget, no wait. s: call 0 done at step 2 (5 tokens, 2
    # blocks); back at 4 with 40 new prompt tokens, 4 a step: 3 blocks, then 4 at step 5, where
    # its first token is late and it fails. b (its 40-token prompt all 10 prefix hashes),
    # admitted at 5, holds 10 blocks from then on: 4 + 10 after the admission is the peak; the
    # failure frees 4 before the next compute.
    scenario = Scenario(
        name="peak", steps=8, warmup_steps=0, block_size=4, prefill_tokens_per_s=4,
        max_wait_steps=0,
    )  # fmt: skip
    back = FollowUp(PauseKind.SEARCH, pause_steps=1, prompt_tokens=40, output_tokens=1)
    requests = [
        Request("s", 0, BlockType.CONTEXT, 0.5, 4, 1, 1, followups=(back,)),
        Request("b", 4, BlockType.CONTEXT, 0.5, 40, 1, 1, prefix_hashes=tuple(range(1, 11))),
    ]
    schedule = schedule_from_requests(requests, 8)
    stepwise = run_reference_stepwise(scenario, schedule)
    assert stepwise.peak_blocks == 14
    assert run_reference(scenario, schedule) == stepwise
