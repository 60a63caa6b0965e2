"""The `learned` baseline: registered, observation-only (the text form decides the same), its
weights file checked, and the cross-entropy learner improving on a small problem."""

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from evals.serving.learning import SHAPE, Baselines, CemConfig, play_linear, train_group
from evals.serving.runner import run_policy_episode
from kv_cache_env.policies import BUILTIN, bound_pool, create
from kv_cache_env.policies.learned import (
    INPUTS,
    WEIGHTS_FILE,
    LearnedPolicy,
    LinearWeights,
    decide_linear,
)
from kv_cache_env.sim import Simulator, get_scenario, parse, render
from rubrics import DEFAULT_WEIGHTS, score


def test_registered_observation_only_and_in_the_bounds_pool():
    policy = create("learned")
    assert isinstance(policy, LearnedPolicy) and not policy.needs_simulator
    assert "learned" in BUILTIN
    assert "learned" in {make().name for make in bound_pool()}
    shipped = json.loads(WEIGHTS_FILE.read_text())
    assert shipped["inputs"] == list(INPUTS)
    for group in ("fp16", "fp8"):
        assert np.asarray(shipped[group]).shape == SHAPE


def test_decides_the_same_from_the_text_an_llm_would_see():
    """What `learned` does from `parse(render(obs))` is what it does from `obs` (so it runs
    behind the policy server too), on both weight groups."""
    for scenario in ("hard", "chat-human"):
        sim = Simulator(get_scenario(scenario), 3)
        a, b = create("learned"), create("learned")
        acted = 0
        while not sim.done:
            obs = sim.observe(hints=False)
            actions = a.act(obs)
            assert b.act(parse(render(obs))) == actions
            acted += len(actions)
            for action in actions:
                sim.apply(action)
            sim.step()
        assert acted > 0


def test_deterministic_and_better_than_noop_where_noop_fails():
    runs = [
        score(run_policy_episode(create("learned"), get_scenario("hard"), 1), DEFAULT_WEIGHTS)
        for _ in "ab"
    ]
    assert runs[0] == runs[1]
    noop = score(run_policy_episode(create("noop"), get_scenario("hard"), 1), DEFAULT_WEIGHTS)
    assert runs[0].reward > noop.reward


def test_weights_for_other_inputs_fail_loudly():
    blob = LinearWeights(np.zeros(SHAPE), np.zeros(SHAPE)).to_json()
    assert LinearWeights.from_json(blob).fp8.shape == SHAPE
    with pytest.raises(ValueError, match="other inputs"):
        LinearWeights.from_json({**blob, "inputs": list(INPUTS[:-1])})
    with pytest.raises(ValueError, match="finite"):
        LinearWeights.from_json({**blob, "fp16": [[float("nan")] * len(INPUTS)] * 3})


def test_zero_weights_do_nothing_and_the_bias_alone_compresses():
    sim = Simulator(get_scenario("medium"), 0)
    obs = sim.observe(hints=False)
    assert decide_linear(obs, np.zeros(SHAPE)) == []
    compress_all = np.zeros(SHAPE)
    compress_all[1, INPUTS.index("bias")] = 1.0
    actions = decide_linear(obs, compress_all)
    assert {a.kind for a in actions} == {"compress"}
    assert len(actions) == sum(1 for e in obs.entries if not e.swapped)


def test_the_cross_entropy_learner_climbs_from_noop():
    """Three generations of CEM on `hard` (a few episodes each) find weights far better than
    the noop start (normalized to compress-all = 1; `hard` is an fp8 deployment)."""
    seeds = [1_500_000, 1_500_001]
    noop = [
        score(run_policy_episode(create("noop"), get_scenario("hard"), s), DEFAULT_WEIGHTS).reward
        for s in seeds
    ]
    best = [
        score(
            run_policy_episode(create("compress-all"), get_scenario("hard"), s), DEFAULT_WEIGHTS
        ).reward
        for s in seeds
    ]
    baselines = Baselines(seeds, {"hard": {"noop": np.array(noop), "compress-all": np.array(best)}})
    config = CemConfig(generations=3, population=8, seeds_per_scenario=1, select_every=1)
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = train_group("fp8", config, baselines, pool, log=lambda _: None, scenarios=["hard"])
    assert result.weights.shape == SHAPE and len(result.curve) == 3
    selected = max(p["select"] for p in result.curve)
    assert selected > 0.5  # more than half-way from noop to compress-all on held-out seeds
    got = np.mean([play_linear(result.weights, "hard", s) for s in seeds])
    assert (got - np.mean(noop)) / (np.mean(best) - np.mean(noop)) == pytest.approx(selected)


def test_inputs_are_the_slot_and_global_feature_columns():
    """`inputs` builds only the columns the policy reads; they must stay equal to the
    Gymnasium features' (`slot_features`, `global_features`) those columns, bit for bit, on
    observations with running, paused, offloaded and compressed sequences."""
    from kv_cache_env.policies.learned import _GLOBAL_IDX, ENTRY_INPUTS, inputs
    from kv_cache_env.rl.features import SLOT, global_features, slot_features

    entry_columns = np.array([SLOT[n] for n in ENTRY_INPUTS])  # the slot columns it reads

    seen: set[str] = set()
    for name, policy in (("agent-tools", "offload-or-discard"), ("hard", "compress-first")):
        sim = Simulator(get_scenario(name), 5)
        rules = create(policy)
        while not sim.done:
            obs = sim.observe()
            n = len(obs.entries)
            expected = np.empty((n, len(INPUTS)))
            expected[:, : len(entry_columns)] = slot_features(obs, max(n, 1))[:n][:, entry_columns]
            expected[:, len(entry_columns) : -1] = global_features(obs)[_GLOBAL_IDX]
            expected[:, -1] = 1.0
            assert np.array_equal(inputs(obs), expected), (name, sim.turn)
            seen |= {"swapped" for e in obs.entries if e.swapped}
            seen |= {"paused" for e in obs.entries if e.paused and not e.swapped}
            seen |= {str(e.quantization) for e in obs.entries}
            for action in rules.act(obs):
                sim.apply(action)
            sim.step()
    assert {"swapped", "paused", "int8", "int4"} <= seen, seen
