"""Episode jobs: what one worker runs for one (agent, scenario, seed), as plain picklable data.

A job that raises is returned as a failed result with its error, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kv_cache_env.sim import Scenario, Schedule, get_scenario

from .policies import create
from .results import episode_result
from .runner import run_policy_episode
from .traces import Trace, load_trace, trace_scenario, trace_schedule


@dataclass(frozen=True)
class EpisodeJob:
    agent: str
    scenario: str
    """Built-in scenario name; with `trace`, the tier whose budget and mix the replay uses."""
    seed: int
    trace: str | None = None
    full: bool = False
    steps: int | None = None
    weights: tuple[tuple[str, float], ...] = ()

    @property
    def key(self) -> tuple[str, str, int]:
        """(scenario, agent, seed): how results are matched to jobs."""
        return (self.scenario_label, self.agent, self.seed)

    @property
    def scenario_label(self) -> str:
        """The name results carry (`trace_scenario` names replays after the trace file)."""
        return f"trace:{Path(self.trace).name}" if self.trace else self.scenario

    def resolve(self) -> tuple[Scenario, Schedule | None]:
        base = get_scenario(self.scenario)
        if self.steps is not None:
            base = base.with_options(steps=self.steps)
        if self.trace is None:
            return base, None
        trace = _trace(self.trace)
        scenario = trace_scenario(trace, base, full=self.full)
        return scenario, trace_schedule(trace, scenario, self.seed, full=self.full)


@lru_cache(maxsize=4)
def _trace(path: str) -> Trace:
    return load_trace(path)


def run_job(job: EpisodeJob) -> dict[str, Any]:
    weights = dict(job.weights) or None
    try:
        scenario, schedule = job.resolve()
    except ValueError as error:
        return episode_result(
            agent=job.agent, scenario=job.scenario, seed=job.seed, record=None, error=str(error)
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
