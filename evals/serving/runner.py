"""Running one policy episode: simulator + policy in-process, no I/O; and the same policy as a
picklable agent for `VectorSimulator.play` (many episodes in worker processes).

A process keeps the draws of its last `DRAWS_KEPT` suite episodes (`episode_draws`): an eval
plays every policy on the same episodes, and the schedule and its reference run were most of a
reset's cost, paid again by each policy."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kv_cache_env.policies import Policy, create, decide
from kv_cache_env.sim import (
    Action,
    EpisodeDraws,
    EpisodeRecord,
    Scenario,
    Schedule,
    Simulator,
    draw_episode,
)

DRAWS_KEPT = 32
"""Episodes whose draws a process keeps: an eval's jobs go scenario by scenario, and one
scenario's seeds fit (a `hard` episode's draws are ~100 requests)."""


@lru_cache(maxsize=DRAWS_KEPT)
def episode_draws(scenario: Scenario, seed: int) -> EpisodeDraws:
    """`draw_episode(scenario, seed)`, kept for the process's next policy on that episode (the
    draws are immutable, so sharing them changes nothing)."""
    return draw_episode(scenario, seed)


def run_policy_episode(
    policy: Policy,
    scenario: Scenario,
    seed: int,
    *,
    schedule: Schedule | None = None,
) -> EpisodeRecord:
    if schedule is None:
        sim = Simulator(scenario, seed, draws=episode_draws(scenario, seed))
    else:
        sim = Simulator(scenario, seed, schedule=schedule)
    policy.reset(seed)
    while not sim.done:
        sim.play_turn(decide(policy, sim))
    return sim.record()


@dataclass(frozen=True)
class PolicyAgent:
    """`VectorSimulator.play`'s agent factory for the built-in policy `name`: called with an
    episode's seed, it returns that episode's turn function (the policy reset to the seed), so
    `vec.play(PolicyAgent("lru"))` plays each episode as `run_policy_episode` does."""

    name: str

    def __call__(self, seed: int) -> _Turns:
        policy = create(self.name)
        policy.reset(seed)
        return _Turns(policy)


@dataclass(frozen=True)
class _Turns:
    policy: Policy

    def __call__(self, sim: Simulator) -> list[Action]:
        return decide(self.policy, sim)
