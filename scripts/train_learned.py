"""Train the `learned` baseline and write its weights, learning curve and test table.

    uv run python scripts/train_learned.py            # ~15 min on 2 cores; not run in CI

1. Scores every registered observation-only policy on the selection seeds (the normalization:
   0 = noop, 1 = the best of them, per scenario).
2. Trains the fp16 weights on easy/medium/hard and the fp8 weights on the five named regimes with
   the cross-entropy method (`evals.serving.learning`) on training seeds, keeping the mean that
   scored best on the selection seeds.
3. Writes `environments/kv_cache_env/policies/learned_weights.json`,
   `docs/learned_training.json` (the curve and the selection baselines)
   and `docs/learned_curve.png`.
4. Tests once, on evaluation seeds 0..N-1: `learned` against every registered observation-only
   policy, paired by seed; prints the table (also in `docs/learned_test.json`).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from evals.common import backends
from evals.common.processes import worker_pool
from evals.common.stats import mean_ci
from evals.serving.learning import (
    GROUP_SCENARIOS,
    MIN_SCALE,
    SELECT_SEED_START,
    SHAPE,
    CemConfig,
    measure_baselines,
    observation_policies,
    play_policy,
    train_group,
)
from kv_cache_env.policies.learned import WEIGHTS_FILE, LearnedPolicy, LinearWeights

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _test_batch(args: tuple[str, str, list[int], dict[str, object] | None]) -> list[float]:
    name, scenario, seeds, weights = args
    policy = LearnedPolicy(LinearWeights.from_json(weights)) if weights is not None else None
    return [play_policy(name, scenario, seed, policy) for seed in seeds]


def test_table(weights: LinearWeights, episodes: int, pool: ProcessPoolExecutor) -> dict:
    names = observation_policies()
    seeds = list(range(episodes))
    scenarios = [s for group in GROUP_SCENARIOS.values() for s in group]
    blob = weights.to_json()
    jobs = [("learned", s, seeds, blob) for s in scenarios]
    jobs += [(n, s, seeds, None) for s in scenarios for n in names]
    results = list(pool.map(_test_batch, jobs))
    rewards: dict[str, dict[str, list[float]]] = {s: {} for s in scenarios}
    for (name, scenario, _, _), values in zip(jobs, results, strict=True):
        rewards[scenario][name] = values
    table = {}
    for s in scenarios:
        ours = np.array(rewards[s]["learned"])
        rows = {}
        for n in names:
            diff = ours - np.array(rewards[s][n])
            m, h = mean_ci(diff.tolist())
            rows[n] = {
                "mean": float(np.mean(rewards[s][n])),
                "diff": m,
                "ci": h,
                "wins": int((diff > 1e-12).sum()),
                "losses": int((diff < -1e-12).sum()),
            }
        table[s] = {"learned": float(ours.mean()), "episodes": episodes, "vs": rows}
    return table


def print_table(table: dict) -> None:
    print(
        "\n| scenario | learned | noop | best other policy | learned − it (95% CI) | W/L |"
        " closest lower CI end | beats all? |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s, row in table.items():
        vs = row["vs"]
        best = max(vs, key=lambda n: vs[n]["mean"])
        b = vs[best]
        low = min(vs, key=lambda n: vs[n]["diff"] - vs[n]["ci"])
        beats = all(v["diff"] > 0 for v in vs.values())
        print(
            f"| `{s}` | {row['learned']:+.4f} | {vs['noop']['mean']:+.4f} | `{best}` "
            f"{b['mean']:+.4f} | {b['diff']:+.4f} ± {b['ci']:.4f} | {b['wins']}/{b['losses']} | "
            f"`{low}` {vs[low]['diff'] - vs[low]['ci']:+.4f} | {'yes' if beats else 'no'} |"
        )


def rule_level(group: str, baselines: dict[str, dict]) -> float:
    """The best fixed rule on the curve's scale: the mean over the group's scenarios of
    (best − noop) / max(best − noop, MIN_SCALE) (below 1 where the range is under MIN_SCALE)."""
    levels = []
    for s in GROUP_SCENARIOS[group]:
        gap = baselines[s]["best"][1] - baselines[s]["noop"]
        levels.append(gap / max(gap, MIN_SCALE))
    return float(np.mean(levels))


def plot_curve(
    curves: dict[str, list[dict[str, float]]], baselines: dict[str, dict], path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), squeeze=False)
    for ax, (group, curve) in zip(axes[0], curves.items(), strict=True):
        eps = [p["episodes"] for p in curve]
        ax.plot(eps, [p["mean_train"] for p in curve], lw=1, label="CEM mean, training batch")
        sel = [(p["episodes"], p["select"]) for p in curve if "select" in p]
        ax.plot(*zip(*sel, strict=True), "o-", label="CEM mean, selection seeds")
        level = rule_level(group, baselines)
        ax.axhline(level, color="k", ls="--", lw=1, label="best fixed rule, selection seeds")
        ax.axhline(0.0, color="grey", ls=":", lw=1, label="noop")
        ax.set_title(f"{group}: {', '.join(GROUP_SCENARIOS[group])}", fontsize=9)
        ax.set_xlabel("training episodes")
        ax.set_ylabel("normalized reward gain over noop")
        ax.set_ylim(-0.25, 1.5)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=20)
    parser.add_argument("--population", type=int, default=32)
    parser.add_argument(
        "--seeds-per-scenario",
        type=int,
        default=None,
        help="training episodes per scenario per generation (default: 4 fp16, 3 fp8)",
    )
    parser.add_argument("--select-episodes", type=int, default=24)
    parser.add_argument("--test-episodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--groups", default="fp16,fp8")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the weights and docs files here instead of their places in the repository",
    )
    backends.add_arguments(parser)
    args = parser.parse_args()
    start = time.time()
    groups = [g for g in args.groups.split(",") if g]
    scenarios = [s for g in groups for s in GROUP_SCENARIOS[g]]
    select_seeds = [SELECT_SEED_START + i for i in range(args.select_episodes)]
    with (
        backends.use(backends.from_arguments(args), args.workers),
        worker_pool(args.workers) as pool,
    ):
        baselines = measure_baselines(scenarios, select_seeds, pool)
        for s in scenarios:
            name, best = baselines.best(s)
            print(f"selection {s}: noop {baselines.noop(s):+.4f}, best `{name}` {best:+.4f}")
        trained = {}
        curves = {}
        for group in groups:
            config = CemConfig(
                generations=args.generations,
                population=args.population,
                seeds_per_scenario=args.seeds_per_scenario or {"fp16": 4, "fp8": 3}[group],
                seed=args.seed,
            )
            result = train_group(group, config, baselines, pool)
            trained[group], curves[group] = result.weights, result.curve
        old = LinearWeights.load() if WEIGHTS_FILE.exists() else None
        weights = LinearWeights(
            fp16=trained.get("fp16", old.fp16 if old else np.zeros(SHAPE)),
            fp8=trained.get("fp8", old.fp8 if old else np.zeros(SHAPE)),
        )
        train_s = time.time() - start
        print(f"trained in {train_s:.0f} s")
        table = test_table(weights, args.test_episodes, pool) if args.test_episodes else {}
    if table:
        print_table(table)
    selection = {s: {"noop": baselines.noop(s), "best": baselines.best(s)} for s in scenarios}
    weights_file, docs = WEIGHTS_FILE, DOCS
    if args.out is not None:
        weights_file, docs = args.out / WEIGHTS_FILE.name, args.out
    weights_file.write_text(json.dumps(weights.to_json(), indent=1) + "\n")
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "learned_training.json").write_text(
        json.dumps(
            {
                "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "train_seconds": round(train_s),
                "selection_baselines": selection,
                "curves": curves,
            },
            indent=1,
        )
        + "\n"
    )
    if table:
        (docs / "learned_test.json").write_text(json.dumps(table, indent=1) + "\n")
    plot_curve(curves, selection, docs / "learned_curve.png")
    print(f"wrote {weights_file} and {docs}/learned_*; {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
