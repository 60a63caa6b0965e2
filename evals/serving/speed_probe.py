"""One speed measurement in a fresh process, printed as JSON: the worker of `kvarena bench`.

    python evals/speed_probe.py FIGURE [--seed S] [--episodes N] [--trace T]

`bench` runs this file as a script under the code being measured: the current tree, or an older
commit's worktree put first on `sys.path` (`bench --before PATH`), so one bench invocation
measures both side by side. It therefore imports only APIs both sides have (`Simulator`,
`get_scenario`, `render`, the trace loaders, the policy registry, `rubrics.score`); newer ones
(`VectorSimulator`) are reached only by figures the older side is not asked for. Every figure
starts from nothing in its own process: no schedules, reference runs or parsed traces are
shared between episodes or with other figures, and the seeds are the caller's.

Times are this process's CPU time (`time.process_time`): on a quiet machine that is the wall
time, and on a shared one it does not count the time other processes held the cores. The
batched path's figure (worker processes) is wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__" and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # run as a script: its folder is not a package root (evals/ would shadow)


clock = time.process_time


def _policies() -> Any:
    """The policy registry: `kv_cache_env.policies`, or where older trees kept it
    (`evals.serving.policies`, and `evals.policies` before that), so `--before` can name them."""
    try:
        from kv_cache_env import policies
    except ImportError:
        try:
            from evals.serving import policies  # type: ignore[no-redef]
        except ModuleNotFoundError:
            import evals.policies as policies  # type: ignore[no-redef]
    return policies


def _play(sim: Any, policy: Any, decide: Any, render_text: Any = None) -> Any:
    """Play `sim` to the end under `policy` (as `evals.serving.runner.run_policy_episode`, which
    older trees lack); returns the record."""
    while not sim.done:
        if render_text is not None:
            render_text(sim.observe())
        actions = decide(policy, sim)
        if hasattr(sim, "play_turn"):
            sim.play_turn(actions)
            continue
        if not actions:  # older trees: the turn rule written out
            sim.count_implicit_noop()
        for action in actions:
            sim.apply(action)
        sim.step()
    return sim.record()


def hard(seed: int, episodes: int) -> dict[str, Any]:
    """`hard`: turns/s excluding the reset under lru, noop and lru with the text rendering
    (what an LLM turn adds), and the reset's median."""
    policies = _policies()
    create, decide = policies.create, policies.decide
    from kv_cache_env.sim import Simulator, get_scenario, render

    scenario = get_scenario("hard")
    out: dict[str, Any] = {}
    resets: list[float] = []
    runs = (("lru", "lru", None), ("noop", "noop", None), ("lru_text", "lru", render))
    for index, (label, name, text) in enumerate(runs):
        turn_time = 0.0
        for s in range(seed + index * episodes, seed + (index + 1) * episodes):
            start = clock()
            sim = Simulator(scenario, s)
            ready = clock()
            policy = create(name)
            policy.reset(s)
            _play(sim, policy, decide, text)
            turn_time += clock() - ready
            resets.append(ready - start)
        out[f"hard.{label}.turns_per_s"] = episodes * scenario.steps / turn_time
    out["hard.reset_ms_median"] = 1000 * statistics.median(resets)
    return out


def mooncake(seed: int, episodes: int, trace: str) -> dict[str, Any]:
    """The whole trace replayed under lru in this process: load, then the replay (reset
    included: schedule, reference run, episode)."""
    policies = _policies()
    create, decide = policies.create, policies.decide
    from kv_cache_env.sim import Simulator
    from kv_cache_env.traces import load_trace, trace_scenario, trace_schedule

    start = clock()
    loaded = load_trace(trace)
    loaded_at = clock()
    scenario = trace_scenario(loaded, full=True)
    schedule = trace_schedule(loaded, scenario, seed, full=True)
    sim = Simulator(scenario, seed, schedule=schedule)
    policy = create("lru")
    policy.reset(seed)
    _play(sim, policy, decide)
    end = clock()
    return {
        "mooncake.requests": len(loaded.requests),
        "mooncake.steps": scenario.steps,
        "mooncake.capacity_blocks": sim.capacity,
        "mooncake.load_s": loaded_at - start,
        "mooncake.replay_s": end - loaded_at,
        "mooncake.load_and_replay_s": end - start,
    }


def memory(seed: int, episodes: int, trace: str) -> dict[str, Any]:
    """Peak Python heap (tracemalloc) of loading the trace and replaying it whole, per 12,000
    trace requests. The same steps are first run on the trace's first 200 lines, so that what
    the first use of a code path imports is not counted as the trace's memory."""
    import gzip
    import tempfile
    import tracemalloc

    policies = _policies()
    create, decide = policies.create, policies.decide
    from kv_cache_env.sim import Simulator
    from kv_cache_env.traces import load_trace, trace_scenario, trace_schedule

    try:
        from kv_cache_env.traces.trace_data import open_trace_text, resolve_trace, trace_format
    except ModuleNotFoundError:  # trees before `traces/` was a package
        from kv_cache_env.trace_data import open_trace_text, resolve_trace, trace_format

    def replay(path: str) -> int:
        loaded = load_trace(path)
        scenario = trace_scenario(loaded, full=True)
        schedule = trace_schedule(loaded, scenario, seed, full=True)
        sim = Simulator(scenario, seed, schedule=schedule)
        policy = create("lru")
        policy.reset(seed)
        _play(sim, policy, decide)
        return len(loaded.requests)

    file = resolve_trace(trace)
    with open_trace_text(file) as handle:
        head = [line for _, line in zip(range(200), handle, strict=False)]
    with tempfile.TemporaryDirectory() as folder:
        small = Path(folder) / f"head{trace_format(file)}.gz"
        with gzip.open(small, "wt", encoding="utf-8") as out:
            out.writelines(head)
        replay(str(small))
    tracemalloc.start()
    requests = replay(trace)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"mooncake.memory_mib_per_12k_requests": peak / 2**20 * 12000 / requests}


def bound(seed: int, episodes: int) -> dict[str, Any]:
    """The reference bound on `episodes` hard episodes, one after the other (one core)."""
    policies = _policies()
    create, decide = policies.create, policies.decide
    from kv_cache_env.sim import Simulator, get_scenario
    from rubrics import DEFAULT_WEIGHTS, score

    scenario = get_scenario("hard")
    times, rewards = [], []
    for s in range(seed, seed + episodes):
        start = clock()
        sim = Simulator(scenario, s)
        policy = create("bound")
        policy.reset(s)
        rewards.append(score(_play(sim, policy, decide), DEFAULT_WEIGHTS).reward)
        times.append(clock() - start)
    return {"bound.hard_episode_s_median": statistics.median(times), "bound.rewards": rewards}


def vector(seed: int, episodes: int, workers: int) -> dict[str, Any]:
    """`episodes` hard episodes under lru: env steps (turns) per second in one process (CPU
    time; `workers` -1), or through `VectorSimulator.play` with `workers` worker processes (0:
    in this process), wall time of a second batch played by the same pool."""
    policies = _policies()
    create, decide = policies.create, policies.decide
    from kv_cache_env.sim import Simulator, get_scenario

    scenario = get_scenario("hard")
    specs = [("hard", s) for s in range(seed, seed + episodes)]
    if workers < 0:  # the plain loop, for a side without VectorSimulator
        start = clock()
        for _, s in specs:
            sim = Simulator(scenario, s)
            policy = create("lru")
            policy.reset(s)
            _play(sim, policy, decide)
        elapsed = clock() - start
    else:
        from evals.serving.runner import PolicyAgent
        from kv_cache_env.sim import VectorSimulator

        # A first batch on other seeds, untimed: the rate is the pool's steady state (an RL
        # user plays batch after batch), not the first touches of the workers' forked memory.
        warm = [("hard", s) for s in range(seed + 1_000_000, seed + 1_000_000 + episodes)]
        vec = VectorSimulator(warm, workers=workers, observe=None)
        vec.play(PolicyAgent("lru"))
        vec.reset(specs)  # the measured seeds (the reset itself is repeated by `play`)
        start = time.perf_counter()
        vec.play(PolicyAgent("lru"))
        elapsed = time.perf_counter() - start
        vec.close()
    return {"steps_per_s": episodes * scenario.steps / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("figure", choices=["hard", "mooncake", "memory", "bound", "vector"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--trace", default="mooncake-conversation")
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    if args.figure in ("mooncake", "memory"):
        figures = globals()[args.figure](args.seed, args.episodes, args.trace)
    elif args.figure == "vector":
        figures = vector(args.seed, args.episodes, args.workers)
    else:
        figures = globals()[args.figure](args.seed, args.episodes)
    figures["probe_s"] = time.perf_counter() - started
    figures["code"] = str(Path(sys.modules["kv_cache_env"].__file__ or "").parents[2])
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
