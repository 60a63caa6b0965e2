"""The terminal tables of `kvarena eval`: one per scenario, an agent per row, best first.

By default a table fits 100 columns: the normalized score, reward ± 95% CI, failures and tool
calls per turn. `--wide` adds the gap to the bound, the pressure steps, the calls by kind,
every rubric component (unweighted) and the serving metrics (SLO attainment, goodput, first-token
and between-token latency percentiles, host-link traffic, recompute), as wide as that takes.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.table import Table

from kv_cache_env.policies import REFERENCE

from ..common.console import out_console
from .normalize import FLOOR, MIN_RANGE, Normalized
from .summary import COLUMNS, DEFAULT_COLUMNS, Row

NORM = "norm = (agent - noop) / (bound - noop) on paired seeds: 0 does nothing, 1 is the bound"


def print_tables(
    rows: list[Row],
    normalized: Mapping[tuple[str, str], Normalized],
    *,
    wide: bool = False,
    reference: Mapping[str, str] | None = None,
) -> None:
    """One table per scenario, best reward first (agents with no ok episode last).
    `reference`: scenario -> where its noop and bound came from, when not from this run."""
    headers = [h for h, _, _ in COLUMNS] if wide else list(DEFAULT_COLUMNS)
    printer = Console(width=max(out_console.width, 400)) if wide else out_console
    for scenario in dict.fromkeys(r.scenario for r in rows):
        mine = [r for r in rows if r.scenario == scenario]
        table = Table(
            title=f"{scenario}: mean ± 95% CI over episodes",
            title_justify="left",
            caption=_caption(scenario, mine, normalized, reference or {}),
            caption_justify="left",
        )
        table.add_column("agent", no_wrap=True)
        table.add_column("n", justify="right")
        table.add_column("norm", justify="right")
        if wide:
            table.add_column("bound-agent", justify="right")
        for header in headers:
            table.add_column(header, justify="right")
        for row in sorted(
            mine, key=lambda r: -r.values["reward"][0] if r.episodes > r.failed else 1e9
        ):
            n = f"{row.episodes - row.failed}" + (f" ({row.failed} failed)" if row.failed else "")
            figures = normalized.get((scenario, row.agent))
            norm = "-" if figures is None or figures.score is None else f"{figures.score:.2f}"
            cells = [row.agent, n, norm]
            if wide:
                gap = figures.to_bound if figures is not None else None
                cells.append("-" if gap is None else f"{gap[0]:+.3f}±{gap[1]:.3f}")
            cells += [_cell(header, *row.values[header]) for header in headers]
            table.add_row(*cells)
        printer.print(table)


def _caption(
    scenario: str,
    rows: list[Row],
    normalized: Mapping[tuple[str, str], Normalized],
    reference: Mapping[str, str],
) -> str:
    """What `norm` is here, and why it is `-` where it is."""
    scores = [normalized.get((scenario, r.agent)) for r in rows]
    if any(s is not None and s.score is not None for s in scores):
        source = reference.get(scenario)
        return NORM + (f" ({source})" if source else "")
    agents = {r.agent for r in rows}
    if scenario.startswith("trace:") and not {FLOOR, REFERENCE} <= agents:
        return (
            f"norm: - (a replay has no shipped reference: add -p {FLOOR},{REFERENCE} to "
            "compute one)"
        )
    if not {FLOOR, REFERENCE} <= agents and scenario not in reference:
        return (
            f"norm: - (the reference, {FLOOR} and {REFERENCE}, was not run on these seeds: add "
            f"-p ...,{FLOOR},{REFERENCE}, or use the suite's seeds 0-99 with the shipped "
            "reference table)"
        )
    return f"norm: - (bound - noop < {MIN_RANGE} here: too small a range to normalize by)"


def _cell(header: str, mean: float, half: float) -> str:
    if mean != mean:  # nan: no ok episodes
        return "-"
    if header in ("reward", "failure", "latency", "risky"):
        return f"{mean:+.3f}±{half:.3f}"
    digits = _DIGITS.get(header, 1)
    return f"{mean:.{digits}f}±{half:.{digits}f}"


_DIGITS = {
    **dict.fromkeys(("throughput", "headroom", "memory", "eviction q."), 3),
    **dict.fromkeys(("SLO", "goodput/s", "TBT p95 s", "offload GB", "load GB"), 2),
    "recompute": 0,
}
"""Decimals of a column's cells (1 where not listed)."""
