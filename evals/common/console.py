"""The terminal every command writes to: `console` (stderr: progress, notes, errors) and
`out_console` (stdout: tables and JSON), the progress bar, comma-separated option lists and
the versions a run records in `run.json`."""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

console = Console(stderr=True)
out_console = Console()


def status_line(text: str) -> None:
    """What a command says first (on stderr), before it loads what takes a while: every
    command's first line comes within a second."""
    console.print(text, highlight=False, markup=False)


def plan_line(command: str, done: int, counts: Sequence[tuple[int, str]], out: object) -> str:
    """`eval: 1620 episodes (18 agents x 9 scenarios x 10 seeds) into runs/x`."""
    parts = " x ".join(f"{n} {what}" for n, what in counts)
    return f"{command}: {done} episodes ({parts}) into {out}"


def rate(done: int, seconds: float) -> str:
    """How fast: items per second, or seconds per item when slower than one a second."""
    if done <= 0 or seconds <= 0:
        return "-/s"
    speed = done / seconds
    return f"{speed:.1f}/s" if speed >= 1 else f"{1 / speed:.1f} s each"


class RateColumn(ProgressColumn):
    """The average rate since the bar started (`rate`), over the items done in this run: a
    bar that starts part-way (episodes answered before it began, its `kept` field) does not
    count those. The same figure as `summary_line`'s."""

    def render(self, task: Task) -> Text:
        done = int(task.completed) - int(task.fields.get("kept", 0))
        seconds = task.finished_time or task.elapsed or 0.0
        return Text(rate(done, seconds), style="progress.data.speed")


def progress() -> Progress:
    """The progress bar of long runs (on stderr): what, bar, done/total, rate, elapsed, ETA."""
    return Progress(
        TextColumn("[bold]{task.description:<24}"),
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def summary_line(
    done: int, failed: int, seconds: float, what: str = "episodes", kept: str = ""
) -> str:
    """The line that closes a progress bar: what was done, how fast (`rate`), what failed;
    `kept`: what the bar counted without playing it ("180 from the shipped reference table")."""
    line = f"{done} {what} played in {seconds:.1f} s ({rate(done, seconds)})"
    line += f", [yellow]{failed} failed[/yellow]" if failed else ", none failed"
    return line + (f"; {kept}" if kept else "")


def versions() -> dict[str, str]:
    """Python, platform and the versions of the packages that change results."""
    from importlib import metadata  # (start-up time of commands that write no run.json)

    found = {"python": platform.python_version(), "platform": sys.platform}
    for dist in ("kvcache-arena", "numpy", "rich", "typer"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "not installed"
    return found
