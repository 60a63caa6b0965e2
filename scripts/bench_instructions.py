"""Instructions (not seconds) that the engine's hot paths execute, this tree against an older one.

    uv run python scripts/bench_instructions.py --before ../before [--episodes 30]

Wall and CPU times on a shared 2-core machine move by 10-20% between runs, which hides the
2-6% changes a speed round is made of. Instruction counts under valgrind's cachegrind do not
depend on the machine's load: with hash randomisation off and numpy's BLAS pool held to one
thread (idle BLAS threads spin), the same workload counts the same instructions to the last
million, run after run. They are not time (a cache miss costs more than an add), so a change is
kept on a count and confirmed by `kvarena bench`'s paired timings.

Each workload runs in a fresh process under cachegrind, after an untimed run that warms the
bytecode cache; a workload's count is the process's count minus that of the same process with
the workload skipped (imports and set-up), so only the measured part is left; the set-up's
objects are frozen out of the garbage collector first (`gc.freeze`), so that a change in how
many objects the set-up leaves does not move collection work into the measured part:
- `reset`: `Simulator(hard, seed)` (schedule, reference run, warm-up), per episode;
- `lru`: a `hard` episode played under `lru` after its reset, drain and record included;
- `mooncake`: the full Mooncake conversation trace replayed under `lru` (reset and episode;
  the trace's load and schedule are set-up), per replay;
- `bound`: the reference bound on a 8-turn `hard` episode (two seeds), per episode.
Needs valgrind on the PATH; not run in CI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

WORKLOAD = r"""
import sys
sys.path[:0] = ["environments", "."]
try:
    from kv_cache_env import policies
except ImportError:  # trees where the policies lived in evals/
    try:
        from evals.serving import policies
    except ModuleNotFoundError:
        import evals.policies as policies
from kv_cache_env.sim import Simulator, get_scenario

import gc

what, run, episodes = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
hard = get_scenario("hard")
policies.create("bound")  # imports what the bound's pool needs, in the skipped part too


def play(sim, policy):
    while not sim.done:
        sim.play_turn(policies.decide(policy, sim))
    return sim.record()


if what == "reset" and run:
    for seed in range(7000, 7000 + episodes):
        Simulator(hard, seed)
elif what == "lru":
    sims = [Simulator(hard, seed) for seed in range(7000, 7000 + episodes)]
    gc.freeze()  # the set-up's objects: not traversed by the measured part's collections
    if run:
        for sim in sims:
            policy = policies.create("lru")
            policy.reset(sim.seed)
            play(sim, policy)
elif what == "mooncake":
    from kv_cache_env.traces import load_trace, trace_scenario, trace_schedule

    loaded = load_trace("mooncake-conversation")
    whole = trace_scenario(loaded, full=True)
    schedule = trace_schedule(loaded, whole, 0, full=True)
    gc.freeze()
    if run:
        sim = Simulator(whole, 0, schedule=schedule)
        policy = policies.create("lru")
        policy.reset(0)
        play(sim, policy)
elif what == "bound":
    short = hard.with_options(steps=8)
    sims = [Simulator(short, seed) for seed in (11, 12)]  # BOUND_EPISODES
    gc.freeze()
    if run:
        for sim in sims:
            policy = policies.create("bound")
            policy.reset(sim.seed)
            play(sim, policy)
"""

WORKLOADS = ("bound", "lru", "mooncake", "reset")
BOUND_EPISODES = 2


def _count(tree: Path, what: str, run: bool, episodes: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPATH", None)
    args = [sys.executable, "-c", WORKLOAD, what, "1" if run else "0", str(episodes)]
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    done = subprocess.run(
        command + args, cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the {what} workload failed in {tree}:\n{done.stderr[-2000:]}")
    for line in done.stderr.splitlines():
        if "I" in line and "refs:" in line:
            return int(line.rsplit(":", 1)[1].replace(",", "").strip())
    raise SystemExit(f"no instruction count in cachegrind's output for {what} in {tree}")


def measure(tree: Path, what: str, episodes: int) -> float:
    """Millions of instructions per episode of `what` in `tree`."""
    env = dict(os.environ, PYTHONPATH="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(  # warm the bytecode cache (a compile would count as instructions)
        [sys.executable, "-c", WORKLOAD, what, "0", "1"], cwd=tree, env=env, check=True
    )
    work = _count(tree, what, True, episodes) - _count(tree, what, False, episodes)
    return work / {"bound": BOUND_EPISODES, "mooncake": 1}.get(what, episodes) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="worktree of an older commit to compare")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--only", choices=WORKLOADS, action="append")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt install valgrind); nothing measured")
    trees = {"after": HERE} | ({"before": args.before.resolve()} if args.before else {})
    print(f"{'workload':<8} " + " ".join(f"{name:>12}" for name in trees) + "   after/before")
    for what in args.only or WORKLOADS:
        counts = {name: measure(tree, what, args.episodes) for name, tree in trees.items()}
        row = f"{what:<8} " + " ".join(f"{c:>10.1f}Mi" for c in counts.values())
        if "before" in counts:
            row += f"   {counts['after'] / counts['before']:.3f}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
