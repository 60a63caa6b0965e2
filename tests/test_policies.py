"""The policy registry, what the heuristics do, and lookahead's guarantee."""

import pytest

from evals.policies import BUILTIN, available, create, register
from evals.policies.lookahead import BASE_HEURISTICS, LookaheadPolicy
from evals.runner import run_policy_episode
from kv_cache_env.sim import BlockType, Simulator, get_scenario
from rubrics import score


def test_registry_lists_and_builds_the_required_policies():
    required = {
        "noop",
        "random",
        "fifo",
        "lru",
        "priority",
        "trtllm",
        "compress-first",
        "lookahead",
    }
    assert required <= set(available())
    assert required <= set(BUILTIN)
    for name in available():
        assert create(name).name == name


def test_unknown_policy_error_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown policy 'belady'; known policies: noop, "):
        create("belady")


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="already registered"):
        register("lru", lambda: create("lru"))


def test_lookahead_refuses_observation_only_use():
    sim = Simulator(get_scenario("easy"), 0)
    with pytest.raises(TypeError, match="needs the simulator"):
        create("lookahead").act(sim.observe())


def test_observation_policies_only_act_through_valid_actions():
    for name in ("fifo", "lru", "priority", "trtllm", "compress-first", "headroom"):
        record = run_policy_episode(create(name), get_scenario("hard"), 1)
        assert record.invalid_calls == 0, name


def test_priority_never_evicts_system_sequences():
    for seed in range(4):
        record = run_policy_episode(create("priority"), get_scenario("hard"), seed)
        agent_evictions = [e for e in record.evictions if not e.forced]
        assert all(e.block_type is not BlockType.SYSTEM for e in agent_evictions)


def test_compress_first_compresses_before_it_evicts():
    record = run_policy_episode(create("compress-first"), get_scenario("hard"), 2)
    assert record.compress_calls > 0


def test_random_policy_is_reproducible_from_the_episode_seed():
    a = run_policy_episode(create("random"), get_scenario("medium"), 11)
    b = run_policy_episode(create("random"), get_scenario("medium"), 11)
    assert a == b


@pytest.mark.parametrize("scenario", ["easy", "medium", "hard"])
def test_lookahead_is_never_below_the_heuristics_it_considers(scenario):
    sc = get_scenario(scenario)
    for seed in range(3):
        best = max(score(run_policy_episode(make(), sc, seed)).reward for make in BASE_HEURISTICS)
        reward = score(run_policy_episode(LookaheadPolicy(), sc, seed)).reward
        assert reward >= best - 1e-12, (scenario, seed, reward, best)
