"""Choose `regime-rule`'s rule per scenario on tuning seeds and write `regime_rules.json`.

Plays every fixed rule `regime_rule.candidates()` names on seeds 900000.. (validate's tuning
block, never its proof block) of every suite scenario, scores each episode with the default
weights, and keeps, per scenario, the rule with the best mean reward; for any other scenario
(trace replays, one's own) the rule best on average, each scenario's means scaled from its
worst to its best candidate. The file records the seeds and every mean, so the choice can be
read and checked.

    nice -n 10 uv run --no-sync python scripts/regime_rules.py -n 20 -j 2

Rerun it when the suite, the simulator, the rubric or a candidate rule changes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environments"))

import numpy as np

from evals.common import backends
from evals.common.processes import worker_pool
from evals.serving.runner import run_policy_episode
from evals.serving.validate import TUNING_START
from kv_cache_env.policies.regime_rule import PICKS_FILE, candidates
from kv_cache_env.sim import SUITE, get_scenario
from rubrics import DEFAULT_WEIGHTS, score


def play(job: tuple[str, str, int]) -> tuple[str, str, int, float]:
    rule, scenario, seed = job
    policy = candidates()[rule]()
    record = run_policy_episode(policy, get_scenario(scenario), seed)
    return rule, scenario, seed, score(record, DEFAULT_WEIGHTS).reward


def choose(means: dict[str, dict[str, float]]) -> tuple[dict[str, str], str]:
    """(the best rule per scenario, the best on average of the scaled means)."""
    picks = {sc: max(means, key=lambda r: (means[r][sc], r)) for sc in SUITE}

    def scaled(rule: str) -> float:
        out = []
        for sc in SUITE:
            column = [means[r][sc] for r in means]
            low, high = min(column), max(column)
            out.append((means[rule][sc] - low) / (high - low) if high > low else 1.0)
        return float(np.mean(out))

    return picks, max(means, key=lambda r: (scaled(r), r))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--seeds", type=int, default=20, help="tuning seeds per scenario")
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("-o", "--out", type=Path, default=PICKS_FILE)
    backends.add_arguments(parser)
    args = parser.parse_args()
    seeds = range(TUNING_START, TUNING_START + args.seeds)
    rules = sorted(candidates())
    jobs = [(r, sc, s) for r in rules for sc in SUITE for s in seeds]
    rewards: dict[tuple[str, str], list[float]] = {}
    start = time.monotonic()
    with (
        backends.use(backends.from_arguments(args), args.workers),
        worker_pool(args.workers) as pool,
    ):
        futures = [pool.submit(play, job) for job in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            rule, scenario, _, reward = future.result()
            rewards.setdefault((rule, scenario), []).append(reward)
            if done % 200 == 0 or done == len(jobs):
                print(f"{done}/{len(jobs)} episodes, {time.monotonic() - start:.0f} s", flush=True)
    means = {r: {sc: float(np.mean(rewards[r, sc])) for sc in SUITE} for r in rules}
    picks, fallback = choose(means)
    data = {
        "seeds": [seeds.start, seeds.stop - 1],
        "weights": "default",
        "picks": picks,
        "fallback": fallback,
        "means": {r: {sc: round(m, 6) for sc, m in per.items()} for r, per in means.items()},
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    for scenario, rule in picks.items():
        print(f"{scenario:13s} {means[rule][scenario]:+.4f}  {rule}")
    print(f"{'(elsewhere)':13s} {fallback}")
    print(f"wrote {args.out} ({len(jobs)} episodes in {time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
