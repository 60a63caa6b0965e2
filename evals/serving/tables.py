"""The terminal tables of `kvarena eval`: one per scenario, an agent per row, best first.

By default a table fits the terminal: the agent, its episodes, the normalized score and reward
± 95% CI always, then failures and tool calls per turn as the width allows (`DEFAULT_COLUMNS`,
in order of priority). `--wide` adds the gap to the bound, the pressure steps, the calls by kind,
every rubric component (unweighted) and the serving metrics (SLO attainment, goodput, first-token
and between-token latency percentiles, host-link traffic, recompute), as wide as that takes; a
column added to `COLUMNS` joins `--wide`.
"""

from __future__ import annotations

from collections.abc import Mapping

from kv_cache_env.policies import REFERENCE

from ..common.columns import Column, Fitted, fit_table
from .normalize import FLOOR, MIN_RANGE, Normalized
from .summary import COLUMNS, DEFAULT_COLUMNS, Row

NORM = "norm = (agent - noop) / (bound - noop) on paired seeds: 0 does nothing, 1 is the bound"


def scenario_tables(
    rows: list[Row],
    normalized: Mapping[tuple[str, str], Normalized],
    *,
    wide: bool = False,
    reference: Mapping[str, str] | None = None,
    width: int | None = None,
) -> list[Fitted]:
    """One table per scenario, best reward first (agents with no ok episode last), fitted to
    `width` (`columns.fit_table`: `DEFAULT_COLUMNS` in their order of priority, the first
    always kept); with `wide`, every column. `reference`: scenario -> where its noop and bound
    came from, when not from this run."""
    headers = [h for h, _, _ in COLUMNS] if wide else list(DEFAULT_COLUMNS)
    columns = [Column("agent", justify="left"), Column("n"), Column("norm")]
    if wide:
        columns.append(Column("bound-agent"))
    columns += [
        Column(header, drop=DEFAULT_COLUMNS.index(header) if header in DEFAULT_COLUMNS else 99)
        for header in headers
    ]
    tables = []
    for scenario in dict.fromkeys(r.scenario for r in rows):
        mine = [r for r in rows if r.scenario == scenario]
        cells = []
        for row in sorted(
            mine, key=lambda r: -r.values["reward"][0] if r.episodes > r.failed else 1e9
        ):
            n = f"{row.episodes - row.failed}" + (f" ({row.failed} failed)" if row.failed else "")
            figures = normalized.get((scenario, row.agent))
            norm = "-" if figures is None or figures.score is None else f"{figures.score:.2f}"
            line = [row.agent, n, norm]
            if wide:
                gap = figures.to_bound if figures is not None else None
                line.append("-" if gap is None else f"{gap[0]:+.3f}±{gap[1]:.3f}")
            line += [_cell(header, *row.values[header]) for header in headers]
            cells.append(line)
        tables.append(
            fit_table(
                columns,
                cells,
                title=f"{scenario}: mean ± 95% CI over episodes",
                caption=_caption(scenario, mine, normalized, reference or {}),
                wide=wide,
                width=width,
            )
        )
    return tables


def print_tables(
    rows: list[Row],
    normalized: Mapping[tuple[str, str], Normalized],
    *,
    wide: bool = False,
    reference: Mapping[str, str] | None = None,
) -> None:
    """`scenario_tables`, printed; the columns left out are named once, after the last."""
    tables = scenario_tables(rows, normalized, wide=wide, reference=reference)
    for i, fitted in enumerate(tables):
        fitted.print(note=i == len(tables) - 1)


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
