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
        actions = decide(policy, sim)
        if not actions:
            sim.count_implicit_noop()  # as an LLM reply without a tool call
        for action in actions:
            sim.apply(action)
        sim.step()
    return sim.record()
