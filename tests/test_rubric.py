"""The seven rubric components on hand-computed episodes, and the weighted total."""

import json
from dataclasses import replace

import pytest

from evals.common.results import SCHEMA_VERSION, dumps, episode_result, rescore, validate
from kv_cache_env.sim import BlockType, EpisodeRecord, EvictionRecord, ResidentRecord
from rubrics import DEFAULT_WEIGHTS, Weights, episode_metrics, score
from rubrics import serving as r


def record(**changes) -> EpisodeRecord:
    base = EpisodeRecord(
        scenario="hand",
        seed=0,
        turns=4,
        block_size=16,
        capacity_blocks=100,
        reference_tokens=400,
        reference_block_steps=200,
        reference_peak_blocks=80,
        used_blocks=(50, 85, 97, 100),
        queue=(0, 1, 2, 0),
        failures=(0, 0, 0, 0),
        tokens=(100, 100, 50, 50),
        effective_tokens=(100.0, 100.0, 50.0, 50.0),
        forced_preemptions=(0, 0, 1, 0),
        prefix_hit_blocks=3,
        prefix_lookup_blocks=4,
        swap_latency_s=0.0,
        evictions=(),
        residents=(),
        calls_per_turn=(1, 2, 3, 0),
        evict_calls=2,
        compress_calls=3,
        swap_calls=1,
        noop_calls=0,
        invalid_calls=0,
    )
    return replace(base, **changes)


@pytest.mark.parametrize(
    ("failures", "expected"), [(0, 0.0), (1, -0.15), (2, -0.30), (3, -0.55), (4, -0.8), (5, -1.0)]
)
def test_failure_penalty_accelerates_and_caps(failures, expected):
    rec = record(failures=(failures, 0, 0, 0))
    assert r.failure_penalty(rec) == pytest.approx(expected)
    assert r.failure_penalty(record(failures=(9, 9, 0, 0))) == -1.0


def test_throughput_is_normalised_by_the_unconstrained_reference():
    assert r.throughput_reward(record()) == pytest.approx(300 / 400)
    assert r.throughput_reward(record(reference_tokens=200)) == 1.0  # capped
    compressed = record(effective_tokens=(90.0, 90.0, 45.0, 45.0))
    assert r.throughput_reward(compressed) == pytest.approx(270 / 400)


def test_headroom_bonus_follows_the_seed_bands():
    # usage 0.50 -> 1.0, 0.85 -> 0.5, 0.97 -> 0.2, 1.00 -> -0.5
    assert r.headroom_bonus(record()) == pytest.approx((1.0 + 0.5 + 0.2 - 0.5) / 4 * 0.4)
    assert r.headroom_bonus(record(used_blocks=(0, 79, 10, 20))) == pytest.approx(0.4)


def test_memory_efficiency_compares_yield_per_block_step_with_the_ideal_server():
    # ours: 300 effective tokens / 332 block-steps held; ideal: 400 reference tokens over
    # 100 ideal block-steps -> (300 / 332) / (400 / 100)
    rec = record(reference_ideal_block_steps=100.0)
    assert r.memory_efficiency(rec) == pytest.approx((300 / 332) / 4)
    # quality loss counts: int8 tokens lower it in proportion
    lossy = record(reference_ideal_block_steps=100.0, effective_tokens=(90.0, 90.0, 45.0, 45.0))
    assert r.memory_efficiency(lossy) == pytest.approx((270 / 332) / 4)
    # 300 tokens over 75 block-steps is exactly the ideal yield of 4 per block-step: 1
    exact = record(reference_ideal_block_steps=100.0, used_blocks=(15, 20, 20, 20))
    assert r.memory_efficiency(exact) == pytest.approx(1.0)
    frugal = record(reference_ideal_block_steps=100.0, used_blocks=(5, 5, 5, 5))
    assert r.memory_efficiency(frugal) == 1.0  # capped
    # the original design's old reference (block-steps of the unconstrained engine) is not the floor
    # now
    assert r.memory_efficiency(record()) == 0.0  # no ideal block-steps recorded: undefined


def test_failures_throughput_and_latency_include_the_drain_headroom_does_not():
    drained = record(
        drain_failures=2,
        drain_tokens=60,
        drain_effective_tokens=50.0,
        reference_drain_tokens=100,
        drain_steps=4,
    )
    assert r.failure_penalty(drained) == pytest.approx(-0.30)
    assert r.throughput_reward(drained) == pytest.approx((300 + 50) / (400 + 100))
    assert r.headroom_bonus(drained) == r.headroom_bonus(record())
    assert drained.total_failures == 2


def test_eviction_quality_weights_what_is_left_by_block_type_value():
    residents = (
        ResidentRecord("a", BlockType.SYSTEM, 10.0),  # value 1.0
        ResidentRecord("b", BlockType.REASONING, 30.0),  # value 0.1
        ResidentRecord("c", BlockType.CONTEXT, 20.0),  # value 0.75
    )
    expected = (10 * 1.0 + 30 * 0.1 + 20 * 0.75) / 60
    assert r.eviction_quality(record(residents=residents)) == pytest.approx(expected)
    assert r.eviction_quality(record()) == 0.0


def test_latency_penalty_scales_and_caps():
    assert r.latency_penalty(record(swap_latency_s=0.5)) == pytest.approx(-0.1)
    assert r.latency_penalty(record(swap_latency_s=10)) == -0.3


def test_risky_eviction_penalty_rules():
    def ev(block_type, priority, progress, forced=False):
        return EvictionRecord(0, "x", block_type, priority, progress, forced, 1)

    evictions = (
        ev(BlockType.SYSTEM, 0.1, 0.0),  # +0.3
        ev(BlockType.CONTEXT, 0.5, 0.0),  # +0.15
        ev(BlockType.CONTEXT, 0.49, 0.0),  # +0
        ev(BlockType.GENERATION, 0.7, 0.7, forced=True),  # +0.2, forced counts too
        ev(BlockType.GENERATION, 0.7, 0.69),  # +0
        ev(BlockType.EPHEMERAL, 1.0, 1.0),  # +0
    )
    assert r.risky_eviction_penalty(record(evictions=evictions)) == pytest.approx(-0.65)
    many = tuple(ev(BlockType.SYSTEM, 0.9, 0.9) for _ in range(5))
    assert r.risky_eviction_penalty(record(evictions=many)) == -1.0


def test_reward_is_the_weighted_sum_and_weights_can_be_overridden():
    rec = record(failures=(1, 0, 0, 0), swap_latency_s=0.5)
    s = score(rec, DEFAULT_WEIGHTS)
    assert s.weights == DEFAULT_WEIGHTS
    assert s.reward == pytest.approx(sum(DEFAULT_WEIGHTS[k] * v for k, v in s.components.items()))
    only_failures = score(
        rec, Weights({k: 0.0 for k in DEFAULT_WEIGHTS} | {"failure_penalty": 1.0})
    )
    assert only_failures.reward == pytest.approx(-0.15)
    with pytest.raises(ValueError, match="unknown rubric component 'speed'"):
        Weights({"speed": 1.0})
    with pytest.raises(TypeError, match=r"rubrics\.Weights"):
        score(rec, {"failure_penalty": 1.0})  # type: ignore[arg-type]  # unchecked weights


def test_metrics_from_the_record():
    m = episode_metrics(record())
    assert m["pressure_steps"] == 2  # 0.97 (and a forced preemption) and 1.00
    assert m["tool_calls_per_turn"] == 1.5
    assert m["prefix_hit_rate"] == 0.75
    assert m["forced_preemptions"] == 1 and m["tokens_generated"] == 300


def test_record_round_trips_through_json():
    rec = record(
        evictions=(EvictionRecord(1, "r3", BlockType.CONTEXT, 0.6, 0.25, False, 7),),
        residents=(ResidentRecord("r4", BlockType.REASONING, 2.5),),
    )
    assert EpisodeRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    with pytest.raises(ValueError, match="lacks fields"):
        EpisodeRecord.from_dict({"scenario": "x"})


def test_results_schema_for_ok_and_failed_episodes():
    rec = record()
    ok = episode_result(agent="lru", scenario="hand", seed=0, record=rec)
    assert ok["schema_version"] == SCHEMA_VERSION and ok["status"] == "ok"
    assert validate(ok) == []
    assert ok["series"]["usage"] == [0.5, 0.85, 0.97, 1.0]
    assert rescore(ok) == pytest.approx(ok["reward"])
    assert json.loads(dumps(ok)) == ok
    failed = episode_result(
        agent="m", scenario="hand", seed=1, record=None, error="provider timeout"
    )
    assert failed["status"] == "failed" and failed["reward"] is None and validate(failed) == []
    with pytest.raises(ValueError):
        episode_result(agent="m", scenario="hand", seed=1, record=None)
    broken = dict(ok, reward=ok["reward"] + 1)
    assert "reward is not the weighted sum of the components" in validate(broken)
