"""The honest `expert`: every hidden field is classified, its worlds read only what an agent
sees, and two episodes that differ only in a hidden part get the same actions while their
observations agree — which the clairvoyant `bound` fails (the negative control)."""

import numpy as np
import pytest

from kv_cache_env.policies import BUILTIN, bound_pool, create
from kv_cache_env.policies.base import SimulatorPolicy
from kv_cache_env.policies.bound import MACROS, BoundPolicy
from kv_cache_env.policies.expert import GRID_RULES, POOL, ExpertPolicy
from kv_cache_env.policies.heuristics import NoopPolicy, OffloadOrDiscardPolicy
from kv_cache_env.policies.session_rules import MinWastePolicy
from kv_cache_env.policies.worlds import PARTS, sample_world
from kv_cache_env.sim import SUITE, Simulator, get_scenario, render
from kv_cache_env.sim.hidden import unclassified
from rubrics import DEFAULT_WEIGHTS, score

SCENARIOS = ("agent-tools", "chat-human")
"""Where the world checks and the negative control run (the honesty test runs on the suite)."""
TURNS = 3  # turns compared per pair (observations rarely agree much longer)


def test_every_field_of_the_engines_records_is_classified():
    assert unclassified() == {}


def test_the_expert_is_registered_but_not_run_by_default_nor_in_the_bounds_pool():
    assert create("expert").name == "expert"
    assert "expert" not in BUILTIN
    assert "expert" not in {make().name for make in bound_pool()}


def test_the_experts_pool_holds_rules_that_read_the_observation_alone():
    # its grid rules are the grid's own two-liners over rendered fields; no member keeps state
    # or reads the simulator (a pool member that did would carry the truth into its play-outs)
    from kv_cache_env.policies.rule_grid import FIELDS, TwoLiner

    assert {f for pair in GRID_RULES for _, f, _, _ in pair} <= FIELDS
    policies = [make() for make in POOL]
    assert sum(isinstance(p, TwoLiner) for p in policies) == len(GRID_RULES)
    assert len({p.name for p in policies}) == len(policies)
    for policy in policies:
        assert not isinstance(policy, SimulatorPolicy) and not policy.keeps_state, policy.name
    sim = Simulator(get_scenario("agent-tools"), 3)
    for _ in range(4):
        sim.step()
    obs = sim.observe(hints=False)
    for policy in policies:
        assert policy.act(obs) == policy.act(obs)


def test_a_world_shows_the_same_observation_as_the_episode():
    for scenario in SCENARIOS:
        sim = Simulator(get_scenario(scenario), 11)
        for _ in range(3):
            sim.step()
        text = render(sim.observe(hints=False))
        for k in range(3):
            world = sample_world(sim, np.random.default_rng(k))
            assert render(world.observe(hints=False)) == text
            world.check_invariants()
            while not world.done:  # and plays on to a scored end
                world.step()
            assert np.isfinite(score(world.record(), DEFAULT_WEIGHTS).reward)


def _small_expert() -> ExpertPolicy:
    return ExpertPolicy(
        worlds=2, pool=(NoopPolicy, OffloadOrDiscardPolicy, MinWastePolicy), macros=MACROS[:6]
    )


def _pairs(scenario: str, count: int):
    """Episodes at turn 0 and a copy that differs only in one hidden part each."""
    parts = sorted(PARTS)
    for i in range(count):
        sim = Simulator(get_scenario(scenario), 800_000 + i)
        part = parts[i % len(parts)]
        twin = sample_world(sim, np.random.default_rng(10_000 + i), PARTS - {part})
        twin.seed = sim.seed
        yield part, sim, twin


def _agree(make, sim: Simulator, twin: Simulator) -> tuple[int, int]:
    """Turns compared while the observations agree, and how many got different actions."""
    a, b = make(), make()
    a.reset(sim.seed)
    b.reset(twin.seed)
    compared = differ = 0
    for _ in range(TURNS):
        if sim.done or render(sim.observe(hints=False)) != render(twin.observe(hints=False)):
            break
        first, second = a.act_in(sim), b.act_in(twin)
        compared += 1
        differ += first != second
        for action in first:
            sim.apply(action)
        for action in second:
            twin.apply(action)
        sim.step()
        twin.step()
    return compared, differ


@pytest.mark.parametrize("scenario", SUITE)
def test_the_expert_acts_alike_on_worlds_that_differ_only_in_hidden_parts(scenario):
    compared = 0
    for part, sim, twin in _pairs(scenario, 21):
        turns, differ = _agree(_small_expert, sim, twin)
        assert differ == 0, (scenario, part, sim.seed)
        compared += turns
    assert compared >= 21


def test_the_bound_reads_the_future_and_fails_the_same_test():
    differ = 0
    for scenario in SCENARIOS:
        for _, sim, twin in _pairs(scenario, 4):
            differ += _agree(lambda: BoundPolicy(pool_replays=3), sim, twin)[1]
    assert differ > 0


def test_the_expert_is_deterministic():
    def episode():
        sim = Simulator(get_scenario("chat-human"), 5)
        sim_steps = 4
        policy = _small_expert()
        policy.reset(5)
        for _ in range(sim_steps):
            for action in policy.act_in(sim):
                sim.apply(action)
            sim.step()
        return sim.record()

    assert episode() == episode()
