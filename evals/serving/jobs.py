"""Episode jobs: what one worker runs for one (agent, episode), as plain picklable data.

A job carries the run's rubric weights (`rubrics.Weights`, checked once at the CLI's edge): its
result is scored under them, and a planner is built with them, so the bound searches under the
weights it is scored by. A job that raises is returned as a failed result with its error, never
dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.policies import create
from rubrics import DEFAULT_WEIGHTS, Weights

from ..common.results import episode_result
from .runner import run_policy_episode

COVERS = "it holds seeds 0-99 of the suite's scenarios at their own number of turns, no replay"
"""What the shipped reference table can answer, as the console says it."""


@dataclass(frozen=True)
class EpisodeJob:
    agent: str
    episode: EpisodeSpec
    weights: Weights = DEFAULT_WEIGHTS
    """The run's weights: what the result is scored with and a planner searches under."""

    def __post_init__(self) -> None:
        if not isinstance(self.weights, Weights):
            raise TypeError(f"EpisodeJob.weights must be rubrics.Weights, not {self.weights!r}")

    @property
    def seed(self) -> int:
        return self.episode.seed

    @property
    def key(self) -> tuple[str, str, int]:
        """(scenario, agent, seed): how results are matched to jobs."""
        return (self.episode.label, self.agent, self.episode.seed)


def reference_from_table(
    jobs: list[EpisodeJob],
) -> tuple[list[dict[str, Any]], list[EpisodeJob]]:
    """(results answered from the shipped reference table, jobs left to compute). A job is
    answered only where the table holds its exact episode for this code and its weights
    (`ReferenceTable.covers`: the bound's records are the default weights' bound's); its result
    is built from the stored record exactly as `run_job` builds it from a played one. Says on the
    console which it was, when there were reference jobs."""
    from ..common.console import console
    from .reference_table import AGENTS, played_alike, shipped, status

    wanted = [job for job in jobs if job.agent in AGENTS]
    searched = [job for job in wanted if not played_alike(job.agent, job.weights)]
    if searched:
        names = " and ".join(dict.fromkeys(job.agent for job in searched))
        console.print(
            f"reference: {names} played under the given --weights, not taken from the shipped "
            "table (it holds the default weights' bound): slow, about 1-6 s of CPU an episode"
        )
        wanted = [job for job in wanted if job not in searched]
    if not wanted:
        return [], jobs
    table = shipped()
    hits = [
        job
        for job in wanted
        if table is not None and table.covers(job.agent, job.episode, job.weights)
    ]
    if len(hits) == len(wanted):
        console.print(f"reference: shipped table ({len(hits)} episodes of noop and bound)")
    elif hits:
        console.print(
            f"reference: shipped table for {len(hits)} episodes, computed for "
            f"{len(wanted) - len(hits)} ({COVERS})"
        )
    elif table is not None and table.current:
        console.print(
            f"reference: computed (these episodes are not in the shipped table: {COVERS})"
        )
    else:
        console.print(f"reference: computed ({status()})")
    if not hits:
        return [], jobs
    assert table is not None
    answered = [
        episode_result(
            agent=job.agent,
            scenario=job.episode.scenario,
            seed=job.seed,
            record=table.record(job.agent, job.episode.scenario, job.seed),
            weights=job.weights,
        )
        for job in hits
    ]
    taken = set(hits)
    return answered, [job for job in jobs if job not in taken]


def reference_for_scoring(
    results: list[dict[str, Any]], weights: Weights
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """noop's and the bound's results from the shipped table for the (scenario, seed) pairs of
    `results` whose run did not play them, to normalize by (never written to results.jsonl);
    and, per scenario completed so, where its reference came from. Only for suite episodes at
    the scenario's own length (the caller checks `--steps` and `--trace`), and the bound only
    under the default weights (the table's bound searched under them: under other weights it
    is no bound, and the scenario is left unnormalized unless the run played it)."""
    from .reference_table import AGENTS, played_alike, shipped

    table = shipped()
    if table is None or not table.current:
        return [], {}
    played = {(r["scenario"], r["agent"]) for r in results}
    extra: list[dict[str, Any]] = []
    sources: dict[str, str] = {}
    for scenario in dict.fromkeys(r["scenario"] for r in results):
        seeds = sorted({r["seed"] for r in results if r["scenario"] == scenario})
        missing = [a for a in AGENTS if (scenario, a) not in played]
        if not missing or not all(
            played_alike(a, weights) and (a, scenario, s) in table.records
            for a in missing
            for s in seeds
        ):
            continue
        extra += [
            episode_result(
                agent=a,
                scenario=scenario,
                seed=s,
                record=table.record(a, scenario, s),
                weights=weights,
            )
            for a in missing
            for s in seeds
        ]
        sources[scenario] = f"{' and '.join(missing)} from the shipped reference table"
    return extra, sources


def failed_result(job: EpisodeJob, error: str) -> dict[str, Any]:
    """`job`'s result as a failed episode with `error`, under the scenario's own name."""
    try:
        scenario = job.episode.resolve()[0].name
    except ValueError:
        scenario = job.episode.label
    return episode_result(
        agent=job.agent,
        scenario=scenario,
        seed=job.seed,
        record=None,
        error=error,
        weights=job.weights,
    )


def run_job(job: EpisodeJob) -> dict[str, Any]:
    weights = job.weights
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
        policy = create(job.agent, weights)
        record = run_policy_episode(policy, scenario, job.seed, schedule=schedule)
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
