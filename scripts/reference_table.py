"""Build the shipped reference table (`evals/serving/reference_data/reference.jsonl.gz`): the
`bound`'s and `noop`'s episode records on evaluation seeds 0-99 of every suite scenario, for
this code (`evals/serving/reference_table.py` says what the table is and when it is used).

Run it whenever the serving suite, the simulator, the rubric or a policy changes (a stale
table is never used: `eval` computes the bound instead, slowly, and `kvarena validate` fails
its table check, naming this command):

    nice -n 10 uv run --no-sync python scripts/reference_table.py -j 2

It plays 200 episodes per suite scenario, half of them the bound's (about 1-6 s of CPU each):
with nine scenarios 1,800 episodes, roughly 40-60 CPU minutes. Finished episodes are kept in a
`.partial` file beside the table as they come (seed by seed), so an interrupted run picks up
where it stopped (`--restart` discards them); the partial file is dropped once the table is
written. `--restamp N`, after a change meant to keep every result (golden runs byte-identical),
replays N seeds per scenario and agent and, when all equal the table, restamps it for the
current code. `--write-complete`, while a build runs,
writes a table of the seeds every scenario and agent has so far (seeds 0..N-1: `eval` uses it
for those seeds and computes the rest). `--check` recomputes a few entries and compares them
with the shipped table instead. `--backend ray [--address HOST:PORT]` plays the episodes on a
Ray cluster (docs/cluster.md): the same table, in the cluster's time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evals.common import backends
from evals.common.processes import worker_pool
from evals.serving import reference_table as table
from kv_cache_env.sim import SUITE


def play(job: tuple[str, str, int]) -> tuple[str, str, int, dict]:
    agent, scenario, seed = job
    return agent, scenario, seed, table.play_entry(agent, scenario, seed)


def _partial(path: Path) -> Path:
    return path.with_name(path.name + f".{table.source_digest()}.partial")


def _load_partial(path: Path) -> dict[tuple[str, str, int], dict]:
    done: dict[tuple[str, str, int], dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by an interruption
            done[entry["agent"], entry["scenario"], entry["seed"]] = entry["record"]
    return done


def build(out: Path, workers: int, restart: bool) -> None:
    partial = _partial(out)
    if restart:
        partial.unlink(missing_ok=True)
    done = _load_partial(partial)
    jobs = [
        (agent, scenario, seed)
        for seed in table.SEEDS
        for scenario in SUITE
        for agent in table.AGENTS
        if (agent, scenario, seed) not in done
    ]
    total = len(done) + len(jobs)
    print(f"digest {table.source_digest()}: {len(done)} of {total} episodes already played")
    started = time.perf_counter()
    with open(partial, "a") as keep, worker_pool(workers) as pool:
        futures = [pool.submit(play, job) for job in jobs]
        for n, future in enumerate(as_completed(futures), start=1):
            agent, scenario, seed, record = future.result()
            done[agent, scenario, seed] = record
            line = {"agent": agent, "scenario": scenario, "seed": seed, "record": record}
            keep.write(json.dumps(line, separators=(",", ":")) + "\n")
            keep.flush()
            if n % 20 == 0 or n == len(jobs):
                rate = n / (time.perf_counter() - started)
                eta = (len(jobs) - n) / rate if rate else 0.0
                print(f"{len(done)}/{total} episodes, {rate:.2f}/s, ETA {eta / 60:.1f} min")
    rows = table.write(out, ((a, s, seed, r) for (a, s, seed), r in done.items()))
    partial.unlink(missing_ok=True)
    print(
        f"wrote {out}: {rows} records, suite v{table.SUITE_VERSION}, digest "
        f"{table.source_digest()}, {out.stat().st_size / 1e6:.2f} MB"
    )


def write_complete(out: Path) -> int:
    """Write a table of the seeds 0..N-1 that the partial file holds for every scenario and
    agent (the largest such N) while a build goes on; returns N."""
    done = _load_partial(_partial(out))
    count = 0
    while all((a, s, count) in done for a in table.AGENTS for s in SUITE):
        count += 1
    if count == 0:
        print("no seed is complete yet")
        return 0
    entries = [(a, s, seed, done[a, s, seed]) for (a, s, seed) in done if seed < count]
    table.write(out, entries, seeds=range(count))
    print(f"wrote {out}: seeds 0-{count - 1}, {len(entries)} records ({len(done)} played)")
    return count


def check(path: Path, entries: list[tuple[str, str, int]]) -> int:
    shipped = table.load(path)
    if shipped is None:
        print(f"no table at {path}")
        return 1
    print(table.status())
    bad = 0
    for agent, scenario, seed in entries:
        played = play((agent, scenario, seed))[3]
        same = json.dumps(played, sort_keys=True) == json.dumps(
            shipped.records[agent, scenario, seed], sort_keys=True
        )
        bad += not same
        print(f"{agent} {scenario} seed {seed}: {'same' if same else 'DIFFERENT'}")
    return 1 if bad or not shipped.current else 0


def restamp(path: Path, per_scenario: int, workers: int) -> int:
    """After a change meant to keep every result (a refactor whose golden runs are byte-identical):
    replay `per_scenario` seeds spread over the table's range for every scenario and agent; if
    each equals its stored record, rewrite the table with the same records under the current
    digest. Any difference refuses (rebuild the table instead). A sample, not a proof: a full
    `kvarena validate` compares every entry it computes with the table."""
    shipped = table.load(path)
    if shipped is None:
        print(f"no table at {path}")
        return 1
    seeds = sorted({seed for _, _, seed in shipped.records})
    picks = sorted(
        {seeds[i * (len(seeds) - 1) // max(per_scenario - 1, 1)] for i in range(per_scenario)}
    )
    jobs = sorted(key for key in shipped.records if key[2] in picks)
    print(f"replaying seeds {picks}: {len(jobs)} records")
    different = []
    with worker_pool(workers) as pool:
        for agent, scenario, seed, record in pool.map(play, jobs):
            stored = shipped.records[agent, scenario, seed]
            if json.dumps(record, sort_keys=True) != json.dumps(stored, sort_keys=True):
                different.append((agent, scenario, seed))
    if different:
        print(f"{len(different)} of {len(jobs)} records differ, e.g. {different[:3]}: rebuild")
        return 1
    entries = [(a, s, seed, r) for (a, s, seed), r in shipped.records.items()]
    rows = table.write(path, entries, seeds=range(min(seeds), max(seeds) + 1))
    print(
        f"all {len(jobs)} replayed records equal; {path} restamped: {rows} records, digest "
        f"{table.source_digest()}"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-j", "--workers", type=int, default=2)
    backends.add_arguments(parser)
    parser.add_argument("--out", type=Path, default=table.TABLE_PATH)
    parser.add_argument("--restart", action="store_true", help="discard a partial run")
    parser.add_argument("--check", action="store_true", help="recompute a few entries and compare")
    parser.add_argument(
        "--write-complete",
        action="store_true",
        help="while a build runs: write the table of the seeds complete so far",
    )
    parser.add_argument(
        "--restamp",
        type=int,
        metavar="SEEDS",
        help="after a refactor: replay SEEDS seeds per scenario and agent; if all are equal, "
        "restamp the table for the current code",
    )
    args = parser.parse_args()
    if args.write_complete:
        return 0 if write_complete(args.out) else 1
    if args.check:
        return check(args.out, [("noop", "hard", 3), ("bound", "easy", 0), ("bound", "hard", 1)])
    with backends.use(backends.from_arguments(args), args.workers):
        if args.restamp:
            return restamp(args.out, args.restamp, args.workers)
        build(args.out, args.workers, args.restart)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
