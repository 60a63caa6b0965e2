"""`kvarena validate`: the `--family` dispatch over each family's validity checks.

The checks live with their families (`serving.validate`: the suite rewards judgment, the
reference holds, the runs are deterministic; `context.validate`: the context family's levels,
readers and attacks); this module only chooses which run, shows one progress bar over them and
prints one table. It sits above the families, which never import each other.
"""

from __future__ import annotations

from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .common.checks import Check, checks_json
from .common.columns import Column, Fitted, fit_table
from .common.console import console, out_console, progress, status_line
from .common.edge import check_options
from .common.options import CPUS, BackendKind, RayAddress, Workers

if TYPE_CHECKING:
    from .context.validate_store import ContextJobStore
    from .serving.validate import Sizes
    from .serving.validate_store import JobStore


class Family(StrEnum):
    """Which validity checks `kvarena validate` runs."""

    serving = "serving"
    context = "context"
    all = "all"


KeepIn = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        metavar="DIR",
        help="Keep the finished episodes in DIR as they come (the serving checks' in DIR, the "
        "context checks' in DIR/context), and the checks at the end (checks.json), so a "
        "stopped run can be resumed.",
    ),
]
Resume = Annotated[
    bool,
    typer.Option(help="Continue the validation in --out DIR: its finished episodes are kept."),
]
Json = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the checks as JSON (name, passed, detail) instead of the table.",
    ),
]
CiSize = Annotated[
    bool,
    typer.Option(
        "--ci",
        help="The serving checks at the test suite's size, on seeds off every proof block "
        "(800000+; a run of minutes): -n and the other sizes are not used for them.",
    ),
]


def validation_table(checks: list[Check], width: int | None = None) -> Fitted:
    """The checks as one table: name, verdict, and the figures (wrapped between words)."""
    columns = [
        Column("check", justify="left", wrap=True),
        Column("result", justify="left"),
        Column("figures", justify="left", wrap=True),
    ]
    rows = [[c.name, "pass" if c.passed else "FAIL", c.detail] for c in checks]
    return fit_table(columns, rows, title="kvarena validate", width=width)


def validate_command(
    episodes: Annotated[
        int,
        typer.Option(
            "--episodes",
            "-n",
            min=2,
            metavar="N",
            help="Paired episodes per scenario on the proof block (its first N seeds).",
        ),
    ] = 100,
    expert_episodes: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="N", help="Of those, how many the expert plays (default: 30, at most N)."
        ),
    ] = None,
    ablation_episodes: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="N", help="Episodes per scenario for each masked bound (default: 30)."
        ),
    ] = None,
    screen_episodes: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", help="Tuning episodes per scenario for the rule grid's screen."
        ),
    ] = 10,
    workers: Workers = CPUS,
    family: Annotated[
        Family,
        typer.Option(help="Which checks: the serving suite's, the context family's, or all."),
    ] = Family.all,
    out: KeepIn = None,
    resume: Resume = False,
    backend: BackendKind = "local",
    address: RayAddress = None,
    json_out: Json = False,
    ci: CiSize = False,
) -> None:
    """Check that the benchmark rewards judgment and behaves as documented; exit 1 on a failure."""
    status_line(f"validate: loading the {'' if family == 'all' else family + ' '}checks")
    from .common.backends import backend_option, use
    from .common.edge import InputError
    from .common.job_store import write_checks

    check_options(
        {
            "--episodes": episodes,
            "--expert-episodes": expert_episodes,
            "--ablation-episodes": ablation_episodes,
            "--screen-episodes": screen_episodes,
            "--workers": workers,
        }
    )
    serving, context = family in ("serving", "all"), family in ("context", "all")
    if resume and out is None:
        raise InputError("--resume needs --out DIR (the run to continue)")
    chosen = backend_option(backend, address)
    sizes = _sizes(episodes, expert_episodes, ablation_episodes, screen_episodes, ci)
    store = _store(out, sizes, resume) if out is not None and serving else None
    kept = _context_store(out, episodes, resume) if out is not None and context else None
    try:
        with use(chosen, workers):
            checks = _run(sizes, episodes, workers, (store, kept), (serving, context))
    finally:
        for opened in (store, kept):
            if opened is not None:
                opened.close()
    if out is not None:
        console.print(f"wrote {write_checks(out, checks)}")
    _print(checks, json_out)


def _run(
    sizes: Sizes,
    episodes: int,
    workers: int,
    stores: tuple[JobStore | None, ContextJobStore | None],
    families: tuple[bool, bool],
) -> list[Check]:
    """The serving checks and the context checks (as `families` says), each keeping its
    finished episodes in its store of `stores`, under one progress bar."""
    from .context.validate import context_validation_jobs, run_context_validation
    from .serving.validate import run_validation

    (store, kept), (serving, context) = stores, families
    total = len(context_validation_jobs(episodes)) * context
    with progress() as bar:
        task = bar.add_task("validate", total=total or None)

        def advance() -> None:
            bar.advance(task)

        checks = run_validation(sizes, workers, advance, store) if serving else []
        if context:
            checks += run_context_validation(episodes, workers, advance, store=kept)
    return checks


def _sizes(
    episodes: int, expert: int | None, ablation: int | None, screen: int, ci: bool = False
) -> Sizes:
    """The serving checks' sizes: the expert's and the masked bounds' seeds default to 30;
    `ci`: the test suite's (`Sizes.ci`)."""
    from .serving.validate import Sizes

    if ci:
        return Sizes.ci()
    return Sizes(
        episodes=episodes,
        expert=min(episodes, expert or 30),
        ablation=min(episodes, ablation or 30),
        expert_ablation=min(episodes, 10),
        told=min(episodes, 10),
        screen=screen,
    )


def _store(out: Path, sizes: Sizes, resume: bool) -> JobStore:
    """The serving checks' store of finished episodes in `out` (resumed when asked)."""
    from .common.edge import check_out_dir
    from .serving.validate_store import JobStore

    check_out_dir(out)
    store = JobStore(out, {"sizes": asdict(sizes)}, resume=resume)
    if store.done:
        console.print(f"resuming {out}: {len(store.done)} finished episodes kept")
    return store


def _context_store(out: Path, episodes: int, resume: bool) -> ContextJobStore:
    """The context checks' store of finished episodes in `out/context` (resumed when asked)."""
    from .common.edge import check_out_dir
    from .context.validate import context_store

    check_out_dir(out)
    store = context_store(out / "context", episodes, resume=resume)
    if store.done:
        console.print(f"resuming {out / 'context'}: {len(store.done)} finished episodes kept")
    return store


def _print(checks: list[Check], as_json: bool = False) -> None:
    """The checks as one table (or as JSON on stdout); exit 1 when one failed."""
    if as_json:
        out_console.print(
            checks_json(checks), end="", markup=False, highlight=False, soft_wrap=True
        )
    else:
        validation_table(checks).print()
    failed = [c for c in checks if not c.passed]
    if failed:
        console.print(f"[red]{len(failed)} check(s) failed[/red]")
        raise typer.Exit(1)
    console.print(f"all {len(checks)} checks passed")
