"""The reference bound's CPU time per `hard` episode, this tree against an older one: paired
runs on the same seeds, each in a fresh process (`kvarena bench`'s `bound` probe); prints every
pair's after/before ratio, the medians and the machine's load.

    git worktree add --detach ../before <commit>
    nice -n 10 uv run --no-sync python scripts/bench_bound.py ../before [--pairs 5]
        [--episodes 4] [--concurrent]

Each run plays `episodes` hard episodes (seeds 500 + 100 * pair onward) and reports its median
episode time (`time.process_time`: the other processes of a shared machine do not count). By
default the two sides of a pair run one after the other, alternating which goes first.
`--concurrent` runs them at the same time, each pinned to its own core (swapping cores every
pair): on a small shared VM, whose speed drifts by 10-20% from one run to the next, both sides
then see the same conditions (measured here: pair ratios within about ±5% instead of ±15%).
The two sides' rewards must be identical (the same plans); a pair that differs is reported.
"""

import argparse
import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evals.serving.speed import HERE, probe


def _run(tree: Path, seed: int, episodes: int, core: int | None) -> dict[str, Any]:
    if core is not None:
        os.sched_setaffinity(0, {core})  # this thread; the probe process it starts inherits it
    return probe(tree, "bound", "--seed", seed, "--episodes", episodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="worktree of the older commit")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=4, help="hard episodes per run")
    parser.add_argument("--concurrent", action="store_true", help="both sides at once")
    args = parser.parse_args()
    before = args.before.resolve()
    cores = sorted(os.sched_getaffinity(0))
    if args.concurrent and len(cores) < 2:
        parser.error("--concurrent needs two cores")
    ratios: list[float] = []
    times: dict[str, list[float]] = {"before": [], "after": []}
    for pair in range(args.pairs):
        seed = 500 + 100 * pair
        sides = [("before", before), ("after", HERE)]
        if pair % 2:
            sides.reverse()  # alternate which side goes first (or which core each gets)
        if args.concurrent:
            with ThreadPoolExecutor(2) as pool:
                jobs = {
                    name: pool.submit(_run, tree, seed, args.episodes, cores[i])
                    for i, (name, tree) in enumerate(sides)
                }
                figures = {name: job.result() for name, job in jobs.items()}
        else:
            figures = {name: _run(tree, seed, args.episodes, None) for name, tree in sides}
        for name, got in figures.items():
            times[name].append(got["bound.hard_episode_s_median"])
        ratios.append(times["after"][-1] / times["before"][-1])
        same = figures["before"]["bound.rewards"] == figures["after"]["bound.rewards"]
        print(
            f"pair {pair}: before {times['before'][-1]:.3f} s, after {times['after'][-1]:.3f} s, "
            f"after/before {ratios[-1]:.3f}, load {os.getloadavg()[0]:.2f}"
            f"{'' if same else ', REWARDS DIFFER'}",
            flush=True,
        )
    print(
        f"medians over {args.pairs} pairs x {args.episodes} episodes"
        f"{' (concurrent)' if args.concurrent else ''}: before "
        f"{statistics.median(times['before']):.3f} s, after "
        f"{statistics.median(times['after']):.3f} s per episode; after/before "
        f"{statistics.median(ratios):.3f} (median of the pairs' ratios)"
    )


if __name__ == "__main__":
    main()
