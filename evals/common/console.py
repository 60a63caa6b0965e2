"""The terminal every command writes to: `console` (stderr: progress, notes, errors) and
`out_console` (stdout: tables and JSON), the progress bar, comma-separated option lists and
the versions a run records in `run.json`."""

from __future__ import annotations

import platform
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True)
out_console = Console()


def split_list(values: list[str] | None) -> list[str]:
    """`-p a,b -p c` -> ["a", "b", "c"] (blanks dropped)."""
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def progress() -> Progress:
    """The progress bar of long runs: description, bar, done/total, elapsed (on stderr)."""
    return Progress(
        TextColumn("[bold]{task.description:<32}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


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
