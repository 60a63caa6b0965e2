"""The episodes `kvarena validate` plays, as picklable jobs, and the worker pool that plays them.

A job names its agent by a label (what the checks call it) and says how to build it: a
registered policy by name, a fixed rule of the grid (the rule object itself), or a planner —
the bound (plain, with one tool masked, or the deeper search) or the expert (plain, masked, or
told some hidden parts). Each plays to an `EpisodeResult` (validate_results.py), collected into
`Results`; the plain bound's also carries its trajectory's reward with a last-turn dump.

`validate` holds the suite to its own rubric: every planner here searches, and every episode is
scored, under the default weights (`WEIGHTS`); it takes no `--weights`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.policies import BoundPolicy, Policy, create, decide
from kv_cache_env.policies.bound import DEEP_MACROS
from kv_cache_env.policies.expert import ExpertPolicy
from kv_cache_env.sim import BlockType, Simulator, Status, evict, swap
from rubrics import score

from ..common.backends import WorkerLost, plays_here
from ..common.processes import worker_pool
from .validate_results import WEIGHTS, EpisodeResult, Results

if TYPE_CHECKING:
    from .validate_store import JobStore


@dataclass(frozen=True)
class Job:
    """One episode: `agent` is the label; `rule` (a grid rule) or `kind` says what plays."""

    agent: str
    scenario: str
    seed: int
    kind: str = "policy"
    """policy (registered, or `rule`), bound, deep, no-<tool>, expert, expert-no-<tool>,
    expert-told-<part>[+<part>...]."""
    rule: Policy | None = field(default=None, compare=False)


def make_agent(job: Job) -> Policy:
    if job.rule is not None:
        return job.rule
    kind = job.kind
    if kind == "policy":
        return create(job.agent, WEIGHTS)
    if kind == "bound":
        return BoundPolicy(weights=WEIGHTS)
    if kind == "deep":
        return BoundPolicy(macros=DEEP_MACROS, continuations=3, weights=WEIGHTS)
    if kind.startswith("no-"):
        return BoundPolicy(mask=kind.removeprefix("no-"), weights=WEIGHTS)
    if kind == "expert":
        return ExpertPolicy(weights=WEIGHTS)
    if kind.startswith("expert-no-"):
        return ExpertPolicy(mask=kind.removeprefix("expert-no-"), weights=WEIGHTS)
    if kind.startswith("expert-told-"):
        told = frozenset(kind.removeprefix("expert-told-").split("+"))
        return ExpertPolicy(reveal=told, weights=WEIGHTS)
    raise ValueError(f"unknown agent kind {kind!r}")


def run_job(job: Job) -> EpisodeResult:
    """Play one episode; a crash is a failed result with its error, never lost."""
    sim = EpisodeSpec(job.scenario, job.seed).simulator()
    started = time.process_time()
    dump_reward = None
    try:
        agent = make_agent(job)
        agent.reset(job.seed)
        while not sim.done:
            actions = decide(agent, sim)
            if job.kind == "bound" and sim.turn == sim.scenario.steps - 1:
                dump_reward = with_dump(sim, actions)
            sim.play_turn(actions)
    except Exception as error:  # a crashing agent is a failed episode, recorded
        return EpisodeResult.failed(
            job.agent, job.scenario, job.seed, f"{type(error).__name__}: {error}"
        )
    return EpisodeResult.played(
        job.agent,
        job.scenario,
        job.seed,
        sim.record(),
        seconds=time.process_time() - started,
        dump_reward=dump_reward,
        plays=getattr(agent, "plays", 0),
    )


def with_dump(sim: Simulator, actions: list) -> float:
    """The reward of taking `actions` plus a dump of everything non-system on the last turn
    (offload, else discard)."""
    copy = sim.clone()
    for action in actions:  # the turn's actions, then the dump, in one turn
        copy.apply(action)
    for seq in [*copy.engine.running, *copy.engine.paused]:
        if seq.block_type is BlockType.SYSTEM or seq.status not in (Status.RUNNING, Status.PAUSED):
            continue
        if not copy.apply(swap(seq.seq_id)).ok:
            copy.apply(evict(seq.seq_id))
    copy.step()
    return score(copy.record(), WEIGHTS).reward


def run_jobs(
    jobs: Iterable[Job],
    workers: int,
    tick: Callable[[], None] = lambda: None,
    store: JobStore | None = None,
) -> Results:
    """Every job's result; the slow planners first, so the pool never ends on one. With a
    `store`, jobs it holds are not played again and each finished one is added to it (but for
    one whose Ray worker was lost on every retry: failed here, played again on resume)."""
    ordered = sorted(jobs, key=lambda j: j.kind == "policy")
    out = Results()
    todo = []
    for job in ordered:
        kept = store.get((job.kind, job.agent, job.scenario, job.seed)) if store else None
        if kept is None:
            todo.append(job)
        else:
            out.add(kept)
            tick()

    def finished(job: Job, result: EpisodeResult, keep: bool = True) -> None:
        out.add(result)
        if store is not None and keep:
            store.add(job.kind, result)
        tick()

    if plays_here(workers, len(todo)):
        for job in todo:
            finished(job, run_job(job))
        return out
    with worker_pool(workers) as pool:
        futures = {pool.submit(run_job, job): job for job in todo}
        for future in as_completed(futures):
            job = futures[future]
            try:
                finished(job, future.result())
            except WorkerLost as error:  # failed, not kept: a resumed run plays it again
                lost = EpisodeResult.failed(job.agent, job.scenario, job.seed, str(error))
                finished(job, lost, keep=False)
    return out


__all__ = ["Job", "make_agent", "run_job", "run_jobs", "with_dump"]
