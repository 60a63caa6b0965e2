"""The Gymnasium envs against hostile arguments: actions must be whole numbers in range (0.5 is
not "keep", and nothing is applied), a failed reset leaves the env as it was, weights are
checked as the CLI checks them, and `steps` has its documented upper bound."""

from __future__ import annotations

import numpy as np
import pytest

from kv_cache_env.limits import MAX_EPISODE_STEPS
from kv_cache_env.rl.gym import ServingEnv, ServingTurnsEnv, make_vector_env
from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv

BAD_SCALAR = [0.5, np.float64(1.5), float("nan"), -1, 10**9, True, np.bool_(True), "3", [1]]


@pytest.mark.parametrize("action", BAD_SCALAR, ids=repr)
def test_a_discrete_action_must_be_a_whole_number_in_range(action):
    env = ServingEnv(scenario="hard")
    env.reset(seed=0)
    before = env.sim.record().to_dict()
    with pytest.raises(ValueError, match=r"action must be an integer in 0\.\."):
        env.step(action)
    assert env.sim.record().to_dict() == before, "nothing applied"


def test_whole_floats_and_numpy_integers_are_actions():
    env = ServingEnv(scenario="hard")
    env.reset(seed=0)
    for action in (np.int64(0), 0.0, np.float32(0)):
        env.step(action)


def _turns_env() -> ServingTurnsEnv:
    env = ServingTurnsEnv(scenario="hard", max_slots=8)
    env.reset(seed=0)
    return env


@pytest.mark.parametrize(
    "values",
    [
        [0.5] + [0] * 7,  # was read as "keep" by the check, then run as swap
        [np.nan] + [0] * 7,
        [4] + [0] * 7,
        [-1] + [0] * 7,
        [True] * 8,
        [0] * 7,
    ],
    ids=["half", "nan", "too-high", "negative", "bools", "short"],
)
def test_a_turn_action_must_be_whole_numbers_in_range(values):
    env = _turns_env()
    turn = env.sim.turn
    with pytest.raises(ValueError, match=r"action must be \(8,\) integers in 0..3"):
        env.step(np.array(values))
    assert env.sim.turn == turn and env.sim.calls_this_turn == 0


def test_a_vector_action_must_be_whole_numbers_in_range():
    envs = ServingTurnsVectorEnv(2, scenario="hard", max_slots=8)
    envs.reset(seed=0)
    choice = np.zeros((2, 8))
    choice[1, 3] = 0.5
    with pytest.raises(ValueError, match=r"actions must be \(2, 8\) integers"):
        envs.step(choice)
    envs.step(np.zeros((2, 8)))  # whole floats are fine
    envs.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"scenario": "nope"}, "nope"),
        ({"trace": "no-such-trace.jsonl"}, "no such trace file"),
        ({"scenario": 5}, "must be a name"),
        ({"seed": -3}, "must be between 0 and"),
        ({"seed": 1.5}, "must be an integer"),
        ({"colour": "red"}, "unknown reset options"),
    ],
)
@pytest.mark.parametrize("env_class", [ServingEnv, ServingTurnsEnv])
def test_a_failed_reset_does_not_poison_the_next(env_class, options, message):
    env = env_class(scenario="easy")
    env.reset(seed=1)
    with pytest.raises(ValueError, match=message):
        env.reset(options=options)
    assert (env.scenario, env.trace) == ("easy", None)
    _, info = env.reset(options={"seed": 4})
    assert info["scenario"] == "easy" and info["episode_seed"] == 4


def test_a_failed_vector_reset_does_not_poison_the_next():
    envs = ServingTurnsVectorEnv(2, scenario="easy", max_slots=8)
    envs.reset(seed=0)
    with pytest.raises(ValueError):
        envs.reset(options={"scenario": "nope"})
    with pytest.raises(ValueError):
        envs.reset(options={"seed": [1, 2.5]})
    assert envs.scenarios == ["easy", "easy"]
    _, infos = envs.reset(options={"seed": 9})
    assert list(infos["scenario"]) == ["easy", "easy"]
    envs.close()


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"failure_penalty": float("nan")}, "must be finite"),
        ({"failure_penalty": float("inf")}, "must be finite"),
        ({"failure_penalty": 1e300}, "at most 1e\\+06"),
        ({"speed": 1.0}, "unknown rubric component"),
        ({"failure_penalty": "3"}, "must be a number"),
        ({"failure_penalty": True}, "must be a number"),
    ],
)
def test_weights_are_checked_when_the_env_is_made(weights, message):
    with pytest.raises(ValueError, match=message):
        ServingEnv(scenario="easy", weights=weights)
    with pytest.raises(ValueError, match=message):
        make_vector_env(2, mode="batched", env_id="kvcache/ServingTurns-v0", weights=weights)


def test_steps_have_a_documented_upper_bound():
    assert MAX_EPISODE_STEPS == 10_000
    with pytest.raises(ValueError, match="steps must be between 1 and 10000"):
        ServingEnv(scenario="easy", steps=10**7)
    with pytest.raises(ValueError, match="steps must be between 1 and 10000"):
        ServingTurnsEnv(scenario="easy", steps=0)
    ServingEnv(scenario="easy", steps=MAX_EPISODE_STEPS)  # the bound itself is accepted
