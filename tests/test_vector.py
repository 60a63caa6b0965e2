"""`VectorSimulator` gives every episode exactly what the scalar engine gives it.

The scalar side is played here with `Simulator` directly (not through the batched code)."""

import numpy as np
import pytest

from evals.serving.runner import PolicyAgent, run_policy_episode
from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.policies import create
from kv_cache_env.sim import Simulator, VectorSimulator, get_scenario, make_action

EPISODES = [("hard", 3), ("agent-tools", 4), ("chat-human", 5), ("flash-crowd", 6), ("easy", 7)]


def _random_turn(obs, rng):
    """0-3 random actions (some invalid) on the observation's entries."""
    actions = []
    for _ in range(int(rng.integers(0, 4))):
        kind = ("evict", "compress", "swap", "noop")[int(rng.integers(0, 4))]
        target = obs.entries[int(rng.integers(0, len(obs.entries)))].seq_id if obs.entries else "x"
        actions.append(make_action(kind, target))
    return actions


def _scalar_random_episode(name, seed):
    sim = Simulator(get_scenario(name), seed)
    rng = np.random.default_rng(seed)
    observations, results = [], []
    while not sim.done:
        obs = sim.observe()
        observations.append(obs)
        results.append(sim.play_turn(_random_turn(obs, rng)).results)
    return observations, results, sim.record()


@pytest.mark.parametrize("workers", [0, 2])
def test_step_api_equals_the_scalar_engine_episode_by_episode(workers):
    rngs = [np.random.default_rng(seed) for _, seed in EPISODES]
    seen = [[] for _ in EPISODES]
    applied = [[] for _ in EPISODES]
    with VectorSimulator(EPISODES, workers=workers) as vec:
        observations = vec.reset()
        while not vec.done:
            turn = []
            for i, obs in enumerate(observations):
                if obs is None:
                    turn.append([])
                    continue
                seen[i].append(obs)
                turn.append(_random_turn(obs, rngs[i]))
            steps = vec.step(turn)
            for i, step in enumerate(steps):
                if step.stats is not None:
                    applied[i].append(step.results)
            observations = [s.observation for s in steps]
        records = vec.records()
    assert [s.record for s in steps] == records
    for i, (name, seed) in enumerate(EPISODES):
        observations, results, record = _scalar_random_episode(name, seed)
        assert seen[i] == observations
        assert applied[i] == results
        assert records[i] == record
        assert records[i].to_dict() == record.to_dict()


def test_play_equals_run_policy_episode():
    episodes = [(name, seed) for name in ("hard", "agent-tools") for seed in (11, 12, 13)]
    with VectorSimulator(episodes, workers=2, observe=None) as vec:
        records = vec.play(PolicyAgent("lru"))
    for (name, seed), record in zip(episodes, records, strict=True):
        assert record == run_policy_episode(create("lru"), get_scenario(name), seed)


def test_trace_episode_specs_are_built_in_the_worker():
    spec = EpisodeSpec("medium", 2, trace="azure-conv-2023", steps=12)
    with VectorSimulator([spec], workers=1) as vec:
        (record,) = vec.play(PolicyAgent("trtllm"))
    scenario, schedule = spec.resolve()
    assert record == run_policy_episode(create("trtllm"), scenario, 2, schedule=schedule)


def test_misuse_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        VectorSimulator([])
    vec = VectorSimulator([("easy", 1)])
    with pytest.raises(RuntimeError, match="reset"):
        vec.step([[]])
    vec.reset()
    with pytest.raises(ValueError, match="one action list per episode"):
        vec.step([[], []])
    while not vec.done:
        vec.step([[]])
    with pytest.raises(ValueError, match="done"):
        vec.step([[make_action("noop")]])
    vec.close()


def test_a_worker_error_is_raised_in_the_caller():
    with (
        VectorSimulator([("no-such-scenario", 1)], workers=1) as vec,
        pytest.raises(RuntimeError, match="worker failed"),
    ):
        vec.reset()


@pytest.mark.parametrize("workers", [0, 2])
def test_reset_with_new_specs_and_one_episode_at_a_time(workers):
    with VectorSimulator([("easy", 1), ("medium", 2), ("hard", 3)], workers=workers) as vec:
        first = vec.reset([("easy", 21), ("medium", 22), ("hard", 23)])
        assert first[2] == Simulator(get_scenario("hard"), 23).observe()
        while not vec.dones[0]:
            vec.step([[], [], []])
        fresh = vec.reset_at(0, ("chat-human", 24))
        assert fresh == Simulator(get_scenario("chat-human"), 24).observe()
        assert vec.dones == [False, True, True]  # all three were played as long as the first
        while not vec.done:
            vec.step([[], [], []])
        records = vec.records()
    scalar = Simulator(get_scenario("chat-human"), 24)
    while not scalar.done:
        scalar.play_turn([])
    assert records[0] == scalar.record()
    with pytest.raises(IndexError):
        vec.reset_at(3)


@pytest.mark.parametrize("workers", [0, 2])
def test_play_returns_the_callers_order_and_leaves_a_consistent_pool(workers):
    """`play` hands episodes to whichever worker is free, so episode i may be played outside
    the worker that owns it for `step`: the records still come back in order, equal to the
    scalar engine's, and records / step / reset_at / play go on working afterwards, with the
    specs the caller holds (one replaced by `reset_at`)."""
    names = ("easy", "hard", "agent-tools", "chat-human", "flash-crowd", "medium", "hard")
    episodes = [(name, 30 + k) for k, name in enumerate(names)]
    scalar = [run_policy_episode(create("lru"), get_scenario(n), s) for n, s in episodes]
    with VectorSimulator(episodes, workers=workers, observe=None) as vec:
        records = vec.play(PolicyAgent("lru"))
        assert records == scalar
        assert vec.done and vec.records() == scalar
        steps = vec.step([[] for _ in episodes])  # every episode is done: left alone
        assert [(s.stats, s.results, s.done, s.record) for s in steps] == [
            (None, (), True, r) for r in scalar
        ]
        vec.reset_at(5, ("hard", 99))  # episode 5 runs again, from a new spec
        assert vec.dones == [True] * 5 + [False, True]
        while not vec.done:
            steps = vec.step([[] for _ in episodes])
        fresh = Simulator(get_scenario("hard"), 99)
        while not fresh.done:
            fresh.play_turn([])
        assert steps[5].record == fresh.record()
        assert vec.records() == [*scalar[:5], fresh.record(), scalar[6]]
        again = vec.play(PolicyAgent("lru"))  # the replaced spec is the one played
        assert again[5] == run_policy_episode(create("lru"), get_scenario("hard"), 99)
        assert again[:5] == scalar[:5] and again[6] == scalar[6]


def test_a_worker_error_in_play_leaves_the_pool_usable():
    """One bad spec fails `play` in the caller; the other worker's reply is still read, so the
    next call gets its own replies, after a reset."""
    with VectorSimulator([("no-such-scenario", 1), ("easy", 2), ("easy", 3)], workers=2) as vec:
        with pytest.raises(RuntimeError, match="no-such-scenario"):
            vec.play(PolicyAgent("lru"))
        with pytest.raises(RuntimeError, match="reset"):  # the episodes are in no known state
            vec.records()
        first = vec.reset([("easy", 4), ("medium", 5), ("easy", 6)])
        assert first[1] == Simulator(get_scenario("medium"), 5).observe()
        records = vec.play(PolicyAgent("noop"))
    assert records[2] == run_policy_episode(create("noop"), get_scenario("easy"), 6)
