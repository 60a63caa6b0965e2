"""The typed results `kvarena validate` plays into: one episode's `EpisodeResult`, a run's
`Results` by (scenario, agent, seed), through the worker pool and back."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from evals.common.results import episode_result
from evals.serving.runner import run_policy_episode
from evals.serving.validate_jobs import Job, run_job, run_jobs
from evals.serving.validate_results import EpisodeResult, Results, record_digest
from kv_cache_env.policies import create
from kv_cache_env.sim import get_scenario
from rubrics import COMPONENTS, METRIC_NAMES

JOBS = [Job("lru", "easy", 0), Job("noop", "easy", 1), Job("lru", "easy", 1)]


def test_a_played_episode_holds_what_the_results_schema_says_of_it():
    result = run_job(Job("lru", "easy", 0))
    # the same episode as `eval` plays it, through the results schema: the same figures
    record = run_policy_episode(create("lru"), get_scenario("easy"), 0)
    schema = episode_result(agent="lru", scenario="easy", seed=0, record=record)
    assert result.ok and result.key == ("easy", "lru", 0)
    assert result.reward == schema["reward"]
    assert dict(result.components) == schema["components"]
    assert set(result.components) == set(COMPONENTS)
    assert dict(result.metrics) == schema["metrics"] and set(result.metrics) == set(METRIC_NAMES)
    assert result.record_digest == record_digest(schema["record"])
    assert result.dump_reward is None and result.plays == 0 and result.seconds >= 0


def test_the_fingerprint_is_every_field_but_the_seconds():
    first, again = run_job(Job("lru", "easy", 0)), run_job(Job("lru", "easy", 0))
    assert first.fingerprint() == again.fingerprint()
    assert replace(first, seconds=99.0).fingerprint() == first.fingerprint()
    assert replace(first, plays=1).fingerprint() != first.fingerprint()
    assert replace(first, reward=0.5).fingerprint() != first.fingerprint()
    other_seed = run_job(Job("lru", "easy", 1))
    assert replace(other_seed, seed=0).fingerprint() != first.fingerprint()  # the record differs


def test_a_crashed_agent_is_a_failed_result_whose_reward_is_never_read_as_a_number():
    crashed = run_job(Job("no-such-policy", "easy", 0))
    assert not crashed.ok and crashed.reward is None and crashed.record_digest is None
    assert crashed.error is not None and crashed.error.startswith("ValueError: unknown policy")
    results = Results()
    results.add(run_job(Job("lru", "easy", 0)))
    results.add(crashed)
    assert results.failures() == [crashed]
    assert len(results.rewards("easy", "lru", [0])) == 1
    with pytest.raises(ValueError, match="no-such-policy on easy seed 0 has no reward"):
        results.rewards("easy", "no-such-policy", [0])


def test_results_pair_seeds_in_the_order_asked_and_a_later_result_replaces_one():
    results = run_jobs(JOBS, workers=1)
    assert len(results) == 3
    lru = [results["easy", "lru", s].reward for s in (1, 0)]
    assert results.rewards("easy", "lru", [1, 0]) == lru
    calls = results.metrics("easy", "lru", [0, 1], "evict_calls")
    assert calls == [results["easy", "lru", s].metrics["evict_calls"] for s in (0, 1)]
    later = Results()
    later.add(replace(results["easy", "lru", 0], reward=-1.0))
    results.update(later)
    assert len(results) == 3 and results.rewards("easy", "lru", [0]) == [-1.0]


def test_results_come_back_from_worker_processes_unchanged():
    alone, pooled = run_jobs(JOBS, workers=1), run_jobs(JOBS, workers=2)
    assert [r.key for r in alone] != [] and {r.key for r in alone} == {r.key for r in pooled}
    assert all(pooled[r.key].fingerprint() == r.fingerprint() for r in alone)
    result = alone["easy", "lru", 0]
    assert pickle.loads(pickle.dumps(result)) == result
    failed = EpisodeResult.failed("x", "easy", 0, "RuntimeError: boom")
    assert pickle.loads(pickle.dumps(failed)) == failed
