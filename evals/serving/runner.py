"""Running one policy episode: simulator + policy in-process, no I/O; and the same policy as a
picklable agent for `VectorSimulator.play` (many episodes in worker processes)."""

from __future__ import annotations

from dataclasses import dataclass

from kv_cache_env.policies import Policy, create, decide
from kv_cache_env.sim import Action, EpisodeRecord, Scenario, Schedule, Simulator


def run_policy_episode(
    policy: Policy,
    scenario: Scenario,
    seed: int,
    *,
    schedule: Schedule | None = None,
) -> EpisodeRecord:
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
