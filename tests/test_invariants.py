"""Simulator invariants under arbitrary action sequences (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kv_cache_env.sim import Simulator, Status, get_scenario, make_action

SCENARIOS = ("easy", "medium", "hard", "medium-128")
KINDS = ("evict", "compress", "swap", "noop", "bogus")


def _target(data, sim: Simulator) -> str:
    ids = sorted(sim.engine.sequences)
    if ids and data.draw(st.booleans()):
        return data.draw(st.sampled_from(ids))
    return data.draw(st.sampled_from(["r999999", "", "x"]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=st.sampled_from(SCENARIOS),
    seed=st.integers(0, 10_000),
    fallback=st.sampled_from(["vllm", "trtllm"]),
    data=st.data(),
)
def test_invariants_hold_under_random_actions(scenario, seed, fallback, data):
    sc = get_scenario(scenario).with_options(fallback=fallback, warmup_steps=0)
    sim = Simulator(sc, seed)
    pool = sim.engine.kv.pool
    step_tokens = 0
    while not sim.done:
        for _ in range(data.draw(st.integers(0, 6))):
            kind = data.draw(st.sampled_from(KINDS))
            action = make_action(kind, _target(data, sim))
            if isinstance(action, str):
                sim.count_invalid()
                continue
            before = pool.available
            result = sim.apply(action)
            # what an action reports as freed is exactly what became available
            assert pool.available - before == result.freed_blocks
            if not result.ok:
                assert result.freed_blocks == 0 and "\n" not in result.message
            sim.check_invariants()
        stats = sim.step()
        step_tokens += stats.tokens
        sim.check_invariants()
        assert 0 <= pool.used <= pool.num_blocks
        assert 0 <= sim.engine.host.cpu_used <= sim.engine.host.cpu_capacity
    # every token generated (turns and drain) is owned by exactly one request
    record = sim.record()
    assert record.tokens_generated == step_tokens
    assert step_tokens + record.drain_tokens == sum(
        s.generated for s in sim.engine.sequences.values()
    )
    assert all(0 <= u <= 1 for u in record.usage)
    done = [s for s in sim.engine.sequences.values() if s.status is Status.FINISHED]
    # a finished request completed its current call (a session whose call ends in the drain
    # finishes there: no new pauses while draining)
    assert all(s.generated == s.call_end for s in done)
    assert all(s.generated == s.request.total_output for s in done if not s.has_more_calls)
    assert record.total_failures == sum(
        1 for s in sim.engine.sequences.values() if s.status is Status.FAILED
    )
    # the drain runs until every request has finished or failed by its own deadline
    left = {s.status for s in sim.engine.sequences.values()}
    assert left <= {Status.FINISHED, Status.FAILED}
    assert sim.engine.idle and sim.engine.host.cpu_used == 0 and pool.used == 0
    assert not record.drain_capped and record.drain_steps < sc.drain_cap
    sim.check_invariants()


@settings(max_examples=25, deadline=None)
@given(scenario=st.sampled_from(SCENARIOS), seed=st.integers(0, 10_000))
def test_capacity_follows_the_scenario_budget(scenario, seed):
    sc = get_scenario(scenario)
    sim = Simulator(sc, seed)
    lo, hi = sc.budget_fraction
    floor = sim.schedule.max_request_blocks(sc.block_size)
    peak = sim.reference.peak_blocks
    assert sim.capacity == floor or lo * peak - 1 <= sim.capacity <= hi * peak + 1


def test_an_arriving_sequence_equals_the_constructed_one():
    """`Sequence.arriving` (fields set one by one) builds what the dataclass constructor does."""
    from dataclasses import fields

    from kv_cache_env.sim import Quantization
    from kv_cache_env.sim.sequence import Sequence

    for request in Simulator(get_scenario("agent-tools"), 3).schedule.requests[:40]:
        made = Sequence(
            request,
            request.prompt_tokens - 16,
            wait_since=7,
            not_before=8,
            quantization_level=Quantization.INT8,
            prefix_tokens=16,
        )
        fast = Sequence.arriving(request, request.prompt_tokens - 16, 7, Quantization.INT8, 16)
        for f in fields(Sequence):
            assert getattr(fast, f.name) == getattr(made, f.name), f.name


def test_capacity_floor_is_the_longest_sessions_blocks():
    """`Schedule.max_request_blocks`: the blocks of the longest session at its full length
    (every call's prompt and output), as the per-request ceiling it replaced computed it."""
    import math

    for name in ("hard", "agent-tools", "chat-human"):
        for seed in range(5):
            schedule = Simulator(get_scenario(name), seed).schedule
            for block_size in (16, 7):
                direct = max(
                    math.ceil(
                        (
                            r.prompt_tokens
                            + r.total_output
                            + sum(f.prompt_tokens for f in r.followups)
                        )
                        / block_size
                    )
                    for r in schedule.requests
                )
                assert schedule.max_request_blocks(block_size) == direct
