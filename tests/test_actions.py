"""Each action's exact effect, on tiny hand-made worlds (4-token blocks)."""

from conftest import req, steps, tiny_sim

from kv_cache_env.sim import BlockType, Phase, Quantization, Status, compress, evict, noop, swap


def test_request_lifecycle_prefill_then_decode_then_complete():
    sim = tiny_sim([req("a", prompt=8, output=8, rate=4)], capacity=10)
    tokens = []
    for _ in range(5):
        tokens.append(sim.step().tokens)
        sim.check_invariants()
    # t0 arrives; t1 admitted (2 blocks); t2 prefill + first token; t3 +4; t4 +3 and completes
    assert tokens == [0, 0, 1, 4, 3]
    a = sim.engine.sequences["a"]
    assert a.status is Status.FINISHED and a.generated == 8
    assert sim.engine.kv.pool.used == 0


def test_admission_allocates_nothing_private_until_the_chunk_is_computed():
    # vLLM v1: the first prefill chunk's blocks are allocated in the step that computes it
    sim = tiny_sim([req("a", prompt=31, output=100, rate=1)], capacity=20)
    steps(sim, 2)  # t0 arrives, t1 admitted
    a = sim.engine.sequences["a"]
    assert a.status is Status.RUNNING and a.gpu_blocks == 0 and sim.engine.kv.pool.used == 0
    assert a.prefill_remaining == 31
    steps(sim, 1)  # t2: 31 prompt tokens + the first token = 32 tokens = 8 fp16 blocks
    assert a.gpu_blocks == 8 and a.generated == 1


def test_prefill_is_chunked_and_allocates_per_chunk():
    sim = tiny_sim([req("a", prompt=30, output=10, rate=1)], capacity=20, prefill_tokens_per_s=12)
    steps(sim, 2)
    a = sim.engine.sequences["a"]
    held = []
    for _ in range(3):
        steps(sim, 1)
        held.append((a.gpu_blocks, a.prefill_remaining, a.generated))
    # 12 tokens -> 3 blocks; 24 -> 6; the last 6 + the first token = 31 tokens -> 8 blocks
    assert held == [(3, 18, 0), (6, 6, 0), (8, 0, 1)]


def test_compress_stacks_one_level_per_call_and_repacks():
    sim = tiny_sim([req("a", prompt=31, output=100, rate=1)], capacity=20)
    steps(sim, 3)  # computed: 32 tokens = 8 fp16 blocks
    a = sim.engine.sequences["a"]
    assert a.gpu_blocks == 8
    first = sim.apply(compress("a"))
    assert first.ok and first.freed_blocks == 4
    assert a.quantization_level is Quantization.INT8 and a.gpu_blocks == 4
    second = sim.apply(compress("a"))
    assert second.ok and second.freed_blocks == 2
    assert a.quantization_level is Quantization.INT4 and a.gpu_blocks == 2
    used = sim.engine.kv.pool.used
    third = sim.apply(compress("a"))
    assert not third.ok and "already int4" in third.message
    assert a.gpu_blocks == 2 and sim.engine.kv.pool.used == used
    assert sim.record().invalid_calls == 1 and sim.record().compress_calls == 2
    sim.check_invariants()
    # growth continues at int4: 16 tokens per block, a new block only past 32 tokens
    steps(sim, 1)
    assert a.gpu_blocks == 3 and a.generated == 2


def test_blocks_freed_by_compression_serve_a_waiting_request_in_the_same_step():
    sim = tiny_sim(
        [req("a", prompt=32, output=100, rate=1), req("b", arrival=1, prompt=32, output=8)],
        capacity=12,
    )
    steps(sim, 3)  # a holds 9 blocks (33 tokens); b waits (needs 8, 3 free)
    b = sim.engine.sequences["b"]
    assert b.status is Status.WAITING
    sim.apply(compress("a"))
    sim.apply(compress("a"))
    sim.step()
    sim.check_invariants()
    assert b.status is Status.RUNNING


def test_tokens_generated_while_compressed_count_with_the_quality_factor():
    scenario_quality = 1 - 0.10 * 2.0  # int4 loss x reasoning sensitivity (defaults)
    sim = tiny_sim(
        [req("a", prompt=8, output=100, rate=4, block_type=BlockType.REASONING)], capacity=40
    )
    steps(sim, 3)
    sim.apply(compress("a"))
    sim.apply(compress("a"))
    stats = sim.step()
    assert stats.tokens == 4
    assert stats.effective_tokens == 4 * scenario_quality


def test_evicting_a_shared_prefix_sequence_frees_only_its_private_blocks():
    prefix = (100, 101)
    sim = tiny_sim(
        [
            req("a", prompt=16, output=50, rate=1, prefix=prefix),
            req("b", prompt=16, output=50, rate=1, prefix=prefix),
        ],
        capacity=20,
    )
    steps(sim, 3)
    pool = sim.engine.kv.pool
    a, b = sim.engine.sequences["a"], sim.engine.sequences["b"]
    assert pool.ref_counts == {100: 2, 101: 2}
    private_a = a.gpu_blocks
    assert private_a > 0
    assert sim.observe().entry("a").frees == private_a  # shared blocks stay pinned
    before = pool.available
    result = sim.apply(evict("a"))
    assert result.ok and result.freed_blocks == private_a
    assert pool.available - before == private_a
    assert pool.ref_counts == {100: 1, 101: 1}
    # the last holder's eviction also releases the prefix blocks, which stay cached
    private_b = b.gpu_blocks
    result = sim.apply(evict("b"))
    assert result.freed_blocks == private_b + 2
    assert not pool.ref_counts and list(pool.cached) == [101, 100]
    sim.check_invariants()


def test_new_request_reuses_cached_prefix_blocks():
    prefix = (7, 8, 9)
    sim = tiny_sim(
        [
            req("a", prompt=12, output=1, prefix=prefix),
            req("b", arrival=4, prompt=16, prefix=prefix),
        ],
        capacity=20,
    )
    steps(sim, 4)  # a admitted at t1, finished at t2; its prefix stays cached
    assert sim.engine.sequences["a"].status is Status.FINISHED
    assert list(sim.engine.kv.pool.cached) == [9, 8, 7]
    stats = sim.step()  # t4: b arrives
    stats = sim.step()  # t5: b admitted with a 3-block prefix hit
    assert (stats.prefix_hit_blocks, stats.prefix_lookup_blocks) == (3, 3)
    b = sim.engine.sequences["b"]
    assert b.prefill_remaining == 4  # only the 4 private prompt tokens are computed


def test_evicted_request_is_not_readmitted_in_the_step_it_left_and_recomputes():
    sim = tiny_sim([req("a", prompt=8, output=40, rate=4)], capacity=20, prefill_tokens_per_s=6)
    steps(sim, 5)
    a = sim.engine.sequences["a"]
    generated = a.generated
    assert sim.apply(evict("a")).ok
    sim.step()
    assert a.status is Status.WAITING  # plenty of room, but not in the step it left
    sim.step()
    assert a.status is Status.RUNNING and a.phase is Phase.PREFILL
    assert a.prefill_remaining == 8 + generated
    # recompute takes ceil(tokens / prefill budget) steps, the last one emitting a token
    recompute_steps = -(-(8 + generated) // 6)
    for _ in range(recompute_steps - 1):
        assert sim.step().tokens == 0
    assert sim.step().tokens == 1
    assert a.generated == generated + 1
    assert sim.record().evictions[0].forced is False


def test_request_waiting_more_than_max_wait_fails():
    sim = tiny_sim(
        [req("a", prompt=40, output=50, rate=1), req("b", arrival=1, prompt=40)], capacity=12
    )
    failures = [sim.step().failures for _ in range(7)]
    # a admitted at t1 and holds 11 of 12 blocks from t2; b (arrived t1) needs 10 for its
    # first chunk, waits and fails once t - 1 > 3
    assert failures == [0, 0, 0, 0, 0, 1, 0]
    assert sim.engine.sequences["b"].status is Status.FAILED
    assert sim.engine.sequences["a"].preemptions == 0


def test_admission_reserves_the_first_chunk_of_every_request_admitted_in_a_step():
    # a and b arrive together; each needs 10 of the 12 blocks for its first chunk, so only a
    # can be admitted (vLLM v1 allocates a chunk's slots as it schedules it). Admitting both
    # would make the engine preempt b in the next step for nothing.
    sim = tiny_sim([req("a", prompt=40, output=50, rate=1), req("b", prompt=40)], capacity=12)
    steps(sim, 2)
    assert sim.engine.sequences["a"].status is Status.RUNNING
    assert sim.engine.sequences["b"].status is Status.WAITING
    failures = [0, 0] + [sim.step().failures for _ in range(4)]
    assert failures == [0, 0, 0, 0, 1, 0]
    assert sim.record().evictions == ()  # nothing was ever preempted


def test_swap_of_a_running_sequence_offloads_it_and_loads_it_back_on_readmission():
    scenario_bytes = 131072
    sim = tiny_sim([req("a", prompt=16, output=40, rate=4)], capacity=20)
    steps(sim, 3)  # t2 computed 16 + 1 tokens = 5 blocks
    a = sim.engine.sequences["a"]
    assert a.gpu_blocks == 5
    result = sim.apply(swap("a"))
    assert result.ok and result.freed_blocks == 5
    # offload: it leaves the GPU for the queue's front, holding its KV on CPU
    assert a.status is Status.WAITING and a.cpu_blocks == 5 and a.gpu_blocks == 0
    assert sim.engine.waiting[0] is a and sim.engine.kv.pool.used == 0
    assert sim.engine.host.cpu_used == 5
    assert not sim.apply(swap("a")).ok  # no GPU KV left to offload
    assert not sim.apply(compress("a")).ok
    stats = sim.step()  # t3: never back in the step it left
    assert a.status is Status.WAITING and stats.tokens == 0 and stats.swap_ins == 0
    stats = sim.step()  # t4: readmitted, its 5 blocks loaded back (no recompute)
    assert a.status is Status.RUNNING and a.gpu_blocks == 5 and a.cpu_blocks == 0
    assert a.prefill_remaining == 0 and sim.engine.host.cpu_used == 0
    assert stats.swap_ins == 1
    assert stats.swap_latency_s == 0.1 + 17 * scenario_bytes / 25e9
    stats = sim.step()  # t5: decodes at once
    assert stats.tokens == 4 and a.generated == 5 and a.gpu_blocks == 6
    assert a.preemptions == 0 and sim.record().evictions == ()
    sim.check_invariants()


def test_admission_is_not_gated_by_an_offloaded_request():
    # vLLM v0 admitted nothing while a request was swapped out; v1 with a KV connector does
    sim = tiny_sim(
        [req("a", prompt=16, output=40, rate=4), req("b", arrival=2, prompt=8)], capacity=40
    )
    steps(sim, 3)  # a running with 5 blocks; b arrived at t2
    sim.apply(swap("a"))
    steps(sim, 1)  # t3: a may not come back yet, b is admitted behind it
    a, b = sim.engine.sequences["a"], sim.engine.sequences["b"]
    assert a.status is Status.WAITING and a.cpu_blocks == 5
    assert b.status is Status.RUNNING
    steps(sim, 1)  # t4: a loads back
    assert a.status is Status.RUNNING and a.gpu_blocks == 5


def test_engine_fallback_preempts_newest_first_in_vllm_mode():
    requests = [req("a", prompt=16, output=40, rate=8), req("b", prompt=16, output=40, rate=8)]
    sim = tiny_sim(requests, capacity=10)
    forced = sum(sim.step().forced_preemptions for _ in range(4))
    assert forced >= 1
    first = sim.record().evictions[0]
    assert first.seq_id == "b" and first.forced


def test_engine_fallback_protects_system_in_trtllm_mode():
    requests = [
        req("a", prompt=16, output=40, rate=8),
        req("b", prompt=16, output=40, rate=8, block_type=BlockType.SYSTEM),
    ]
    sim = tiny_sim(requests, capacity=10, fallback="trtllm")
    for _ in range(4):
        sim.step()
    first = sim.record().evictions[0]
    assert first.seq_id == "a" and first.forced


def test_invalid_actions_change_nothing_and_name_the_valid_ids():
    sim = tiny_sim(
        [req("r1", prompt=16, output=40), req("r2", prompt=16, output=2), req("r3", arrival=3)],
        capacity=40,
    )
    steps(sim, 4)  # r1 running, r2 finished, r3 waiting
    pool_before = (sim.engine.kv.pool.used, sim.engine.kv.pool.available)
    cases = {
        evict("zz"): "unknown seq_id 'zz'; valid ids: r1",
        evict("r2"): "r2 already finished",
        compress("r3"): "r3 is waiting in the queue and holds no GPU blocks",
        swap("r2"): "valid ids: r1",
    }
    for action, expected in cases.items():
        result = sim.apply(action)
        assert not result.ok and expected in result.message
        assert "\n" not in result.message
    assert (sim.engine.kv.pool.used, sim.engine.kv.pool.available) == pool_before
    assert sim.apply(noop()).ok
    record = (sim.step(), sim.record())[1]
    assert record.invalid_calls == 4 and record.noop_calls == 1 + 4  # the 4 empty turns
    assert record.calls_per_turn[-1] == 5


def test_swap_refused_when_cpu_space_is_full():
    sim = tiny_sim([req("a", prompt=32, output=40)], capacity=12, cpu_capacity_fraction=0.25)
    steps(sim, 3)  # 33 tokens = 9 blocks; CPU holds 3
    result = sim.apply(swap("a"))
    assert not result.ok and "needs 9 CPU blocks, only 3 of 3 free" in result.message
    assert sim.engine.sequences["a"].gpu_blocks == 9


def test_block_events_report_stores_and_removals():
    events = []
    sim = tiny_sim([req("a", prompt=8, output=40, prefix=(5,))], capacity=20)
    sim.subscribe(events.append)
    steps(sim, 2)  # t1: admission stores the shared prefix block only
    stored = [(e.owner, e.reason, e.blocks) for e in events if e.kind == "stored"]
    assert stored == [("prefix", "admit", 1)]
    steps(sim, 1)  # t2: 4 private prompt tokens + the first token: 2 private blocks
    grow = [e for e in events if e.kind == "stored" and e.owner == "a"]
    assert [(e.reason, e.blocks) for e in grow] == [("grow", 2)]
    assert grow[0].token_range == (4, 9)  # positions after the 4-token prefix
    sim.apply(evict("a"))
    removed = [e for e in events if e.kind == "removed"]
    assert removed[-1].owner == "a" and removed[-1].reason == "evict"
    assert removed[-1].token_range == (4, 9)


def test_actions_after_the_end_are_refused():
    sim = tiny_sim([req("a")], capacity=10, steps=1)
    sim.step()
    assert sim.done
    try:
        sim.apply(noop())
    except RuntimeError as error:
        assert "over" in str(error)
    else:
        raise AssertionError("apply after the end must raise")


def test_trtllm_fallback_never_preempts_a_call_that_completed_this_step():
    requests = [
        req("a", prompt=8, output=5, rate=4),
        req("b", prompt=8, output=12, rate=8, block_type=BlockType.SYSTEM),
    ]
    sim = tiny_sim(requests, capacity=8, fallback="trtllm")
    steps(sim, 3)  # t2: both computed 9 tokens (3 blocks each)
    a = sim.engine.sequences["a"]
    # t3: a decodes its last 4 tokens (13 tokens: 4 blocks, 7 used); b needs 2 more blocks with
    # 1 free. a's call is complete: it frees its 4 blocks at the end of the step, so preempting
    # it (and recomputing a finished call) is wrong; b is preempted, or nothing is.
    steps(sim, 1)
    assert a.status is Status.FINISHED and a.generated == 5
    steps(sim, 5)
    assert a.generated == 5
    assert all(e.seq_id != "a" for e in sim.record().evictions)


def test_the_turn_rule_counts_a_turn_without_any_call_as_noop_once():
    """`play_turn` and `step` share one rule: a turn with no call (no action, valid or not, and
    no counted invalid call) is an implicit noop; a turn with any call is not."""
    sim = tiny_sim([req("r1", prompt=16, output=40)], capacity=40)
    empty = sim.play_turn([])
    assert empty.results == () and empty.stats is sim._stats[-1]
    assert sim.record().noop_calls == 1 and sim.record().calls_per_turn == (0,)
    sim.count_invalid()  # a malformed tool call is a call: no implicit noop
    sim.step()
    turn = sim.play_turn([compress("r1"), evict("zz"), noop()])
    assert [r.ok for r in turn.results] == [True, False, True]
    sim.step()  # an empty turn ended by `step` counts like `play_turn([])`
    record = sim.record()
    assert record.noop_calls == 1 + 1 + 1 and record.invalid_calls == 2
    assert record.calls_per_turn == (0, 1, 3, 0)
