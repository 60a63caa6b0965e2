"""The Gymnasium envs against hostile arguments: actions must be whole numbers in range (0.5 is
not "keep", and nothing is applied), a failed reset leaves the env as it was, weights are
checked as the CLI checks them, and every constructor argument and reset option is type- and
range-checked (`steps`, `max_slots`, seeds: a bool is not an integer)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from kv_cache_env.limits import MAX_EPISODE_STEPS
from kv_cache_env.rl.gym import ENV_ID, ServingEnv, ServingTurnsEnv, make_vector_env
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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": {"latency_penalty": 10**400}}, "must be finite and at most 1e\\+06"),
        ({"weights": [("latency_penalty", 1.0)]}, "weights must map rubric components"),
        ({"max_slots": 10**8}, "max_slots must be between 1 and 4096"),
        ({"max_slots": 0}, "max_slots must be between 1 and 4096"),
        ({"max_slots": 2.0}, "max_slots must be an integer"),
        ({"max_slots": True}, "max_slots must be an integer in 1..4096, got a bool"),
        ({"steps": True}, "steps must be an integer in 1..10000, got a bool"),
        ({"steps": "5"}, "steps must be an integer"),
        ({"max_calls_per_turn": 10**9}, "max_calls_per_turn must be between 1 and 4096"),
        ({"seed_range": (5,)}, "seed_range must be \\(low, high\\)"),
        ({"seed_range": (5, 5)}, "seed_range's high must be between 6"),
        ({"seed_range": (0, 2**64)}, "seed_range's high must be between"),
        ({"scenario": 5}, "scenario must be a name"),
        ({"trace": 5}, "trace must be a name or path"),
    ],
)
def test_constructor_arguments_are_type_and_range_checked(kwargs, message):
    import time

    started = time.monotonic()
    with pytest.raises(ValueError, match=message):
        gymnasium.make(ENV_ID, **{"scenario": "easy", **kwargs}).reset(seed=0)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("reset", "message"),
    [
        ({"options": [("seed", 1)]}, "options must be a dict"),
        ({"options": "seed=1"}, "options must be a dict"),
        ({"seed": True}, "seed must be an integer in 0..9223372036854775807, got a bool"),
        ({"seed": -1}, "seed must be between 0 and"),
        ({"seed": 2**64}, "seed must be between 0 and"),
        ({"options": {"seed": True}}, "options\\['seed'\\] must be an integer"),
        ({"options": {"seed": 2**63}}, "options\\['seed'\\] must be between 0 and"),
    ],
)
@pytest.mark.parametrize("env_class", [ServingEnv, ServingTurnsEnv])
def test_reset_arguments_are_type_and_range_checked(env_class, reset, message):
    env = env_class(scenario="easy")
    env.reset(seed=1)
    with pytest.raises(ValueError, match=message):
        env.reset(**reset)
    _, info = env.reset(options={"seed": 4})  # nothing was stored
    assert info["episode_seed"] == 4


def test_vector_arguments_are_type_and_range_checked():
    for kwargs, message in (
        ({"num_envs": True}, "num_envs must be an integer in 1..4096, got a bool"),
        ({"num_envs": 10**6}, "num_envs must be between 1 and 4096"),
        ({"num_envs": 2, "max_slots": 10**8}, "max_slots must be between 1 and 4096"),
    ):
        with pytest.raises(ValueError, match=message):
            ServingTurnsVectorEnv(scenario="easy", **kwargs)
    envs = ServingTurnsVectorEnv(2, scenario="easy")
    try:
        for reset, message in (
            ({"seed": [1, True]}, "seed must be an integer in 0..9223372036854775807, got a bool"),
            ({"seed": "12"}, "seed must be an integer or 2 of them"),
            ({"options": [("seed", 1)]}, "options must be a dict"),
            ({"options": {"seed": "ab"}}, "options\\['seed'\\] must be an integer or 2"),
        ):
            with pytest.raises(ValueError, match=message):
                envs.reset(**reset)
        envs.reset(seed=0)
    finally:
        envs.close()
