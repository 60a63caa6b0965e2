"""Episode jobs: what one worker runs for one (agent, episode), as plain picklable data.

A job that raises is returned as a failed result with its error, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kv_cache_env.episodes import EpisodeSpec

from ..common.results import episode_result
from .policies import create
from .runner import run_policy_episode


@dataclass(frozen=True)
class EpisodeJob:
    agent: str
    episode: EpisodeSpec
    weights: tuple[tuple[str, float], ...] = ()

    @property
    def seed(self) -> int:
        return self.episode.seed

    @property
    def key(self) -> tuple[str, str, int]:
        """(scenario, agent, seed): how results are matched to jobs."""
        return (self.episode.label, self.agent, self.episode.seed)


def run_job(job: EpisodeJob) -> dict[str, Any]:
    weights = dict(job.weights) or None
    try:
        scenario, schedule = job.episode.resolve()
    except ValueError as error:
        return episode_result(
            agent=job.agent,
            scenario=job.episode.label,
            seed=job.seed,
            record=None,
            error=str(error),
            weights=weights,
        )
    try:
        record = run_policy_episode(create(job.agent), scenario, job.seed, schedule=schedule)
    except Exception as error:  # a crashing policy is a failed episode, recorded
        return episode_result(
            agent=job.agent,
            scenario=scenario.name,
            seed=job.seed,
            record=None,
            error=f"{type(error).__name__}: {error}",
            weights=weights,
        )
    return episode_result(
        agent=job.agent, scenario=scenario.name, seed=job.seed, record=record, weights=weights
    )
