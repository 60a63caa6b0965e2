"""Adversarial runs of the hosted-model path: `kvarena eval --model` and `kvarena context-eval
--model` against the keyless policy server injecting a seeded mix of every fault class
(`evals.servers.faults.fault_plan`: transport, non-completion bodies, malformed tool calls).

    uv run --no-sync python scripts/adversarial.py --seeds 0,1,2 --episodes 6 --rate 0.3

Prints, per run and in total: requests served, faults injected, tool calls tried, invalid calls
counted, episodes expected / written / failed, crashes (non-zero exit or a traceback) and
episodes lost (expected minus written). Each run is a real `kvarena` process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "environments")]

from evals.servers.faults import fault_plan  # noqa: E402
from evals.servers.policy_server import PolicyServer  # noqa: E402


def one_run(kind: str, seed: int, episodes: int, rate: float, work: Path) -> dict[str, object]:
    plan = fault_plan(seed, 40 * episodes, rate)
    out = work / f"{kind}-{seed}"
    with PolicyServer("lru", faults=plan) as server:
        if kind == "eval":
            args = ["eval", "--model", "lru", "-s", "hard", "-c", "2", "--seed", str(seed)]
        else:
            args = ["context-eval", "--model", "text-agent", "-l", "easy", "--seed", str(seed)]
        args += ["--base-url", server.base_url, "-n", str(episodes), "-o", str(out)]
        env = {**os.environ, "OPENAI_API_KEY": "", "KVARENA_RETRY_BACKOFF_S": "0"}
        done = subprocess.run(
            [sys.executable, "-m", "evals.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=1800,
        )
        served = server.requests
    injected = Counter(kind for n, kind in plan.items() if n <= served)
    lines = []
    if (out / "results.jsonl").exists():
        lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    calls = 0
    for path in (out / "transcripts").glob("*.json"):
        for message in json.loads(path.read_text())["messages"]:
            calls += len(message.get("tool_calls") or [])
    invalid = sum(
        (r.get("metrics") or {}).get("invalid_calls", 0)
        + ((r.get("record") or {}).get("invalid_actions", 0) if kind != "eval" else 0)
        for r in lines
    )
    expected = episodes
    run_json = out / "run.json"
    return {
        "run": f"{kind} seed {seed}",
        "exit": done.returncode,
        # 3: the run finished with failed episodes (recorded with their reasons)
        "crash": int(done.returncode not in (0, 3) or "Traceback" in done.stderr),
        "requests": served,
        "faults": sum(injected.values()),
        "fault_kinds": len(injected),
        "tool_calls": calls,
        "invalid_calls": invalid,
        "episodes": expected,
        "written": len(lines),
        "failed": sum(1 for r in lines if r["status"] != "ok"),
        "lost": expected - len(lines),
        "run_json": json.loads(run_json.read_text())["status"] if run_json.exists() else None,
        "errors": sorted({r["error"][:80] for r in lines if r["status"] != "ok"}),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--rate", type=float, default=0.3)
    parser.add_argument("--kinds", default="eval,context")
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in options.kinds.split(","):
            for seed in map(int, options.seeds.split(",")):
                row = one_run(kind, seed, options.episodes, options.rate, Path(tmp))
                print(json.dumps(row), flush=True)
                rows.append(row)
    keys = ("requests", "faults", "tool_calls", "invalid_calls", "episodes", "written", "failed")
    total = {key: sum(int(r[key]) for r in rows) for key in (*keys, "crash", "lost")}
    print(json.dumps({"total": total}))


if __name__ == "__main__":
    main()
