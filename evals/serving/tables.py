"""The terminal tables of `kvarena eval`: one per scenario, mean ± 95% CI per agent, the
normalized score and the gap to the bound."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..common.console import out_console
from .normalize import Normalized
from .summary import COLUMNS, Row


def print_tables(rows: list[Row], normalized: dict[tuple[str, str], Normalized]) -> None:
    """One table per scenario, best reward first (agents with no ok episode last)."""
    # Ten "mean±ci" columns need ~150 characters; wider than a default pipe's 80.
    printer = out_console if out_console.width >= 150 else Console(width=150)
    for scenario in dict.fromkeys(r.scenario for r in rows):
        table = Table(
            title=f"{scenario}: mean ± 95% CI; norm = (agent - noop) / (bound - noop), paired",
            title_justify="left",
        )
        table.add_column("agent")
        table.add_column("n", justify="right")
        table.add_column("norm", justify="right")
        table.add_column("bound-agent", justify="right")
        for header, _, _ in COLUMNS:
            table.add_column(header, justify="right")
        for row in sorted(
            (r for r in rows if r.scenario == scenario),
            key=lambda r: -r.values["reward"][0] if r.episodes > r.failed else 1e9,
        ):
            n = f"{row.episodes - row.failed}" + (f" ({row.failed} failed)" if row.failed else "")
            cells = [_cell(header, *row.values[header]) for header, _, _ in COLUMNS]
            figures = normalized.get((scenario, row.agent))
            norm = "-" if figures is None or figures.score is None else f"{figures.score:.2f}"
            gap = (
                "-"
                if figures is None or figures.to_bound is None
                else f"{figures.to_bound[0]:+.3f}±{figures.to_bound[1]:.3f}"
            )
            table.add_row(row.agent, n, norm, gap, *cells)
        printer.print(table)


def _cell(header: str, mean: float, half: float) -> str:
    if mean != mean:  # nan: no ok episodes
        return "-"
    digits = 3 if header in ("reward", "throughput", "headroom") else 1
    sign = "+" if header == "reward" else ""
    return f"{mean:{sign}.{digits}f}±{half:.{digits}f}"
