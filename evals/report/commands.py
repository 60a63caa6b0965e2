"""`kvarena report`: option parsing; the report itself is `build`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..common.console import console, status_line
from ..common.durable import OutputError, describe
from ..common.edge import InputError, check_options, check_out_dir, check_path
from ..common.outcome import RunDone
from . import MIN_EPISODES

if TYPE_CHECKING:
    from ..prompt_cache.provider import Prices


def close_run(value: object, **_group_options: object) -> None:
    """The app's closing step (its result callback): after `kvarena eval` or `context-eval`
    (a `RunDone`), the ranking of the run, as `kvarena report` computes it from the run
    directory (the shipped reference where the run's code matches it), and the `kvarena report`
    command for it; then the run's exit status."""
    if not isinstance(value, RunDone):
        return
    from .build import ReportError, assemble, read_results, shipped_reference
    from .terminal import print_rankings, report_command_line

    try:  # the results the run holds: reading them again costs a second of a big run's CPU
        results = list(value.results) or read_results([value.out])[0]
    except ReportError as error:
        console.print(f"no ranking: {error}")
    else:
        reference = shipped_reference([value.out], results, {value.out: results})
        print_rankings(assemble(results, reference=reference), wide=value.wide)
    command = report_command_line([value.out], value.out / "report")
    console.print(f"report: {command}", soft_wrap=True, highlight=False)
    if value.exit_status:
        raise typer.Exit(value.exit_status)


def _checked(
    runs: list[Path], out: Path, dataset: Path | None, given: tuple[float | None, ...]
) -> Prices | None:
    """The report's paths and prices checked at the edge; the prices, when all three are given."""
    from ..prompt_cache.provider import Prices

    price_in, price_cached, price_write = given
    check_options(
        {"--price-in": price_in, "--price-cached": price_cached, "--price-write": price_write}
    )
    for run in runs:
        check_path(run, "RUNS")
    check_path(out, "--out")
    if dataset is not None:
        check_path(dataset, "--dataset")
    prices = [p for p in given if p is not None]
    if len(prices) not in (0, 3):
        raise InputError("give all three of --price-in, --price-cached and --price-write, or none")
    return Prices(*prices) if prices else None


def _read(runs: list[Path]) -> tuple[list[dict[str, Any]], list[Path]]:
    """Every result of `runs` through the one reader, with the run each came from."""
    from .build import ReportError, read_results

    origins: list[Path] = []
    try:
        results, duplicates = read_results(runs, origins)
    except ReportError as error:
        raise InputError(str(error)) from None
    if duplicates:
        console.print(
            f"{duplicates} duplicate line(s) (the same scenario, agent, seed and content as an "
            "earlier line: the same run given twice?) counted once"
        )
    return results, origins


def report_command(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUNS...",
            help="Run directories or results.jsonl files of kvarena eval, context-eval or both.",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="Report directory.")
    ] = Path("report"),
    dataset: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Also save the results as a datasets.Dataset here."),
    ] = None,
    price_in: Annotated[
        float | None,
        typer.Option(
            min=0, metavar="PRICE", help="$ per M fresh input tokens (with the other two)."
        ),
    ] = None,
    price_cached: Annotated[
        float | None,
        typer.Option(min=0, metavar="PRICE", help="$ per M input tokens read from the cache."),
    ] = None,
    price_write: Annotated[
        float | None,
        typer.Option(min=0, metavar="PRICE", help="$ per M input tokens written to the cache."),
    ] = None,
    min_episodes: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Paired episodes a scenario needs to count in the suite mean (fewer: shown, "
            "flagged, not counted; 1 counts every scenario).",
        ),
    ] = MIN_EPISODES,
) -> None:
    """Build leaderboard.md and a self-contained index.html from one or more runs, a section
    per family (serving, context); with the three prices, also the input cost per episode in
    dollars from the recorded usage. Prints the rankings it wrote."""
    status_line(f"report: reading {len(runs)} run(s)")
    from .build import (
        Episode,
        assemble,
        shipped_reference,
        to_dataset,
        write_report,
    )
    from .episodes import EPISODES_DIR
    from .terminal import print_rankings

    prices = _checked(runs, out, dataset, (price_in, price_cached, price_write))
    results, origins = _read(runs)
    check_out_dir(out)
    if dataset is not None and dataset.exists() and not dataset.is_dir():
        raise InputError(f"--dataset {dataset}: exists and is not a directory")
    reference = shipped_reference(runs, results)
    if reference:
        console.print(f"reference: shipped table ({len(reference)} noop and bound episodes)")
    board = assemble(results, prices, reference, min_episodes=min_episodes)
    with console.status("rendering figures"):
        episodes = [Episode(r, run) for r, run in zip(results, origins, strict=True)]
        rows = write_report(board, out, [str(r) for r in runs], episodes)
    if dataset is not None:
        try:
            to_dataset(results).save_to_disk(str(dataset))
        except OSError as error:
            raise OutputError(f"cannot write {dataset}: {describe(error)}") from None
        console.print(f"saved the dataset to {dataset}")
    print_rankings(board)
    failed = sum(r.failed for r in rows)
    console.print(
        f"{len(results)} episodes ({failed} failed) in {len(rows)} rows: "
        f"{out / 'leaderboard.md'}, {out / 'index.html'}"
        + (f", episode pages in {out / EPISODES_DIR}" if (out / EPISODES_DIR).is_dir() else "")
    )
