"""The docs' table of the registered policies' SLO attainment and first-token p95 per suite
scenario, next to their rubric score (`docs/serving.md`, "Serving metrics").

    nice -n 10 uv run --no-sync python scripts/slo_table.py -j 2 [--skip bound,expert]
    nice -n 10 uv run --no-sync python scripts/slo_table.py --only expert,regime-rule


plays every registered policy (but those in `--skip`) on seeds 0-9 of every suite scenario
under the default weights, as `kvarena eval` does, keeps each episode's reward, SLO attainment
and first-token p95 in `docs/serving_slo.json` (`--json`), and writes the table between the
markers in `docs/serving.md` (`--page`). `--render` only rewrites the table from the JSON (no
episode is played); `--only` replays just the named policies and keeps the JSON's other
episodes (after a change that moves only those); the docs test checks that the page shows what
the JSON holds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evals.common import backends  # noqa: E402
from evals.common.processes import worker_pool  # noqa: E402
from evals.serving.slo_board import (  # noqa: E402
    Episode,
    render,
    replace_section,
)

JSON_PATH = ROOT / "docs" / "serving_slo.json"
PAGE_PATH = ROOT / "docs" / "serving.md"


def play(job: tuple[str, str, int]) -> Episode:
    from evals.serving.runner import run_policy_episode
    from kv_cache_env.policies import create
    from kv_cache_env.sim import get_scenario
    from rubrics import DEFAULT_WEIGHTS, score
    from rubrics.metrics import serving_metrics

    policy, scenario, seed = job
    record = run_policy_episode(create(policy, DEFAULT_WEIGHTS), get_scenario(scenario), seed)
    metrics = serving_metrics(record)
    return Episode(
        policy,
        scenario,
        seed,
        score(record, DEFAULT_WEIGHTS).reward,
        metrics["slo_attainment"],
        metrics["first_token_p95_s"],
    )


def main() -> int:
    from kv_cache_env.policies import available
    from kv_cache_env.sim import SUITE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--workers", type=int, default=1)
    parser.add_argument("-n", "--seeds", type=int, default=10)
    parser.add_argument("--skip", default="", help="policies left out (comma-separated)")
    parser.add_argument(
        "--only", default="", help="replay only these policies, keeping the JSON's others"
    )
    parser.add_argument("--json", type=Path, default=JSON_PATH)
    parser.add_argument("--page", type=Path, default=PAGE_PATH)
    parser.add_argument("--render", action="store_true", help="rewrite the table from the JSON")
    backends.add_arguments(parser)
    args = parser.parse_args()
    if not args.render:
        skipped = [name for name in args.skip.split(",") if name]
        only = [name for name in args.only.split(",") if name]
        kept: list[Episode] = []
        if only:
            old = json.loads(args.json.read_text())
            kept = [Episode.from_list(e) for e in old["episodes"]]
            kept = [e for e in kept if e.policy not in only]
            skipped = [name for name in old["skipped"] if name not in only]
        policies = [name for name in available() if name not in skipped]
        played = only or policies
        jobs = [(p, s, seed) for p in played for s in SUITE for seed in range(args.seeds)]
        episodes: list[Episode] = list(kept)
        started = time.perf_counter()
        with (
            backends.use(backends.from_arguments(args), args.workers),
            worker_pool(args.workers) as pool,
        ):
            futures = [pool.submit(play, job) for job in jobs]
            for n, future in enumerate(as_completed(futures), start=1):
                episodes.append(future.result())
                if n % 100 == 0 or n == len(jobs):
                    print(f"{n}/{len(jobs)} episodes, {time.perf_counter() - started:.0f} s")
        episodes.sort(key=lambda e: (policies.index(e.policy), SUITE.index(e.scenario), e.seed))
        data = {
            "seeds": [0, args.seeds],
            "skipped": skipped,
            "episodes": [e.as_list() for e in episodes],
        }
        args.json.write_text(json.dumps(data, indent=0) + "\n")
    data = json.loads(args.json.read_text())
    table = render(
        [Episode.from_list(e) for e in data["episodes"]], data["seeds"][1], data["skipped"]
    )
    args.page.write_text(replace_section(args.page.read_text(), table))
    print(f"wrote {args.page} from {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
