"""What a run command hands the app when its run is written (`RunDone`): a light module, since
every command's registration names it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunDone:
    """What `kvarena eval` and `context-eval` return once their run is written: the app's
    closing step (`report.commands.close_run`, above the families) prints the run's ranking and
    the `kvarena report` command for it, then exits with `exit_status`."""

    out: Path
    """The run directory."""
    wide: bool = False
    """Every column of the ranking, however wide."""
    exit_status: int = 0
    """0, or `edge.EXIT_EPISODES_FAILED` when episodes failed."""
    results: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)
    """The run's results as written to its `results.jsonl` (empty: read them from there)."""
