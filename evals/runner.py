"""Running one policy episode: simulator + policy in-process, no I/O."""

from __future__ import annotations

from kv_cache_env.sim import EpisodeRecord, Scenario, Schedule, Simulator

from .policies import Policy, decide


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
        for action in decide(policy, sim):
            sim.apply(action)
        sim.step()
    return sim.record()
