"""How long `kvarena report` takes on a large synthetic leaderboard, and how big its figures get.

    uv run python scripts/bench_report.py --agents 2000 --scenarios 50

Writes a results file of `--agents` agents (noop and bound among them, so every scenario is
normalized and ranked) × `--scenarios` scenarios × `--seeds` seeds, from one real episode's
line with drawn components (the reward their weighted sum, as the results check requires),
then runs `kvarena report` on it in a fresh process and prints its wall and CPU time (the CPU
time means more on a shared machine), the size of the outputs and, with `--phases`, the time of
each phase (read, rows, ranking, figures, pages). The target: 2,000 agents ×
50 scenarios under 60 s. `tests/test_report_hostile.py` runs 2,000 × 5 with a hang guard.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def synthetic_results(path: Path, agents: int, scenarios: int, seeds: int = 1) -> int:
    """Write the results file; returns its line count."""
    from evals.common.results import dumps
    from evals.serving.jobs import EpisodeJob, run_job
    from kv_cache_env.episodes import EpisodeSpec
    from rubrics import COMPONENTS

    template = run_job(EpisodeJob("lru", EpisodeSpec("easy", 0, steps=3)))
    template["record"] = {}  # the report reads no record; a line stays small
    weights = template["weights"]
    rng = np.random.default_rng(0)
    names = ["noop", "bound", *(f"agent-{i:04d}" for i in range(agents - 2))]
    count = 0
    with path.open("w") as sink:
        for s in range(scenarios):
            scenario = f"scenario-{s:02d}"
            for name in names:
                skill = 0.0 if name == "noop" else 1.0 if name == "bound" else rng.random()
                for seed in range(seeds):
                    components = {c: float(rng.random()) * 0.1 for c in COMPONENTS}
                    components["throughput_reward"] = 0.2 + 0.6 * skill
                    line = dict(template, agent=name, scenario=scenario, seed=seed)
                    line["components"] = components
                    line["reward"] = sum(weights[c] * components[c] for c in COMPONENTS)
                    sink.write(dumps(line) + "\n")
                    count += 1
    return count


PHASES = """
import sys, time, json
from pathlib import Path
from evals.report import build
from evals.report.ranking import rank_agents
from evals.report.figures import build_figures
t = time.perf_counter(); marks = {}
results = build.load_results([Path(sys.argv[1])]); marks["read"] = time.perf_counter() - t
t = time.perf_counter(); rows = build.leaderboard(results); marks["rows"] = time.perf_counter() - t
scenarios = sorted({r.scenario for r in rows}, key=build.scenario_order)
t = time.perf_counter(); ranking = rank_agents(results, scenarios)
marks["ranking"] = time.perf_counter() - t
t = time.perf_counter(); figs = build_figures(rows, ranking)
marks["figures"] = time.perf_counter() - t
t = time.perf_counter()
markdown = build.render_markdown(rows, ranking, "the runs")
page = build.render_html(rows, ranking, figs, [sys.argv[1]], "the runs")
marks["pages"] = time.perf_counter() - t
marks["figure_bytes"] = max((len(s) for s in figs.values()), default=0)
marks["html_bytes"] = len(page)
print(json.dumps(marks))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--scenarios", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--phases", action="store_true", help="also time each phase apart")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as folder:
        results = Path(folder) / "results.jsonl"
        started = time.perf_counter()
        lines = synthetic_results(results, args.agents, args.scenarios, args.seeds)
        made = time.perf_counter() - started
        print(f"{lines:,} lines ({results.stat().st_size / 1e6:.0f} MB) written in {made:.1f}s")
        started = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "-m", "evals.cli", "report", str(results), "-o", f"{folder}/rep"],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            sys.exit(f"kvarena report failed ({done.returncode}): {done.stderr[-400:]}")
        sizes = {p.name: p.stat().st_size for p in Path(folder, "rep").iterdir()}
        marks = {}
        if args.phases:
            phases = subprocess.run(
                [sys.executable, "-c", PHASES, str(results)],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            marks = json.loads(phases.stdout) if phases.returncode == 0 else {}
    load = os.getloadavg()[0]
    print(
        f"kvarena report: {wall:.1f}s wall, {cpu:.1f}s CPU (target < 60 s for 2,000 x 50); "
        f"1-minute load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    for name, size in sorted(sizes.items()):
        print(f"  {name}: {size / 1e6:.1f} MB")
    for phase in ("read", "rows", "ranking", "figures", "pages"):
        if phase in marks:
            print(f"  {phase:<8} {marks[phase]:6.2f}s")
    if "figure_bytes" in marks:
        print(f"  largest figure: {marks['figure_bytes'] / 1e3:.0f} kB of SVG")


if __name__ == "__main__":
    main()
