"""Paired, interleaved timing of the unconstrained reference run: the engine played step by
step (`simulator.run_reference_stepwise`, before) against the specialised loop
(`sim/reference.py`, after), on the same `hard` schedules and the full Mooncake replay; CPU time
(`time.process_time`), medians.

    uv run --no-sync python scripts/bench_reference.py [hard-seeds]
"""

import statistics
import sys
import time

import numpy as np

from kv_cache_env.sim import get_scenario
from kv_cache_env.sim.reference import run_reference
from kv_cache_env.sim.simulator import run_reference_stepwise
from kv_cache_env.sim.workload import synthesize
from kv_cache_env.traces import load_trace, trace_scenario, trace_schedule


def paired(scenario, schedules):
    """CPU seconds of each run, before and after, alternating which goes first."""
    before, after = [], []
    for i, schedule in enumerate(schedules):
        runs = [(run_reference_stepwise, before), (run_reference, after)]
        if i % 2:
            runs.reverse()
        for fn, out in runs:
            start = time.process_time()
            fn(scenario, schedule)
            out.append(time.process_time() - start)
    return statistics.median(before), statistics.median(after)


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    hard = get_scenario("hard")
    schedules = [synthesize(hard, np.random.default_rng(s)) for s in range(1000, 1000 + seeds)]
    b, a = paired(hard, schedules)
    print(f"hard x{seeds}: before {b * 1e3:.3f} ms, after {a * 1e3:.3f} ms, ratio {a / b:.3f}")
    trace = load_trace("mooncake-conversation")
    scenario = trace_scenario(trace, full=True)
    schedule = trace_schedule(trace, scenario, 0, full=True)
    b, a = paired(scenario, [schedule] * 5)
    print(f"mooncake full x5: before {b:.3f} s, after {a:.3f} s, ratio {a / b:.3f}")


if __name__ == "__main__":
    main()
