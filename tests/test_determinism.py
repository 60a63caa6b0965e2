"""Same scenario + seed + actions => bit-identical episode; clones replay the same future."""

import numpy as np
import pytest

from kv_cache_env.sim import Simulator, draw_episode, get_scenario, make_action


def _random_actions(sim: Simulator, rng: np.random.Generator):
    entries = sim.observe().entries
    actions = []
    for _ in range(int(rng.integers(0, 4))):
        kind = ("evict", "compress", "swap", "noop")[int(rng.integers(0, 4))]
        target = entries[int(rng.integers(0, len(entries)))].seq_id if entries else "none"
        actions.append(make_action(kind, target))
    return actions


@pytest.mark.parametrize("scenario", ["easy", "medium", "hard"])
@pytest.mark.parametrize("seed", [0, 1, 42])
def test_two_seeded_copies_agree_step_by_step(scenario, seed):
    sc = get_scenario(scenario)
    one, two = Simulator(sc, seed), Simulator(sc, seed)
    rng_one, rng_two = np.random.default_rng(seed), np.random.default_rng(seed)
    while not one.done:
        assert one.observe() == two.observe()
        for a, b in zip(_random_actions(one, rng_one), _random_actions(two, rng_two), strict=True):
            assert one.apply(a) == two.apply(b)
        assert one.step() == two.step()
    assert one.record() == two.record()
    assert one.record().to_dict() == two.record().to_dict()


def test_different_seeds_give_different_episodes():
    sc = get_scenario("medium")
    assert Simulator(sc, 1).schedule != Simulator(sc, 2).schedule


def test_clone_replays_the_same_future_and_does_not_touch_the_original():
    sc = get_scenario("hard")
    sim = Simulator(sc, 5)
    rng = np.random.default_rng(0)
    for _ in range(5):
        for action in _random_actions(sim, rng):
            sim.apply(action)
        sim.step()
    snapshot = sim.observe()
    copy = sim.clone()
    plan = []
    for _ in range(4):
        actions = _random_actions(copy, rng)
        plan.append(actions)
        for action in actions:
            copy.apply(action)
        copy.step()
        copy.check_invariants()
    assert sim.observe() == snapshot  # the original did not move
    for actions in plan:
        for action in actions:
            sim.apply(action)
        sim.step()
    assert sim.observe() == copy.observe()
    assert sim.record() == copy.record()


def test_the_global_numpy_random_state_is_never_used():
    np.random.seed(123)
    expected = np.random.random()
    np.random.seed(123)
    Simulator(get_scenario("hard"), 9)
    assert np.random.random() == expected


def test_an_episode_drawn_once_plays_as_one_drawn_at_reset():
    # an eval draws each episode once for all its policies (`evals.serving.runner`)
    sc = get_scenario("hard")
    draws = draw_episode(sc, 3)
    fresh, shared = Simulator(sc, 3), Simulator(sc, 3, draws=draws)
    assert shared.schedule is draws.schedule and shared.capacity == fresh.capacity
    rng_one, rng_two = np.random.default_rng(0), np.random.default_rng(0)
    while not fresh.done:
        fresh.play_turn(_random_actions(fresh, rng_one))
        shared.play_turn(_random_actions(shared, rng_two))
    assert fresh.record().to_dict() == shared.record().to_dict()
    with pytest.raises(ValueError, match="seed 3"):
        Simulator(sc, 4, draws=draws)
    with pytest.raises(ValueError, match="seed 3"):
        Simulator(get_scenario("medium"), 3, draws=draws)
    with pytest.raises(ValueError, match="not both"):
        Simulator(sc, 3, schedule=draws.schedule, draws=draws)
