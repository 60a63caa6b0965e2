"""Hostile arguments to the Gymnasium envs: fractional actions, a failed reset, bad weights, huge
step counts."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import (
    Verdict,
    case,
    kvarena,
    one_line_error,
)


def expect_value_error(fn: Callable[[], Any]) -> tuple[str, str]:
    try:
        fn()
    except ValueError as error:
        return "clean", f"ValueError: {str(error)[:90]}"
    except Exception as error:  # any other exception is the crash counted
        return "crash", f"{type(error).__name__}: {error}"[:120]
    return "crash", "accepted"


@case("Gymnasium", "ServingTurns-v0 action 0.5", fast=True)
def _gym_half(tmp: Path) -> tuple[str, str]:
    import numpy as np

    from kv_cache_env.rl.gym import ServingTurnsEnv

    env = ServingTurnsEnv(scenario="hard")
    env.reset(seed=0)
    return expect_value_error(lambda: env.step(np.full(env.max_slots, 0.5)))


@case("Gymnasium", "vector env action 0.5", fast=True)
def _gym_vector_half(tmp: Path) -> tuple[str, str]:
    import numpy as np

    from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv

    envs = ServingTurnsVectorEnv(2, scenario="hard")
    envs.reset(seed=0)
    try:
        return expect_value_error(lambda: envs.step(np.full((2, envs.max_slots), 0.5)))
    finally:
        envs.close()


@case("Gymnasium", "a failed reset, then reset()", fast=True)
def _gym_poison(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    env = ServingEnv(scenario="easy")
    env.reset(seed=0)
    verdict, detail = expect_value_error(lambda: env.reset(options={"scenario": "nope"}))
    if verdict != "clean":
        return verdict, detail
    try:
        env.reset()
    except Exception as error:
        return "lost", f"the next reset fails: {error}"[:120]
    return "clean", "the failed reset stored nothing"


@case("Gymnasium", "weights NaN", fast=True)
def _gym_nan_weights(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    return expect_value_error(lambda: ServingEnv(weights={"failure_penalty": float("nan")}))


@case("Gymnasium", "unknown weights", fast=True)
def _gym_unknown_weights(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    return expect_value_error(lambda: ServingEnv(weights={"speed": 1.0}))


@case("Gymnasium", "steps = 10**7", fast=True)
def _gym_steps(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    started = time.monotonic()
    verdict, detail = expect_value_error(lambda: ServingEnv(steps=10**7).reset(seed=0))
    if time.monotonic() - started > 5:
        return "hang", f"{time.monotonic() - started:.0f}s"
    return verdict, detail


@case("Gymnasium", "--steps 10**7 on the CLI", fast=True)
def _cli_steps(tmp: Path) -> tuple[str, str]:
    done = kvarena("eval", "-p", "lru", "-s", "easy", "--steps", str(10**7), "-o", str(tmp / "o"))
    return one_line_error(done, "--steps: must be between 1 and 10000")


def _gym(build: Callable[[], Any], bound_s: float = 5.0) -> Verdict:
    started = time.monotonic()
    verdict, detail = expect_value_error(build)
    took = time.monotonic() - started
    return ("hang", f"{took:.0f}s") if took > bound_s else (verdict, detail)


def _gym_env(**kwargs: Any) -> Any:
    from kv_cache_env.rl.gym import ServingEnv

    return ServingEnv(**{"scenario": "easy", **kwargs})


_GYM: list[tuple[str, Callable[[], Any]]] = [
    ("weights latency_penalty 10**400", lambda: _gym_env(weights={"latency_penalty": 10**400})),
    ("weights as a list of pairs", lambda: _gym_env(weights=[("latency_penalty", 1.0)])),
    ("max_slots = 10**8 (gym.make, reset)", lambda: _gym_make(max_slots=10**8)),
    ("max_slots = 2.5", lambda: _gym_env(max_slots=2.5)),
    ("steps = True", lambda: _gym_env(steps=True)),
    ("max_calls_per_turn = 10**9", lambda: _gym_env(max_calls_per_turn=10**9)),
    ("seed_range = (5, 5)", lambda: _gym_env(seed_range=(5, 5))),
    ("reset(options=[('seed', 1)])", lambda: _gym_env().reset(options=[("seed", 1)])),
    ("reset(seed=True)", lambda: _gym_env().reset(seed=True)),
    ("reset(options={'seed': 2**64})", lambda: _gym_env().reset(options={"seed": 2**64})),
    ("vector num_envs = True", lambda: _gym_vector(True)),
    ("vector reset(seed=[1, True])", lambda: _gym_vector(2).reset(seed=[1, True])),
]


def _gym_make(**kwargs: Any) -> Any:
    import gymnasium

    import kv_cache_env.rl.gym  # noqa: F401 - registers the envs

    env = gymnasium.make("kvcache/Serving-v0", **{"scenario": "easy", "steps": 3, **kwargs})
    return env.reset(seed=0)


def _gym_vector(num_envs: Any) -> Any:
    from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv

    return ServingTurnsVectorEnv(num_envs, scenario="easy")


for _name, _build in _GYM:
    case("Gymnasium", _name, fast=True)(lambda tmp, build=_build: _gym(build))
