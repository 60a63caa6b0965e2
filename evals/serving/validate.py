"""`kvarena validate`: the checks a benchmark maintainer runs before trusting a leaderboard
(serving suite v2).

Scores are normalized per scenario on paired seeds: (agent - noop) / (bound - noop). A scenario
enters averages only if bound - noop >= 0.05 with a paired 95% CI above 0. A single-tool family
(the policies that issue only that tool; engine fallback preemptions do not count) scores its
best member's normalized mean on a scenario. Each check passes or fails with its figures:
1. families: every single-tool family averages <= 0.8 over the suite, and on at least two
   scenarios every family is <= 0.5; the best fixed two-tool rule per scenario is reported and
   averages <= 0.9;
2. tool ablation: removing any one tool costs >= 10% of the range on at least one scenario (the
   ablated bound is the same search and pool with that tool masked; the cost is measured against
   the best of it and every policy that never used the tool);
3. on `hard`, the best classic eviction order (FIFO, LRU, priority) beats noop (paired CI above 0);
4. the bound's trajectory plus a last-turn dump (swap, else evict, everything non-system) is no
   better than the bound (paired mean <= 0, upper end of the 95% CI <= 0.005);
5. from outside: no agent run here beats the bound on more than 5% of a scenario's episodes;
   tightness: a deeper search improves on the bound by < 2% of its range;
6. determinism (reruns byte-identical), difficulty order (lru failures easy <= medium <= hard)
   and tool effects (each tool on running and on paused sequences).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.sim import (
    SUITE,
    BlockType,
    Simulator,
    Status,
    compress,
    evict,
    get_scenario,
    swap,
)
from rubrics import score

from ..common.results import dumps, episode_result
from ..common.stats import mean_ci
from .jobs import EpisodeJob, run_job
from .policies import BoundPolicy, available
from .policies.bound import DEEP_MACROS

FAMILIES: dict[str, tuple[str, ...]] = {
    "compress-only": ("compress-all", "int8-everything", "headroom", "compress-first@0.8"),
    "evict-only": ("fifo", "lru", "priority", "trtllm", "evict-all", "discard-paused"),
    "swap-only": ("swap-all", "swap-paused"),
}
TWO_TOOL = ("swap-paused+compress-all", "discard-paused+compress-all", "compress-first")
CLASSIC_ORDERS = ("fifo", "lru", "priority")
"""The classic eviction orders: first in first out, least recently used, priority."""
TOOLS = ("evict", "compress", "swap")
MIN_RANGE = 0.05
DETERMINISM_JOBS = (("lru", "hard"), ("random", "medium"), ("swap-paused", "chat-human"))


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


# --- jobs --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BoundJob:
    """One bound episode: `variant` is "bound", "deep" (wider search) or "no-<tool>"."""

    scenario: str
    seed: int
    variant: str = "bound"

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.scenario, self.variant, self.seed)


def make_bound(variant: str) -> BoundPolicy:
    if variant == "bound":
        return BoundPolicy()
    if variant == "deep":
        return BoundPolicy(macros=DEEP_MACROS, continuations=3, pool_replays=99)
    if variant.startswith("no-"):
        return BoundPolicy(mask=variant.removeprefix("no-"))
    raise ValueError(f"unknown bound variant {variant!r}")


def run_bound_job(job: BoundJob) -> dict[str, Any]:
    """Play the bound; for the plain bound also score its trajectory with a last-turn dump."""
    sim = EpisodeSpec(job.scenario, job.seed).simulator()
    policy = make_bound(job.variant)
    policy.reset(job.seed)
    started = time.perf_counter()
    dump_reward = None
    while not sim.done:
        actions = policy.act_in(sim)
        if job.variant == "bound" and sim.turn == sim.scenario.steps - 1:
            dump_reward = _with_dump(sim, actions)
        if not actions:
            sim.count_implicit_noop()
        for action in actions:
            sim.apply(action)
        sim.step()
    result = episode_result(
        agent=job.variant, scenario=job.scenario, seed=job.seed, record=sim.record()
    )
    result["seconds"] = time.perf_counter() - started
    result["dump_reward"] = dump_reward
    return result


def _with_dump(sim: Simulator, actions: list) -> float:
    """The reward of taking `actions` plus a dump of everything non-system on the last turn."""
    copy = sim.clone()
    for action in actions:
        copy.apply(action)
    for seq in [*copy.engine.running, *copy.engine.paused]:
        if seq.block_type is BlockType.SYSTEM or seq.status not in (Status.RUNNING, Status.PAUSED):
            continue
        if not copy.apply(swap(seq.seq_id)).ok:
            copy.apply(evict(seq.seq_id))
    copy.step()
    return score(copy.record()).reward


def observation_agents() -> list[str]:
    """Every registered observation policy (the bound and lookahead are run separately)."""
    return [name for name in available() if name not in ("bound", "lookahead")]


def validation_jobs(
    episodes: int, ablation_episodes: int, deep_episodes: int
) -> tuple[list[EpisodeJob], list[BoundJob]]:
    jobs = [
        EpisodeJob(agent, EpisodeSpec(scenario, seed))
        for scenario in SUITE
        for agent in observation_agents()
        for seed in range(episodes)
    ]
    bounds = [BoundJob(scenario, seed) for scenario in SUITE for seed in range(episodes)]
    bounds += [
        BoundJob(scenario, seed, f"no-{tool}")
        for scenario in SUITE
        for tool in TOOLS
        for seed in range(ablation_episodes)
    ]
    bounds += [
        BoundJob(scenario, seed, "deep") for scenario in SUITE for seed in range(deep_episodes)
    ]
    return jobs, bounds


def _run(
    jobs: list[EpisodeJob], bounds: list[BoundJob], workers: int, tick: Callable[[], None]
) -> dict[tuple[str, str, int], dict[str, Any]]:
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    if workers <= 1:
        for job in jobs:
            out[job.key] = run_job(job)
            tick()
        for bound in bounds:
            out[bound.key] = run_bound_job(bound)
            tick()
        return out
    with ProcessPoolExecutor(max_workers=workers) as pool:
        # the slow bound jobs first, so the pool never ends on one long job
        for bound, result in zip(bounds, pool.map(run_bound_job, bounds), strict=True):
            out[bound.key] = result
            tick()
        for job, result in zip(jobs, pool.map(run_job, jobs, chunksize=8), strict=True):
            out[job.key] = result
            tick()
    return out


# --- statistics --------------------------------------------------------------------------------
def paired(a: Iterable[float], b: Iterable[float]) -> tuple[float, float]:
    """Mean and 95% half-width of the per-seed differences a - b."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    return mean_ci(diffs)


@dataclass
class ScenarioTable:
    """Per-scenario figures on paired seeds."""

    scenario: str
    noop: float
    bound: float
    range_half: float
    """95% half-width of the paired bound - noop difference."""
    normalized: dict[str, float]
    """Agent -> (mean agent - mean noop) / (mean bound - mean noop)."""

    @property
    def range(self) -> float:
        return self.bound - self.noop

    @property
    def included(self) -> bool:
        return self.range >= MIN_RANGE and self.range - self.range_half > 0


def scenario_tables(
    results: dict[tuple[str, str, int], dict[str, Any]], seeds: range
) -> dict[str, ScenarioTable]:
    tables = {}
    for scenario in SUITE:
        noop = [results[scenario, "noop", s]["reward"] for s in seeds]
        bound = [results[scenario, "bound", s]["reward"] for s in seeds]
        _, half = paired(bound, noop)
        rng = float(np.mean(bound) - np.mean(noop))
        normalized = {}
        for agent in observation_agents():
            mean = float(np.mean([results[scenario, agent, s]["reward"] for s in seeds]))
            normalized[agent] = (mean - float(np.mean(noop))) / rng if rng > 0 else 0.0
        tables[scenario] = ScenarioTable(
            scenario, float(np.mean(noop)), float(np.mean(bound)), half, normalized
        )
    return tables


def family_scores(tables: dict[str, ScenarioTable]) -> dict[str, dict[str, float]]:
    """Family -> scenario -> its best member's normalized score."""
    return {
        family: {sc: max(t.normalized[m] for m in members) for sc, t in tables.items()}
        for family, members in FAMILIES.items()
    }


# --- the checks --------------------------------------------------------------------------------
def run_validation(
    episodes: int = 100,
    workers: int = 1,
    tick: Callable[[], None] = lambda: None,
    *,
    ablation_episodes: int | None = None,
    deep_episodes: int | None = None,
) -> list[Check]:
    ablation_episodes = episodes if ablation_episodes is None else ablation_episodes
    deep_episodes = max(2, episodes // 10) if deep_episodes is None else deep_episodes
    jobs, bounds = validation_jobs(episodes, ablation_episodes, deep_episodes)
    results = _run(jobs, bounds, workers, tick)
    bad = [r for r in results.values() if r["status"] != "ok"]
    if bad:
        return [Check("episodes run", False, f"{bad[0]['agent']} failed: {bad[0]['error']}")]
    seeds = range(episodes)
    tables = scenario_tables(results, seeds)
    checks = [_suite_table(tables)]
    checks += _family_checks(tables)
    checks.append(_ablation_check(results, tables, range(ablation_episodes)))
    checks.append(_classic_orders_check(results, seeds))
    checks.append(_dump_check(results, seeds))
    checks.append(_outside_check(results, seeds))
    checks.append(_tightness_check(results, tables, range(deep_episodes)))
    checks.append(_bound_time(results, seeds))
    checks.append(_determinism(results, episodes))
    checks.append(_difficulty(results, seeds))
    checks.append(reference_table_check(results, seeds))
    checks.extend(tool_effect_checks())
    return checks


REFERENCE_TABLE_CHECK = "the shipped reference table is current and equals the computed reference"


def reference_table_check(
    results: dict[tuple[str, str, int], dict[str, Any]], seeds: range
) -> Check:
    """The table `eval` and `report` use in place of computing noop and the bound: made by
    this code (its digest) and equal, record for record, to what was just computed here."""
    from .reference_table import AGENTS, shipped, status

    table = shipped()
    if table is None or not table.current:
        return Check(REFERENCE_TABLE_CHECK, False, status())
    compared = different = 0
    for scenario in SUITE:
        for agent in AGENTS:
            for seed in seeds:
                stored = table.records.get((agent, scenario, seed))
                if stored is None:
                    continue
                compared += 1
                computed = results[scenario, agent, seed]["record"]
                different += json.dumps(stored, sort_keys=True) != json.dumps(
                    computed, sort_keys=True
                )
    detail = f"{compared} records compared, {different} differ; {status()}"
    return Check(REFERENCE_TABLE_CHECK, compared > 0 and different == 0, detail)


def _suite_table(tables: dict[str, ScenarioTable]) -> Check:
    parts = [
        f"{t.scenario}: noop {t.noop:+.3f} bound {t.bound:+.3f} range {t.range:.3f}"
        f"±{t.range_half:.3f}{'' if t.included else ' (not averaged)'}"
        for t in tables.values()
    ]
    included = [t for t in tables.values() if t.included]
    return Check(
        "scenarios with a range (bound - noop >= 0.05, paired CI above 0)",
        len(included) >= 2,
        "; ".join(parts),
    )


def _family_checks(tables: dict[str, ScenarioTable]) -> list[Check]:
    included = [sc for sc, t in tables.items() if t.included]
    scores = family_scores(tables)
    checks = []
    for family, per in scores.items():
        mean = float(np.mean([per[sc] for sc in included])) if included else 1.0
        best = {
            sc: max(FAMILIES[family], key=lambda m, sc=sc: tables[sc].normalized[m])
            for sc in included
        }
        shown = ", ".join(f"{sc} {per[sc]:.2f} ({best[sc]})" for sc in included)
        checks.append(
            Check(f"{family} family averages <= 0.8", mean <= 0.8, f"mean {mean:.2f}: {shown}")
        )
    hard_for_all = [sc for sc in included if all(scores[f][sc] <= 0.5 for f in FAMILIES)]
    checks.append(
        Check(
            "every single-tool family <= 0.5 on at least two scenarios",
            len(hard_for_all) >= 2,
            f"{len(hard_for_all)}: {', '.join(hard_for_all) or 'none'}",
        )
    )
    two = {sc: max(TWO_TOOL, key=lambda a, sc=sc: tables[sc].normalized[a]) for sc in included}
    two_mean = (
        float(np.mean([tables[sc].normalized[two[sc]] for sc in included])) if included else 1.0
    )
    checks.append(
        Check(
            "best fixed two-tool rule averages <= 0.9",
            two_mean <= 0.9,
            f"mean {two_mean:.2f}: "
            + ", ".join(f"{sc} {tables[sc].normalized[two[sc]]:.2f} ({two[sc]})" for sc in two),
        )
    )
    return checks


def _uses(
    results: dict[tuple[str, str, int], dict[str, Any]],
    scenario: str,
    agent: str,
    tool: str,
    seeds: range,
) -> bool:
    return any(results[scenario, agent, s]["metrics"][f"{tool}_calls"] > 0 for s in seeds)


def _ablation_check(
    results: dict[tuple[str, str, int], dict[str, Any]],
    tables: dict[str, ScenarioTable],
    seeds: range,
) -> Check:
    costs: dict[str, dict[str, float]] = {tool: {} for tool in TOOLS}
    for scenario, table in tables.items():
        if table.range <= 0:
            continue
        bound = np.mean([results[scenario, "bound", s]["reward"] for s in seeds])
        for tool in TOOLS:
            rivals = [f"no-{tool}"] + [
                a for a in observation_agents() if not _uses(results, scenario, a, tool, seeds)
            ]
            best = max(np.mean([results[scenario, a, s]["reward"] for s in seeds]) for a in rivals)
            costs[tool][scenario] = float((bound - best) / table.range)
    worst = {tool: max(per.values(), default=0.0) for tool, per in costs.items()}
    detail = "; ".join(
        f"without {tool}: max {worst[tool]:.2f} ("
        + ", ".join(f"{sc} {c:.2f}" for sc, c in per.items())
        + ")"
        for tool, per in costs.items()
    )
    return Check(
        f"removing any one tool costs >= 10% of the range somewhere ({len(seeds)} episodes)",
        all(w >= 0.10 for w in worst.values()),
        detail,
    )


def _classic_orders_check(
    results: dict[tuple[str, str, int], dict[str, Any]], seeds: range
) -> Check:
    noop = [results["hard", "noop", s]["reward"] for s in seeds]
    diffs = {
        a: paired([results["hard", a, s]["reward"] for s in seeds], noop) for a in CLASSIC_ORDERS
    }
    best = max(diffs, key=lambda a: diffs[a][0])
    mean, half = diffs[best]
    return Check(
        "on hard the best classic eviction order (fifo, lru, priority) beats noop "
        "(paired CI above 0)",
        mean - half > 0,
        ", ".join(f"{a} {m:+.4f}±{h:.4f}" for a, (m, h) in diffs.items()),
    )


def _dump_check(results: dict[tuple[str, str, int], dict[str, Any]], seeds: range) -> Check:
    diffs = [
        results[sc, "bound", s]["dump_reward"] - results[sc, "bound", s]["reward"]
        for sc in SUITE
        for s in seeds
    ]
    mean, half = mean_ci(diffs)
    return Check(
        "a last-turn dump does not pay (bound + dump - bound: mean <= 0, CI upper <= 0.005)",
        mean <= 0 and mean + half <= 0.005,
        f"{mean:+.4f}±{half:.4f} over {len(diffs)} episodes; max {max(diffs):+.4f}",
    )


def _outside_check(results: dict[tuple[str, str, int], dict[str, Any]], seeds: range) -> Check:
    worst = []
    for scenario in SUITE:
        for agent in observation_agents():
            beaten = [
                s
                for s in seeds
                if results[scenario, agent, s]["reward"]
                > results[scenario, "bound", s]["reward"] + 1e-9
            ]
            if len(beaten) > 0.05 * len(seeds):
                worst.append(f"{agent} on {scenario} ({len(beaten)} episodes: {beaten[:5]})")
    return Check(
        "no agent beats the bound on > 5% of a scenario's episodes",
        not worst,
        "; ".join(worst) or f"{len(observation_agents())} agents x {len(SUITE)} scenarios",
    )


def _tightness_check(
    results: dict[tuple[str, str, int], dict[str, Any]],
    tables: dict[str, ScenarioTable],
    seeds: range,
) -> Check:
    gains = []
    for scenario, table in tables.items():
        if not table.included:
            continue
        deep = np.mean([results[scenario, "deep", s]["reward"] for s in seeds])
        bound = np.mean([results[scenario, "bound", s]["reward"] for s in seeds])
        gains.append((scenario, float((deep - bound) / table.range)))
    worst = max((g for _, g in gains), default=0.0)
    return Check(
        f"a deeper search improves the bound by < 2% of the range ({len(seeds)} seeds each)",
        worst < 0.02,
        ", ".join(f"{sc} {g:+.3f}" for sc, g in gains) or "no scenario with a range",
    )


def _bound_time(results: dict[tuple[str, str, int], dict[str, Any]], seeds: range) -> Check:
    per = {sc: np.median([results[sc, "bound", s]["seconds"] for s in seeds]) for sc in SUITE}
    return Check(
        "bound time per episode (reported)",
        True,
        ", ".join(f"{sc} {t:.1f}s" for sc, t in per.items()),
    )


def _determinism(results: dict[tuple[str, str, int], dict[str, Any]], episodes: int) -> Check:
    reruns = [
        EpisodeJob(agent, EpisodeSpec(scenario, seed))
        for agent, scenario in DETERMINISM_JOBS
        for seed in range(min(3, episodes))
    ]
    same = [dumps(run_job(job)) == dumps(results[job.key]) for job in reruns]
    bound_job = BoundJob("hard", 0)
    again = run_bound_job(bound_job)
    first = results[bound_job.key]
    same.append(dumps({**again, "seconds": 0}) == dumps({**first, "seconds": 0}))
    return Check(
        "determinism (rerun gives byte-identical results)",
        all(same),
        f"{sum(same)}/{len(same)} reruns identical (bound included)",
    )


def _difficulty(results: dict[tuple[str, str, int], dict[str, Any]], seeds: range) -> Check:
    def mean_failures(scenario: str) -> float:
        return float(np.mean([results[scenario, "lru", s]["metrics"]["failures"] for s in seeds]))

    def mean_range(scenario: str) -> float:
        return float(
            np.mean(
                [
                    results[scenario, "bound", s]["reward"] - results[scenario, "noop", s]["reward"]
                    for s in seeds
                ]
            )
        )

    failures = {sc: mean_failures(sc) for sc in ("easy", "medium", "hard")}
    ranges = {sc: mean_range(sc) for sc in ("easy", "medium", "hard")}
    return Check(
        "difficulty monotone (lru failures and bound - noop easy <= medium <= hard)",
        failures["easy"] <= failures["medium"] <= failures["hard"]
        and ranges["easy"] <= ranges["medium"] <= ranges["hard"],
        ", ".join(f"{k} failures {failures[k]:.2f} range {ranges[k]:.3f}" for k in failures),
    )


def tool_effect_checks(seeds: Iterable[int] = range(5)) -> list[Check]:
    """Each tool on a running and on a paused sequence does what the documentation says."""
    outcomes: dict[str, list[bool]] = {
        "compress": [],
        "swap running": [],
        "swap paused": [],
        "evict paused": [],
        "evict shared prefix": [],
    }
    for seed in seeds:
        sim = Simulator(get_scenario("hard"), seed)
        while not sim.engine.paused and not sim.done:
            sim.step()
        if sim.done:
            continue
        for name, seen in _tool_effects(sim).items():
            outcomes[name].append(seen)
        sim.check_invariants()
    return [
        Check(
            f"tool effect: {name}",
            bool(seen) and all(seen),
            f"{sum(seen)}/{len(seen)} episodes",
        )
        for name, seen in outcomes.items()
    ]


def _tool_effects(sim: Simulator) -> dict[str, bool]:
    """Apply each tool once to a fitting sequence of `sim` (one with paused sessions) and say
    whether its effect is the documented one; a tool with no fitting sequence is left out."""
    engine = sim.engine
    seen: dict[str, bool] = {}
    big = max(engine.running, key=lambda s: s.gpu_blocks)
    sim.apply(compress(big.seq_id))
    sim.apply(compress(big.seq_id))
    seen["compress"] = (
        big.quantization_level == "int4"
        and big.gpu_blocks == engine.blocks_for(big)
        and not sim.apply(compress(big.seq_id)).ok
    )
    paused = [s for s in engine.paused if s.status is Status.PAUSED and s.gpu_blocks]
    if paused:
        target = paused[0]
        before, blocks = engine.pool.available, engine.freeable_blocks(target)
        ok = sim.apply(swap(target.seq_id)).ok
        seen["swap paused"] = (
            ok
            and target.status is Status.SWAPPED
            and engine.pool.available - before == blocks
            and target.cpu_blocks > 0
        )
    if len(paused) > 1:
        target = paused[1]
        before, blocks = engine.pool.available, engine.freeable_blocks(target)
        ok = sim.apply(evict(target.seq_id)).ok
        seen["evict paused"] = (
            ok
            and target.status is Status.DISCARDED
            and engine.pool.available - before == blocks
            and not sim.apply(evict(target.seq_id)).ok
        )
    running = [s for s in engine.running if s is not big and s.gpu_blocks]
    if running:
        target = running[0]
        blocks = target.gpu_blocks
        ok = sim.apply(swap(target.seq_id)).ok
        seen["swap running"] = (
            ok
            and target.status is Status.WAITING
            and target.cpu_blocks == blocks
            and engine.waiting[0] is target
        )
    counts = engine.pool.ref_counts
    shared = [
        s
        for s in engine.running
        if s.prefix_held and all(counts[h] > 1 for h in s.request.prefix_hashes)
    ]
    if shared:
        victim = shared[0]
        before, private = engine.pool.available, victim.gpu_blocks
        refs = {h: counts[h] for h in victim.request.prefix_hashes}
        ok = sim.apply(evict(victim.seq_id)).ok
        after = engine.pool.ref_counts  # (a count taken now: the pool derives it)
        seen["evict shared prefix"] = (
            ok
            and engine.pool.available - before == private
            and all(after[h] == refs[h] - 1 for h in refs)
        )
    return seen
