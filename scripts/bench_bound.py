"""The reference bound's CPU time per `hard` episode, this tree against an older one: paired,
interleaved runs, each in a fresh process (`kvarena bench`'s `bound` probe), alternating which
side goes first; prints every pair's after/before ratio, the medians and the machine's load.

    git worktree add --detach ../before <commit>
    nice -n 10 uv run --no-sync python scripts/bench_bound.py ../before [pairs] [episodes]

Each run plays `episodes` hard episodes (seeds 500 + 100 * pair onward) and reports its median
episode time (`time.process_time`: the other processes of a shared machine do not count). The
two sides' rewards must be identical (the same plans); a pair that differs is reported.
"""

import os
import statistics
import sys
from pathlib import Path

from evals.serving.speed import HERE, probe


def main() -> None:
    before = Path(sys.argv[1]).resolve()
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    episodes = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    ratios, times = [], {"before": [], "after": []}
    for pair in range(pairs):
        seed = 500 + 100 * pair
        sides = [("before", before), ("after", HERE)]
        if pair % 2:
            sides.reverse()
        figures = {
            name: probe(tree, "bound", "--seed", seed, "--episodes", episodes)
            for name, tree in sides
        }
        for name, got in figures.items():
            times[name].append(got["bound.hard_episode_s_median"])
        ratio = times["after"][-1] / times["before"][-1]
        ratios.append(ratio)
        same = figures["before"]["bound.rewards"] == figures["after"]["bound.rewards"]
        load = os.getloadavg()[0]
        print(
            f"pair {pair}: before {times['before'][-1]:.3f} s, after {times['after'][-1]:.3f} s, "
            f"after/before {ratio:.3f}, load {load:.2f}{'' if same else ', REWARDS DIFFER'}",
            flush=True,
        )
    print(
        f"medians over {pairs} pairs x {episodes} episodes: before "
        f"{statistics.median(times['before']):.3f} s, after "
        f"{statistics.median(times['after']):.3f} s per episode; after/before "
        f"{statistics.median(ratios):.3f} (median of the pairs' ratios)"
    )


if __name__ == "__main__":
    main()
