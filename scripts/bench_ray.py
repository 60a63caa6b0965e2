"""Figures for docs/cluster.md: what the Ray backend costs on this machine.

    nice -n 10 uv run --no-sync python scripts/bench_ray.py [--bound-episodes 40] [--skip-validate]
    nice -n 10 uv run --no-sync python scripts/bench_ray.py --bound-episodes 20 --overhead-only 2

- start-up: `ray.init` of a Ray instance on this machine (2 CPUs), its processes' memory
  idle and once two workers have run a task (PSS where the kernel gives it, else RSS), and
  `ray.shutdown`;
- the same cores, local pool vs Ray: `kvarena eval -p bound -s hard` on seeds off the shipped
  table (each episode 1-6 s of CPU), and `kvarena validate --family serving --ci --json` (the
  test suite's size): wall time of the whole command and of the episodes alone (the summary
  line), and whether the results (the checks but their CPU-time figures) are byte-identical;
- a two-node local cluster (`ray.cluster_utils.Cluster`, one CPU per node): the same eval,
  joined by `--address` (on one 2-core machine it can only be flat);
- a projection of `kvarena validate -n 100` on a cluster of N cores: the CI run's CPU seconds
  per episode, by kind, times the full run's episode counts.

Every command runs in a fresh process (`python -m evals.cli`), one after another. The figures
are printed, then as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "environments"))

CPU_CHECK = "CPU seconds per episode (reported; medians)"
"""The one check whose text is a measurement (CPU time), so not compared across runs."""
PLAYED = re.compile(r"(\d+) episodes played in ([\d.]+) s")


LAST_CPU_S = [0.0]
"""The CPU seconds (user + system) of the last `kvarena` call's whole process tree."""


def kvarena(args: list[str]) -> tuple[float, str, str]:
    """Run `kvarena ARGS` in a fresh process: (wall seconds, stdout, stderr); its process
    tree's CPU time (Ray's own processes and workers included) in `LAST_CPU_S`."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'environments'}:{ROOT}", "COLUMNS": "200"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "evals.cli", *args], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU_S[0] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode not in (0, 1):  # validate exits 1 on a failed check: still comparable
        raise SystemExit(f"kvarena {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return wall, done.stdout, done.stderr


def descendants_memory(root: int) -> tuple[int, int]:
    """(processes, kB) of every process descended from `root` (PSS, else RSS)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    family = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in family and pid not in family:
                family.add(pid)
                grew = True
    family.discard(root)
    total = 0
    for pid in family:
        total += _memory_kb(pid)
    return len(family), total


def _memory_kb(pid: int) -> int:
    """A process's PSS where the kernel gives it, else its RSS, in kB (0 once it is gone)."""
    return _proc_kb(pid, "smaps_rollup", "Pss:") or _proc_kb(pid, "status", "VmRSS:")


def _proc_kb(pid: int, name: str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _noop(x: int) -> int:
    time.sleep(0.5)
    return x


def startup() -> dict[str, Any]:
    """Ray's start-up, idle memory, memory with two warm workers, and shutdown, here."""
    from evals.common.ray_pool import import_ray

    started = time.perf_counter()
    ray = import_ray()

    imported = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2,
        object_store_memory=200 * 1024**2,
        include_dashboard=False,
        logging_level=logging.WARNING,
        log_to_driver=False,
    )
    connected = time.perf_counter()
    time.sleep(2)  # let the agents settle
    idle = descendants_memory(os.getpid())
    task = ray.remote(num_cpus=1)(_noop)
    ray.get([task.remote(i) for i in range(2)])
    warm = descendants_memory(os.getpid())
    stopping = time.perf_counter()
    ray.shutdown()
    return {
        "import_s": round(imported - started, 2),
        "init_s": round(connected - imported, 2),
        "idle_processes": idle[0],
        "idle_mb": round(idle[1] / 1024),
        "warm_processes": warm[0],
        "warm_mb": round(warm[1] / 1024),
        "worker_mb": round((warm[1] - idle[1]) / 1024 / 2),
        "shutdown_s": round(time.perf_counter() - stopping, 2),
    }


def _played(stderr: str) -> float | None:
    match = PLAYED.search(stderr.replace("\n", " "))
    return float(match.group(2)) if match else None


def bound_episodes(count: int, out: Path, address: str | None = None) -> dict[str, Any]:
    """`eval -p bound -s hard -n COUNT` locally and on Ray (or only on the cluster at
    `address`): wall, episode phase, and whether results.jsonl is byte-identical."""
    base = ["eval", "-p", "bound", "-s", "hard", "-n", str(count), "--seed", "500", "-j", "2"]
    figures: dict[str, Any] = {"episodes": count}
    runs = {"ray": ["--backend", "ray"]}
    if address is None:
        runs = {"local": [], **runs}
    else:
        runs["ray"] += ["--address", address]
    for name, extra in runs.items():
        wall, _, stderr = kvarena([*base, *extra, "-o", str(out / name)])
        figures[name] = {"wall_s": round(wall, 1), "episodes_s": _played(stderr)}
    reference = out.parent / "eval" / "local" / "results.jsonl"
    if reference.exists():
        figures["identical"] = (
            out / "ray" / "results.jsonl"
        ).read_bytes() == reference.read_bytes()
    return figures


def overhead(count: int, repeats: int, out: Path) -> dict[str, Any]:
    """The bound episodes `repeats` times each way, alternating which goes first (a shared
    machine's load drifts): medians of the whole command's and the episodes' wall time."""
    base = ["eval", "-p", "bound", "-s", "hard", "-n", str(count), "--seed", "500", "-j", "2"]
    runs: dict[str, list[tuple[float, float, float]]] = {"local": [], "ray": []}
    for repeat in range(repeats):
        order = ["local", "ray"] if repeat % 2 == 0 else ["ray", "local"]
        for name in order:
            extra = ["--backend", "ray"] if name == "ray" else []
            wall, _, stderr = kvarena([*base, *extra, "-o", str(out / f"{name}{repeat}")])
            runs[name].append((wall, _played(stderr) or 0.0, LAST_CPU_S[0]))
    figures: dict[str, Any] = {"episodes": count, "repeats": repeats}
    for name, values in runs.items():
        figures[name] = {
            "wall_s": [round(w, 1) for w, _, _ in values],
            "episodes_s": [round(e, 1) for _, e, _ in values],
            "cpu_s": [round(c, 1) for _, _, c in values],
        }
    local = statistics.median(e for _, e, _ in runs["local"])
    ray = statistics.median(e for _, e, _ in runs["ray"])
    figures["episodes_ray_over_local"] = round(ray / local, 3)
    local_cpu = statistics.median(c for _, _, c in runs["local"])
    figures["cpu_ray_minus_local_s"] = round(
        statistics.median(c for _, _, c in runs["ray"]) - local_cpu, 1
    )
    return figures


def _pinned(stdout: str) -> list[dict[str, Any]]:
    return [c for c in json.loads(stdout) if c["name"] != CPU_CHECK]


def validate_ci(out: Path) -> dict[str, Any]:
    """`validate --family serving --ci --json` locally and on Ray (2 workers each)."""
    figures: dict[str, Any] = {}
    checks = {}
    base = ["validate", "--family", "serving", "--ci", "--json", "-j", "2"]
    for name, extra in {"local": [], "ray": ["--backend", "ray"]}.items():
        wall, stdout, _ = kvarena([*base, *extra, "--out", str(out / name)])
        checks[name] = stdout
        figures[name] = {"wall_s": round(wall, 1)}
    figures["identical"] = _pinned(checks["local"]) == _pinned(checks["ray"])
    figures["identical_bytes_but_cpu_check"] = json.dumps(_pinned(checks["local"])) == json.dumps(
        _pinned(checks["ray"])
    )
    figures["cpu_s_by_kind"] = cpu_by_kind(out / "local" / "episodes.jsonl")
    return figures


def cpu_by_kind(episodes: Path) -> dict[str, dict[str, float]]:
    """Median and total CPU seconds per episode of each kind of agent in a validate run."""
    seconds: dict[str, list[float]] = defaultdict(list)
    for line in episodes.read_text().splitlines():
        entry = json.loads(line)
        kind = entry["kind"]
        kind = "no-<tool>" if kind.startswith("no-") else kind
        kind = "expert-no-<tool>" if kind.startswith("expert-no-") else kind
        seconds[kind].append(float(entry["result"].get("seconds") or 0.0))
    return {
        kind: {"n": len(v), "median_s": round(statistics.median(v), 3), "total_s": round(sum(v), 1)}
        for kind, v in sorted(seconds.items())
    }


def projection(costs: dict[str, dict[str, float]], cores: list[int]) -> dict[str, Any]:
    """Wall time of `validate -n 100` (default sizes) on N cores: the planners' episode counts
    at the default sizes times their mean CPU seconds in the CI run, plus the fixed rules'
    episodes counted at the CI run's number of rules per seed (a lower bound: the full screen
    keeps more rules, at ~5 ms each), over N cores, plus one longest episode for each of the
    three phases (screen, proof block, masked experts) that wait for their last episode. The
    checks played in the main process (determinism reruns, the reference table's check: about
    a minute) are left out."""
    from evals.serving.validate import SCORED, TOOLS, Sizes
    from kv_cache_env.sim import SUITE

    sizes = Sizes()
    suite, scored, tools = len(SUITE), len(SCORED), len(TOOLS)
    counts = {
        "bound": suite * sizes.episodes + scored * sizes.screen,
        "expert": suite * sizes.expert,
        "expert-told-pauses": scored * sizes.told,
        "no-<tool>": tools * scored * sizes.ablation,
        "expert-no-<tool>": tools * sizes.expert_ablation,
    }
    ci = Sizes.ci()
    rules_per_seed = costs.get("policy", {}).get("n", 0) / max(ci.episodes + ci.screen, 1)
    counts["policy"] = round(rules_per_seed * (sizes.episodes + sizes.screen))
    mean = {k: costs[k]["total_s"] / costs[k]["n"] for k in counts if costs.get(k, {}).get("n")}
    cpu = sum(counts[k] * mean.get(k, 0.0) for k in counts)
    longest = max(mean.values(), default=0.0)
    return {
        "episodes": counts,
        "mean_cpu_s": {k: round(v, 3) for k, v in mean.items()},
        "cpu_hours": round(cpu / 3600, 2),
        "wall_hours_by_cores": {n: round((cpu / n + 3 * longest) / 3600, 3) for n in cores},
    }


def two_node_cluster(count: int, out: Path) -> dict[str, Any]:
    """The bound episodes on a two-node local cluster (one CPU per node), joined by address."""
    from evals.common.ray_pool import import_ray

    import_ray()
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 100 * 1024**2},
    )
    try:
        cluster.add_node(num_cpus=1, object_store_memory=100 * 1024**2)
        cluster.wait_for_nodes()
        up = time.perf_counter() - started
        figures = bound_episodes(count, out, address=cluster.address)
    finally:
        cluster.shutdown()
    figures["cluster_start_s"] = round(up, 1)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bound-episodes", type=int, default=40)
    parser.add_argument("--skip-validate", action="store_true")
    parser.add_argument("--cores", default="2,16,64,256")
    parser.add_argument(
        "--overhead-only",
        type=int,
        metavar="REPEATS",
        help="only the local-vs-Ray bound episodes, REPEATS times each way, alternating",
    )
    args = parser.parse_args()
    if args.overhead_only:
        with tempfile.TemporaryDirectory() as tmp:
            figures = overhead(args.bound_episodes, args.overhead_only, Path(tmp))
        print(json.dumps(figures, indent=1))
        return 0
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        figures["startup"] = startup()
        print(f"start-up: {figures['startup']}", flush=True)
        figures["bound"] = bound_episodes(args.bound_episodes, out / "eval")
        print(f"bound episodes: {figures['bound']}", flush=True)
        figures["two_nodes"] = two_node_cluster(args.bound_episodes, out / "cluster")
        print(f"two-node cluster: {figures['two_nodes']}", flush=True)
        if not args.skip_validate:
            figures["validate_ci"] = validate_ci(out / "validate")
            print(f"validate --ci: {figures['validate_ci']}", flush=True)
            cores = [int(n) for n in args.cores.split(",")]
            figures["projection"] = projection(figures["validate_ci"]["cpu_s_by_kind"], cores)
            print(f"validate -n 100: {figures['projection']}", flush=True)
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
