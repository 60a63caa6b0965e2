"""Sessions that pause between calls, the first-token deadline, the fallback, the drain and the
last-turn snapshot, on tiny hand-made worlds (4-token blocks, 64-token prefill budget, 3-step
wait). Every number is derived from the step order in `scheduler.py`'s docstring."""

import pytest
from conftest import call, req, steps, tiny_sim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kv_cache_env.policies import create, decide
from kv_cache_env.sim import (
    SUITE,
    BlockType,
    PauseKind,
    Simulator,
    Status,
    compress,
    evict,
    get_scenario,
    make_action,
    swap,
)
from rubrics import serving as r


def _session(**changes):
    # s: 8-token prompt, 4 outputs at 4/step, then a tool pause of 2 steps, 8 more prompt
    # tokens and 4 more outputs.
    return req("s", prompt=8, output=4, rate=4, followups=(call(2),), **changes)


def _tokens(sim, n):
    out = []
    for _ in range(n):
        out.append(sim.step().tokens)
        sim.check_invariants()
    return out


def test_kept_session_pauses_with_its_kv_on_gpu_and_resumes_at_once():
    sim = tiny_sim([_session()], capacity=20)
    # t1 admitted; t2 8 + 1 tokens (3 blocks); t3 +3 completes call 0: paused from t4
    assert _tokens(sim, 4) == [0, 0, 1, 3]
    s = sim.engine.sequences["s"]
    assert s.status is Status.PAUSED and s.gpu_blocks == 3 and sim.engine.kv.pool.used == 3
    entry = sim.observe().entry("s")
    assert entry.pause is PauseKind.SEARCH and entry.paused_for == 0 and not entry.swapped
    assert _tokens(sim, 2) == [0, 0]  # t4, t5 paused: nothing computed, KV kept
    assert s.gpu_blocks == 3 and sim.observe().entry("s").paused_for == 2
    # t6: it returns straight to running, prefills its 8 new tokens and emits a token:
    # 8 + 4 + 8 + 1 = 21 tokens = 6 blocks
    assert _tokens(sim, 1) == [1]
    assert s.status is Status.RUNNING and s.gpu_blocks == 6 and s.call == 1
    assert s.first_token_by == -1
    assert _tokens(sim, 1) == [3]  # t7: 8 outputs in all, finished
    assert s.status is Status.FINISHED and s.generated == 8 and sim.engine.kv.pool.used == 0
    assert sim.record().evictions == ()


def test_swapped_session_stays_paused_on_cpu_and_loads_back_when_it_returns():
    sim = tiny_sim([_session()], capacity=20)
    steps(sim, 4)
    s = sim.engine.sequences["s"]
    result = sim.apply(swap("s"))
    assert result.ok and result.freed_blocks == 3 and "stays paused on CPU" in result.message
    assert s.status is Status.SWAPPED and s.cpu_blocks == 3 and s.gpu_blocks == 0
    assert sim.engine.kv.pool.used == 0 and sim.engine.host.cpu_used == 3
    assert sim.observe().entry("s").swapped
    assert not sim.apply(compress("s")).ok and not sim.apply(swap("s")).ok
    assert _tokens(sim, 2) == [0, 0]
    assert s.status is Status.SWAPPED
    # t6: it returns to the queue's tail and is admitted at once: its 3 blocks are loaded
    stats = sim.step()
    sim.check_invariants()
    assert s.status is Status.RUNNING and s.gpu_blocks == 3 and s.cpu_blocks == 0
    assert s.prefill_remaining == 8 and sim.engine.host.cpu_used == 0
    assert stats.swap_ins == 1 and stats.tokens == 0
    assert stats.swap_latency_s == pytest.approx(0.1 + 12 * 131072 / 25e9)
    assert s.first_token_by == 6 + 3
    # t7: the new prompt is prefilled (6 blocks), first token; t8: done
    assert _tokens(sim, 2) == [1, 3]
    assert s.status is Status.FINISHED and s.generated == 8
    assert sim.record().evictions == ()


def test_discarded_session_recomputes_its_whole_context_when_it_returns():
    sim = tiny_sim([_session()], capacity=20)
    steps(sim, 4)
    s = sim.engine.sequences["s"]
    result = sim.apply(evict("s"))
    assert result.ok and result.freed_blocks == 3
    assert s.status is Status.DISCARDED and s.gpu_blocks == s.cpu_blocks == 0
    assert not sim.apply(evict("s")).ok  # already discarded
    assert _tokens(sim, 2) == [0, 0]
    stats = sim.step()  # t6: returns and is admitted; nothing computed yet
    sim.check_invariants()
    assert s.status is Status.RUNNING and s.gpu_blocks == 0
    assert s.prefill_remaining == 8 + 4 + 8  # old prompt, old outputs, new prompt
    assert stats.swap_ins == 0
    assert _tokens(sim, 2) == [1, 3]  # t7: 20 tokens recomputed + first token; t8 done
    assert s.status is Status.FINISHED and s.generated == 8
    record = sim.record()
    assert record.paused_evictions == 1
    (eviction,) = record.evictions
    assert eviction.paused and not eviction.forced and eviction.freed_blocks == 3


def _long_context(prefill):
    # 40-token prompt computed 8 tokens a step; a 1-step tool pause, then 8 more tokens
    return tiny_sim(
        [req("s", prompt=40, output=4, rate=4, followups=(call(1),))],
        capacity=20,
        prefill_tokens_per_s=prefill,
        steps=16,
    )


def test_discarded_long_context_misses_its_first_token_deadline_and_fails():
    sim = _long_context(8)
    # t2-t6 prefill 40 (first token at t6), t7 +3: paused from t8, returns at t9
    steps(sim, 8)
    s = sim.engine.sequences["s"]
    assert s.status is Status.PAUSED and s.resume_step == 9
    sim.apply(evict("s"))
    failures = [sim.step().failures for _ in range(6)]  # t8..t13
    # returned at t9 with a deadline of t12; 52 tokens to recompute at 8 a step: 44 left at
    # t10, 36 at t11, 28 at t12, 20 at t13 > deadline -> fails at t13
    assert failures == [0, 0, 0, 0, 0, 1]
    assert s.status is Status.FAILED and s.generated == 4
    assert sim.engine.kv.pool.used == 0
    sim.check_invariants()


@pytest.mark.parametrize("action", [None, "swap"])
def test_kept_or_offloaded_long_context_meets_the_same_deadline(action):
    sim = _long_context(8)
    steps(sim, 8)
    if action:
        assert sim.apply(make_action(action, "s")).ok
    steps(sim, 2)  # t8, t9: kept, it returns at t9 and prefills its 8 new tokens at once
    s = sim.engine.sequences["s"]
    assert s.generated == (5 if action is None else 4)
    steps(sim, 2)  # t10, t11: offloaded, it was loaded at t9 and prefills at t10
    assert s.status is Status.FINISHED and s.generated == 8
    assert sum(sim.record().failures) == 0


@pytest.mark.parametrize("fallback", ["vllm", "trtllm"])
def test_engine_fallback_never_preempts_a_paused_session(fallback):
    # p pauses for a human from t4 holding 3 of 8 blocks (the least recently used KV); r grows
    # into the rest and must preempt itself rather than touch p
    requests = [
        req("p", prompt=8, output=4, rate=4, followups=(call(10, kind=PauseKind.HUMAN),)),
        req("r", arrival=3, prompt=16, output=40, rate=4),
    ]
    sim = tiny_sim(requests, capacity=8, fallback=fallback)
    steps(sim, 6)
    p, r = sim.engine.sequences["p"], sim.engine.sequences["r"]
    # t4 r admitted (4 blocks for 16 tokens, 5 free); t5 17 tokens = 5 blocks: 8 used;
    # t6 21 tokens needs a 6th block: r is the only victim
    stats = sim.step()
    sim.check_invariants()
    assert stats.forced_preemptions == 1
    assert p.status is Status.PAUSED and p.gpu_blocks == 3 and p.preemptions == 0
    assert r.status is Status.WAITING and r.gpu_blocks == 0
    (eviction,) = sim.record().evictions
    assert eviction.seq_id == "r" and eviction.forced and not eviction.paused


def test_drain_serves_everything_until_it_completes_no_clock_edge():
    # r is mid-decode at the last turn; p's next call returns 20 steps later, in the drain
    requests = [
        req("r", prompt=8, output=12, rate=4),
        req("p", prompt=8, output=4, rate=4, followups=(call(20),)),
    ]
    sim = tiny_sim(requests, capacity=20, steps=4, tool_mix=((PauseKind.SEARCH, 1.0),))
    steps(sim, 4)
    assert sim.done
    r_seq, p = sim.engine.sequences["r"], sim.engine.sequences["p"]
    record = sim.record()
    # turns t0-t3: r 1 + 4 tokens, p 1 + 3 (call 0 done at t3, back at t3 + 1 + 20 = t24);
    # the drain: r decodes 4, 3 (t4, t5) and finishes; p returns at t24 with its KV on the
    # GPU, prefills its 8 new tokens and emits 1, then 3 at t25: drain t4-t25, 22 steps
    assert record.tokens == (0, 0, 2, 7)
    assert (record.drain_steps, record.drain_tokens, record.drain_failures) == (22, 7 + 4, 0)
    assert not record.drain_capped
    assert r_seq.status is Status.FINISHED and r_seq.generated == 12
    assert p.status is Status.FINISHED and p.generated == 8
    assert sim.engine.kv.pool.used == 0 and sim.engine.idle
    assert record.total_failures == 0


def test_in_the_drain_a_request_fails_only_by_its_own_deadline():
    # capacity 14: r (admitted at t1) grows from 41 tokens (11 blocks, t2) to 56 (14 blocks,
    # t6); w (16-token prompt: 4 blocks) arrives at step 1 and never fits beside r: it waits
    # past its 3-step deadline and fails at t5, in the drain, as it would in any step
    requests = [req("r", prompt=40, output=16, rate=4), req("w", arrival=1, prompt=16, output=4)]
    sim = tiny_sim(requests, capacity=14, steps=2)
    steps(sim, 2)
    record = sim.record()
    w = sim.engine.sequences["w"]
    assert w.status is Status.FAILED and record.drain_failures == 1 and not record.drain_capped
    assert sim.engine.sequences["r"].status is Status.FINISHED
    assert record.drain_steps == 5  # t2-t6


def test_the_drain_safety_cap_fails_what_is_left_and_says_so():
    requests = [req("p", prompt=8, output=4, rate=4, followups=(call(20),))]
    sim = tiny_sim(requests, capacity=20, steps=4, drain_cap_steps=5)
    steps(sim, 4)
    record = sim.record()
    assert record.drain_capped and record.drain_steps == 5 and record.drain_failures == 1
    assert sim.engine.sequences["p"].status is Status.FAILED and sim.engine.kv.pool.used == 0
    sim.check_invariants()


def test_no_new_pause_while_draining():
    sim = tiny_sim([_session()], capacity=20, steps=3)
    steps(sim, 3)  # turns end at t2 (first token); t3 completes call 0 in the drain
    s = sim.engine.sequences["s"]
    assert s.status is Status.FINISHED and s.generated == 4 and s.call == 0
    record = sim.record()
    assert (record.drain_steps, record.drain_tokens, record.drain_failures) == (1, 3, 0)


def _snapshot_world(**changes):
    requests = [
        req("p", prompt=8, output=4, rate=4, block_type=BlockType.CONTEXT, followups=(call(1),)),
        req("q", prompt=8, output=40, rate=4, block_type=BlockType.REASONING),
    ]
    return tiny_sim(requests, capacity=20, steps=4, **changes)


def test_eviction_quality_is_the_snapshot_at_the_last_turn_paused_kv_included():
    sim = _snapshot_world()
    steps(sim, 4)
    record = sim.record()
    # after t3: q running with 13 tokens (4 blocks), p paused with 12 tokens (3 blocks)
    assert {(x.seq_id, x.block_type, x.blocks) for x in record.residents} == {
        ("q", BlockType.REASONING, 4.0),
        ("p", BlockType.CONTEXT, 3.0),
    }
    # kept value: reasoning 0.1, context 0.75 (the original design's weights)
    assert r.eviction_quality(record) == pytest.approx((4 * 0.1 + 3 * 0.75) / 7)
    # the drain then finished both: q 35 more tokens, p's next call 4
    assert (record.drain_tokens, record.drain_failures) == (35 + 4, 0)


def test_a_last_turn_dump_raises_the_snapshot_but_pays_in_the_drain():
    kept = _snapshot_world()
    steps(kept, 4)
    dumped = _snapshot_world()
    steps(dumped, 3)
    assert dumped.apply(evict("q")).ok  # the last turn: dump the reasoning trace
    steps(dumped, 1)
    a, b = kept.record(), dumped.record()
    assert {x.seq_id for x in b.residents} == {"p"}
    assert r.eviction_quality(b) == pytest.approx(0.75)
    assert r.eviction_quality(b) > r.eviction_quality(a)
    # q recomputes in the drain (9 tokens of context) and still finishes its 40 tokens
    assert dumped.engine.sequences["q"].status is Status.FINISHED
    assert b.drain_tokens == a.drain_tokens + 4  # the 4 tokens it did not decode at t3
    assert b.drain_steps > a.drain_steps


def test_memory_efficiency_hand_computed_against_the_ideal_server():
    # a: one shared prefix block (4 tokens) + 4 private prompt tokens, 8 outputs at 4/step
    sim = tiny_sim([req("a", prompt=8, output=8, rate=4, prefix=(5,))], capacity=20, steps=5)
    steps(sim, 5)
    record = sim.record()
    # held: t1 the prefix (1), t2 1 + 2, t3 1 + 3, t4 0 (the cached prefix block is free)
    assert record.used_blocks == (0, 1, 3, 4, 0)
    assert record.tokens == (0, 0, 1, 4, 3) and record.reference_tokens == 8
    # ideal server per step: private blocks read this step / 4 (int4 packs 4 fp16 blocks) +
    # the prefix blocks referenced, each counted once: t1 0 + 1; t2 2/4 + 1; t3 3/4 + 1;
    # t4 3/4 + 0 (finished, the prefix released)
    assert record.reference_ideal_block_steps == pytest.approx(1 + 1.5 + 1.75 + 0.75)
    assert r.memory_efficiency(record) == pytest.approx((8 / 8) / (8 / 5.0))


_KINDS = ("evict", "compress", "swap", "noop")
_PAUSES = tuple(PauseKind)


@st.composite
def _worlds(draw):
    requests = []
    for i in range(draw(st.integers(1, 5))):
        followups = tuple(
            call(
                draw(st.integers(1, 6)),
                prompt=draw(st.integers(1, 24)),
                output=draw(st.integers(1, 10)),
                kind=draw(st.sampled_from(_PAUSES)),
            )
            for _ in range(draw(st.integers(0, 3)))
        )
        shared = draw(st.booleans())
        requests.append(
            req(
                f"r{i}",
                arrival=draw(st.integers(0, 6)),
                prompt=draw(st.integers(5, 40)),
                output=draw(st.integers(1, 16)),
                rate=draw(st.integers(1, 6)),
                block_type=draw(st.sampled_from(tuple(BlockType))),
                prefix=(1, 2) if shared else (),
                followups=followups,
            )
        )
    return requests


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=_worlds(),
    capacity=st.integers(16, 40),
    prefill=st.sampled_from([8, 16, 64]),
    fallback=st.sampled_from(["vllm", "trtllm"]),
    data=st.data(),
)
def test_engine_check_holds_after_random_actions_on_random_sessions(
    requests, capacity, prefill, fallback, data
):
    sim = tiny_sim(
        requests,
        capacity=capacity,
        prefill_tokens_per_s=prefill,
        fallback=fallback,
        cpu_capacity_fraction=0.5,
    )
    pool = sim.engine.kv.pool
    while not sim.done:
        for _ in range(data.draw(st.integers(0, 3))):
            seq_id = data.draw(st.sampled_from([r.seq_id for r in requests]))
            before = pool.available
            result = sim.apply(make_action(data.draw(st.sampled_from(_KINDS)), seq_id))
            assert pool.available - before == result.freed_blocks
            sim.check_invariants()
        sim.step()
        sim.check_invariants()
    record = sim.record()
    seqs = sim.engine.sequences.values()
    assert record.tokens_generated + record.drain_tokens == sum(s.generated for s in seqs)
    assert all(s.generated <= s.call_end for s in seqs)
    assert record.total_failures == sum(s.status is Status.FAILED for s in seqs)
    assert all(s.status in (Status.FINISHED, Status.FAILED, Status.RUNNING) for s in seqs)
    assert not sim.engine.waiting and not sim.engine.paused and sim.engine.host.cpu_used == 0


@pytest.mark.parametrize("policy", ["noop", "discard-paused", "swap-paused+compress-all"])
def test_no_suite_episode_reaches_the_drain_cap(policy):
    # the cap is a safety net for a runaway engine: every suite episode drains well before it
    for scenario in SUITE:
        for seed in (0, 1):
            sim = Simulator(get_scenario(scenario), seed)
            agent = create(policy)
            while not sim.done:
                for action in decide(agent, sim):
                    sim.apply(action)
                sim.step()
            record = sim.record()
            assert not record.drain_capped, (scenario, seed)
            assert record.drain_steps < sim.scenario.drain_cap // 4, (scenario, seed)
            assert sim.engine.idle


def _preempt_every_step(sim, seq_id, limit):
    """Evict `seq_id` whenever it is running, stepping the engine; returns the steps played."""
    for n in range(limit):
        s = sim.engine.sequences.get(seq_id)
        if s is not None and s.status in (Status.FAILED, Status.FINISHED):
            return n
        if s is not None and s.status is Status.RUNNING:
            assert sim.apply(evict(seq_id)).ok
        sim.engine.step()
        sim.check_invariants()
    return limit


def test_preempting_a_request_over_and_over_cannot_hold_off_its_timeout():
    # r streams its first token at t2; from then on it is evicted whenever it runs: readmitted
    # at t4 and t6 (never in the step it left), evicted again before it computes. Its client
    # has seen nothing since t2, so it fails once it has waited more than 3 steps from then:
    # at t7, a step it spends in the queue. (When each preemption restarted its wait, this
    # kept it from ever failing, and a rule that discarded every running request each turn
    # pushed all the work into the drain.)
    sim = tiny_sim([req("r", prompt=8, output=40, rate=4)], capacity=40, steps=40)
    steps(sim, 3)
    r = sim.engine.sequences["r"]
    assert r.token_step == 2 and r.status is Status.RUNNING
    played = _preempt_every_step(sim, "r", 30)
    assert r.status is Status.FAILED and r.token_step == 2 and r.preemptions == 3
    assert played == 5  # t3-t7


def test_a_preempted_request_that_streams_again_waits_afresh():
    # evicted once after its first token (t2), r recomputes and streams again: it finishes
    # (its wait runs from its last token, and it keeps receiving tokens)
    sim = tiny_sim([req("r", prompt=8, output=12, rate=4)], capacity=40, steps=40)
    steps(sim, 3)
    assert sim.apply(evict("r")).ok
    steps(sim, 8)
    r = sim.engine.sequences["r"]
    assert r.status is Status.FINISHED and r.preemptions == 1
