"""The hostile harness: every way of breaking kvarena that an attacker tried (hostile files,
servers, disks, clients, Gymnasium arguments, signals), run against this checkout, one row per
case, and the table surface × cases × clean × crashes × hangs × lost × leaks.

    uv run python scripts/hostile.py            # every case (a few minutes)
    uv run python scripts/hostile.py --only report --json out.json
    uv run python scripts/hostile.py --fast     # the fast part (the test suite runs it)

A case is *clean* when it ends as documented (docs/failures.md): a one-line error with its exit
status, a 4xx JSON answer, a bounded wait, a refused symlink. Otherwise it counts as a
*crash* (a traceback, the "unexpected ... (a bug)" line, a dropped connection, a wrong exit
status), a *hang* (over its time bound), *lost* (a partial line, a run.json that does not say
what happened, a resume that does not finish, a truncated output file) or a *leak* (a secret in
a written file, a write outside the run directory, a process or thread that outlives its
bound). Real `kvarena` processes run the CLI cases; the server cases use raw sockets against
`kvarena serve-policy`. Cases that need root (a 64 KiB tmpfs) say "skipped" where it is
refused. Cases marked fast (seconds each: bad input refused at the edge, Gymnasium arguments)
are the harness's fast part, which `tests/test_hostile_harness.py` runs case by case; the rest
(bombs, full disks, slow servers, kills) run here only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hostile_cases import (
    context_family,
    disk_full,
    edges,
    files_and_keys,
    gym_args,
    hosted_clients,
    report,
    runs,
    serve_policy,
    trace_files,
)
from hostile_cases.harness import CASES, Case, Outcome

SURFACES = (
    trace_files,
    report,
    disk_full,
    serve_policy,
    hosted_clients,
    gym_args,
    files_and_keys,
    runs,
    edges,
    context_family,
)
"""The case modules in the order they run and appear in the table."""
ORDERED = sorted(CASES, key=lambda one: [m.__name__ for m in SURFACES].index(one.fn.__module__))


@dataclass
class Row:
    surface: str
    cases: int = 0
    counts: dict[str, int] = field(default_factory=dict)


COLUMNS = ("clean", "crash", "hang", "lost", "leak", "skipped")


def table(outcomes: list[Outcome]) -> str:
    rows: dict[str, Row] = {}
    for outcome in outcomes:
        row = rows.setdefault(outcome.surface, Row(outcome.surface))
        row.cases += 1
        row.counts[outcome.verdict] = row.counts.get(outcome.verdict, 0) + 1
    head = "| surface | cases | clean | crashes | hangs | lost | leaks | skipped |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    total = Row("all")
    for row in rows.values():
        total.cases += row.cases
        for column in COLUMNS:
            total.counts[column] = total.counts.get(column, 0) + row.counts.get(column, 0)
    for row in [*rows.values(), total]:
        cells = [str(row.counts.get(c, 0)) for c in COLUMNS]
        name = f"**{row.surface}**" if row is total else row.surface
        lines.append(f"| {name} | {row.cases} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_case(one: Case, folder: Path) -> Outcome:
    """One case in `folder` (an empty directory); never raises."""
    started = time.monotonic()
    try:
        verdict, detail = one.fn(folder)
    except Exception as error:  # the harness reports, never dies
        verdict, detail = "crash", f"harness: {type(error).__name__}: {error}"[:160]
    detail = " ".join(detail.split())
    return Outcome(one.surface, one.name, verdict, detail, time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases of surfaces whose name contains this")
    parser.add_argument("--fast", action="store_true", help="run the fast part only")
    parser.add_argument("--json", help="write every outcome here")
    args = parser.parse_args()
    outcomes: list[Outcome] = []
    for one in ORDERED:
        if (args.only and args.only not in one.surface) or (args.fast and not one.fast):
            continue
        with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
            outcome = run_case(one, Path(folder))
        outcomes.append(outcome)
        print(f"{outcome.verdict:>7}  {one.surface} / {one.name}: {outcome.detail}", flush=True)
    print()
    print(table(outcomes))
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1) + "\n")
    if any(o.verdict in ("crash", "hang", "leak") for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
