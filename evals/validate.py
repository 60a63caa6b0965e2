"""`kvarena validate`: the checks a benchmark maintainer runs before trusting a leaderboard.

Each check passes or fails with its figures:
- single-action strategies (noop, evict-all, swap-all, compress-all) score below `lookahead`
  on `medium` and `hard` (mean reward), each reported beside `lru`;
- ordering: `lookahead` is at or above every heuristic it considers, episode by episode (true
  by construction: checked); the rest of the ordering is reported, not forced;
- separation: the 95% CIs of `lookahead` and `noop` on `hard` do not overlap;
- difficulty is monotone: `lru` failures per episode easy <= medium <= hard;
- determinism: rerunning some episodes gives byte-identical result lines;
- tool effects: compress reaches int4 and repacks, swap frees the sequence's GPU blocks, evicting
  a sequence whose prefix others share frees only its private blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.sim import Simulator, Status, compress, evict, get_scenario, swap

from .jobs import EpisodeJob, run_job
from .policies import BASE_HEURISTICS
from .results import dumps
from .stats import mean_ci

SINGLE_ACTION = ("noop", "evict-all", "swap-all", "compress-all")
JUDGED = ("medium", "hard")
DETERMINISM_JOBS = (("lru", "hard"), ("random", "medium"), ("lookahead", "hard"))


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def validation_jobs(episodes: int) -> list[EpisodeJob]:
    base = [make().name for make in BASE_HEURISTICS]
    agents = dict.fromkeys((*SINGLE_ACTION, "lru", "random", "lookahead", *base))
    jobs = [
        EpisodeJob(agent, EpisodeSpec(scenario, seed))
        for scenario in JUDGED
        for agent in agents
        for seed in range(episodes)
    ]
    jobs += [EpisodeJob("lru", EpisodeSpec("easy", seed)) for seed in range(episodes)]
    return jobs


def _run(
    jobs: list[EpisodeJob], workers: int, tick: Callable[[], None]
) -> dict[tuple[str, str, int], dict[str, Any]]:
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    if workers <= 1:
        for job in jobs:
            out[job.key] = run_job(job)
            tick()
        return out
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for job, result in zip(jobs, pool.map(run_job, jobs, chunksize=4), strict=True):
            out[job.key] = result
            tick()
    return out


def run_validation(
    episodes: int = 100, workers: int = 1, tick: Callable[[], None] = lambda: None
) -> list[Check]:
    jobs = validation_jobs(episodes)
    results = _run(jobs, workers, tick)
    if any(r["status"] != "ok" for r in results.values()):
        bad = next(r for r in results.values() if r["status"] != "ok")
        return [Check("episodes run", False, f"{bad['agent']} failed: {bad['error']}")]
    seeds = range(episodes)

    def rewards(scenario: str, agent: str) -> list[float]:
        return [results[scenario, agent, s]["reward"] for s in seeds]

    def summary(scenario: str, agent: str) -> tuple[float, float]:
        return mean_ci(rewards(scenario, agent))

    def fmt(scenario: str, agent: str) -> str:
        mean, half = summary(scenario, agent)
        return f"{agent} {mean:+.3f}±{half:.3f}"

    checks = []
    for scenario in JUDGED:
        best = summary(scenario, "lookahead")[0]
        for agent in SINGLE_ACTION:
            checks.append(
                Check(
                    f"{agent} below lookahead on {scenario}",
                    summary(scenario, agent)[0] < best,
                    f"{fmt(scenario, agent)} vs {fmt(scenario, 'lookahead')} "
                    f"(beside {fmt(scenario, 'lru')})",
                )
            )
    base = [make().name for make in BASE_HEURISTICS]
    margins = [
        results[scenario, "lookahead", s]["reward"]
        - max(results[scenario, h, s]["reward"] for h in base)
        for scenario in JUDGED
        for s in seeds
    ]
    for scenario in JUDGED:
        ranking = sorted(
            {agent for (sc, agent, _) in results if sc == scenario},
            key=lambda a: -summary(scenario, a)[0],
        )
        order = " > ".join(f"{a} {summary(scenario, a)[0]:+.3f}" for a in ranking)
        checks.append(Check(f"ordering on {scenario} (reported)", True, order))
    checks.append(
        Check(
            "lookahead >= every heuristic it considers, per episode",
            min(margins) >= -1e-12,
            f"{len(margins)} episodes x {len(base)} heuristics; smallest margin "
            f"{min(margins):+.4f}, mean margin {sum(margins) / len(margins):+.4f}",
        )
    )
    (la, la_half), (no, no_half) = summary("hard", "lookahead"), summary("hard", "noop")
    checks.append(
        Check(
            "lookahead and noop separated on hard (95% CIs disjoint)",
            la - la_half > no + no_half,
            f"lookahead [{la - la_half:+.3f}, {la + la_half:+.3f}] vs noop "
            f"[{no - no_half:+.3f}, {no + no_half:+.3f}] over {episodes} episodes",
        )
    )
    failures = {
        scenario: sum(results[scenario, "lru", s]["metrics"]["failures"] for s in seeds) / episodes
        for scenario in ("easy", "medium", "hard")
    }
    checks.append(
        Check(
            "difficulty monotone (lru failures easy <= medium <= hard)",
            failures["easy"] <= failures["medium"] <= failures["hard"],
            ", ".join(f"{k} {v:.2f}" for k, v in failures.items()),
        )
    )
    checks.append(_determinism(results, episodes))
    checks.extend(tool_effect_checks())
    return checks


def _determinism(results: dict[tuple[str, str, int], dict[str, Any]], episodes: int) -> Check:
    reruns = [
        EpisodeJob(agent, EpisodeSpec(scenario, seed))
        for agent, scenario in DETERMINISM_JOBS
        for seed in range(min(3, episodes))
    ]
    reruns += [EpisodeJob("lru", EpisodeSpec("easy", 0))]
    same = [dumps(run_job(job)) == dumps(results[job.key]) for job in reruns]
    return Check(
        "determinism (rerun gives byte-identical results)",
        all(same),
        f"{sum(same)}/{len(same)} reruns identical",
    )


def tool_effect_checks(seeds: Iterable[int] = range(5)) -> list[Check]:
    compress_ok, swap_ok, evict_ok, shared_seen = [], [], [], 0
    for seed in seeds:
        sim = Simulator(get_scenario("hard"), seed)
        engine = sim.engine
        big = max(engine.running, key=lambda s: s.gpu_blocks)
        sim.apply(compress(big.seq_id))
        sim.apply(compress(big.seq_id))
        per_block = engine.block_size * 4
        compress_ok.append(
            big.quantization_level == "int4"
            and big.gpu_blocks == -(-big.private_tokens // per_block)
            and not sim.apply(compress(big.seq_id)).ok
        )
        target = next(s for s in engine.running if s is not big and s.gpu_blocks)
        before, blocks = engine.pool.available, target.gpu_blocks
        result = sim.apply(swap(target.seq_id))
        swap_ok.append(
            result.ok
            and target.status is Status.SWAPPED
            and engine.pool.available - before == blocks
            and target.cpu_blocks == blocks
        )
        counts = engine.pool.ref_counts
        shared = [
            s
            for s in engine.running
            if s.prefix_held and all(counts[h] > 1 for h in s.request.prefix_hashes)
        ]
        if shared:
            shared_seen += 1
            victim = shared[0]
            before, private = engine.pool.available, victim.gpu_blocks
            refs = {h: counts[h] for h in victim.request.prefix_hashes}
            result = sim.apply(evict(victim.seq_id))
            evict_ok.append(
                result.ok
                and engine.pool.available - before == private
                and all(counts[h] == refs[h] - 1 for h in refs)
            )
        sim.check_invariants()
    return [
        Check(
            "compress reaches int4 and repacks (int4 again refused)",
            all(compress_ok),
            f"{sum(compress_ok)}/{len(compress_ok)} episodes",
        ),
        Check(
            "swap frees exactly the sequence's GPU blocks",
            all(swap_ok),
            f"{sum(swap_ok)}/{len(swap_ok)} episodes",
        ),
        Check(
            "evicting a shared-prefix sequence frees only its private blocks",
            bool(evict_ok) and all(evict_ok),
            f"{sum(evict_ok)}/{len(evict_ok)} episodes with a shared prefix (of {shared_seen})",
        ),
    ]
