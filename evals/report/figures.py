"""The report's figures, as inline SVG (`svg.py`): each full width, in a colour-blind-safe
palette, and none drawn where it would hold a single point. The serving section has five
(`build_figures`); the context section, per reader, the two that mean the same there
(`build_context_figures`: the normalized score by level, the weighted components) — it has no
failures, pressure steps or memory usage per turn.

Colours (`PALETTE`) are Okabe and Ito's ("Color Universal Design", 2008; told apart under the
common colour-vision deficiencies), then four of Paul Tol's "muted" scheme (designed for the
same) far from them: each series of a figure has its own colour up to `len(PALETTE)` series,
then the hues again with another marker (dot charts) or dash pattern (lines) (`series_style`).
The floor `noop` is grey and the reference `bound` black. The memory panels colour the top
`USAGE_AGENTS` agents and draw the others thin and grey.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Protocol, TypeVar

from kv_cache_env.policies import REFERENCE
from rubrics import COMPONENTS, DEFAULT_WEIGHTS
from rubrics.context import CONTEXT_WEIGHTS

from ..serving.normalize import FLOOR
from .context_board import FIGURE_READERS, ContextBoard
from .context_board import FLOOR as CONTEXT_FLOOR
from .context_board import TOP as CONTEXT_TOP
from .display import FIGURE_NAME_CHARS, display_name
from .ranking import Ranking
from .row import Row
from .svg import Series, bar_chart, dot_chart, line_panels

OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
"""Okabe-Ito's hues but black (kept for the bound)."""
TOL_MUTED = ("#882255", "#332288", "#999933", "#117733")
"""Paul Tol's wine, indigo, olive and green: the "muted" hues furthest from Okabe-Ito's."""
PALETTE = (*OKABE_ITO, *TOL_MUTED)
"""One colour per series, in order; black and grey are kept for the bound and noop."""
DASHES = ("", "6 3", "2 3", "8 3 2 3")
MARKERS = ("o", "s", "^", "D")
FLOOR_GREY, REFERENCE_BLACK = "#999999", "#000000"
OTHERS_GREY = "#c4c4c4"
"""The memory panels' agents below the top `USAGE_AGENTS`."""
USAGE_AGENTS = 5
"""Agents the memory panels draw in colour (the best ranked; the bound among them when it is)."""


def series_style(k: int) -> tuple[str, str, str]:
    """The `k`-th series' (colour, marker, dash pattern): a colour each while the palette
    lasts, then the colours again with the next marker and dash."""
    turn = k // len(PALETTE)
    return PALETTE[k % len(PALETTE)], MARKERS[turn % len(MARKERS)], DASHES[turn % len(DASHES)]


def agent_styles(agents: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Agent -> (colour, dash pattern); noop grey, the bound black."""
    styles: dict[str, tuple[str, str]] = {}
    others = [a for a in agents if a not in (FLOOR, REFERENCE)]
    for i, agent in enumerate(others):
        colour, _, dash = series_style(i)
        styles[agent] = (colour, dash)
    styles[FLOOR] = (FLOOR_GREY, "")
    styles[REFERENCE] = (REFERENCE_BLACK, "")
    return {a: styles[a] for a in agents}


FIGURE_AGENTS = 20
"""Agents drawn in a figure: the best ranked (noop and the bound always among them, as the
scale's ends); every agent stays in the tables."""
FIGURE_SCENARIOS = 12
"""Scenarios drawn (markers of the score chart, panels of the usage chart), in display order."""


def shown_agents(ranking: Ranking, anchors: Sequence[str] = (FLOOR, REFERENCE)) -> list[str]:
    """The agents the figures draw, in rank order (`FIGURE_AGENTS`), the scale's ends
    (`anchors`) always among them."""
    ranked = [r.agent for r in ranking.rows]
    ends = [a for a in ranked if a in anchors]
    others = [a for a in ranked if a not in anchors]
    keep = set(ends) | set(others[: max(0, FIGURE_AGENTS - len(ends))])
    return [a for a in ranked if a in keep]


def _bounded(ranking: Ranking, anchors: Sequence[str]) -> tuple[Ranking, set[str], set[str], str]:
    """(the ranking cut to what a figure draws, the agents kept, the scenarios drawn, the
    titles' note on what was left out)."""
    agents = shown_agents(ranking, anchors)
    keep = set(agents)
    scenarios = ranking.scenarios[:FIGURE_SCENARIOS]
    drawn = set(scenarios)
    shown = Ranking(
        [r for r in ranking.rows if r.agent in keep],
        scenarios,
        [sc for sc in ranking.normalized if sc in drawn],
        ranking.ranges,
    )
    note = _left_out(len(ranking.rows) - len(agents), len(ranking.scenarios) - len(scenarios))
    return shown, keep, drawn, note


def build_figures(rows: Sequence[Row], ranking: Ranking) -> dict[str, str]:
    """Figure title -> inline SVG, in reading order. However many agents and scenarios the
    results hold, each figure draws at most `FIGURE_AGENTS` agents and `FIGURE_SCENARIOS`
    scenarios (its title says so when it leaves some out), with names cut to
    `FIGURE_NAME_CHARS`: its size is bounded."""
    shown, keep, drawn, note = _bounded(ranking, (FLOOR, REFERENCE))
    rows = [r for r in rows if r.agent in keep and r.scenario in drawn]
    out: dict[str, str] = {}
    for title, draw in (
        ("Normalized score by scenario (0 = noop, 1 = the bound)", _normalized),
        ("Reward components per agent (weighted means over every episode)", _components),
        ("Failures and pressure steps per episode", _failures),
        ("SLO attainment per agent and scenario (requests meeting their objectives)", _slo),
        ("Memory usage over the episode (bands: < 0.8 best, 0.8-0.95, 0.95-1, full)", _usage),
    ):
        svg = draw(rows, shown, title + note)
        if svg is not None:
            out[title + note] = svg
    return out


def build_context_figures(board: ContextBoard) -> dict[str, str]:
    """The context section's figures, title -> inline SVG: per reader (the first
    `FIGURE_READERS`), its agents' normalized score by level (0 = noop, 1 = the oracle) and
    their weighted reward components (at the rubric's default weights: a context line does not
    record its run's), bounded as `build_figures`'s are."""
    out: dict[str, str] = {}
    for reader, ranking in board.rankings[:FIGURE_READERS]:
        shown, keep, drawn, note = _bounded(ranking, (CONTEXT_FLOOR, CONTEXT_TOP))
        rows = [r for r in board.rows if r.reader == reader and r.agent in keep]
        rows = [r for r in rows if r.level in drawn]
        name = f"Reader {_label(reader)}: "
        normalized = f"normalized score by level (0 = {CONTEXT_FLOOR}, 1 = the {CONTEXT_TOP})"
        title = name + normalized + note.replace(" scenarios", " levels")
        svg = _normalized(rows, shown, title, mean="mean over levels")
        if svg is not None:
            out[title] = svg
        title = (
            name
            + "reward components per agent (means over every episode, at the default weights)"
            + note.replace(" scenarios", " levels")
        )
        svg = _weighted_components(rows, shown, title, CONTEXT_WEIGHTS)
        if svg is not None:
            out[title] = svg
    return out


def _left_out(agents: int, scenarios: int) -> str:
    counts = ((agents, "agents"), (scenarios, "scenarios"))
    parts = [f"{n:,} more {what}" for n, what in counts if n]
    return f" [{' and '.join(parts)} in the tables]" if parts else ""


def _label(name: str) -> str:
    return display_name(name, FIGURE_NAME_CHARS)


def _normalized(
    rows: Sequence[object], ranking: Ranking, title: str, mean: str = "suite mean"
) -> str | None:
    """One row per agent (rank order), one marker per scenario, a bar at the mean (`mean`
    labels it)."""
    agents = [
        r
        for r in ranking.rows
        if any(r.per_scenario.get(sc) is not None for sc in ranking.normalized)
    ]
    points = sum(r.per_scenario.get(sc) is not None for r in agents for sc in ranking.normalized)
    if points < 2:
        return None
    series = [
        Series(
            _label(sc),
            [r.per_scenario.get(sc) for r in agents],
            series_style(k)[0],
            marker=series_style(k)[1],
        )
        for k, sc in enumerate(ranking.normalized)
    ]
    series.append(Series(mean, [r.score for r in agents], REFERENCE_BLACK, marker="|"))
    return dot_chart(
        [_label(r.agent) for r in agents],
        series,
        x_label="normalized score",
        title=title,
        references=((0.0, FLOOR_GREY), (1.0, REFERENCE_BLACK)),
    )


class _Scored(Protocol):
    """What the components chart reads of a row (a serving `Row` or a `ContextRow`)."""

    @property
    def agent(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def components(self) -> dict[str, float]: ...


R = TypeVar("R", bound=_Scored)


def _ok_rows(rows: Sequence[R]) -> dict[str, list[R]]:
    """Agent -> its rows with at least one ok episode (one pass over the rows)."""
    by_agent: dict[str, list[R]] = {}
    for row in rows:
        if row.ok:
            by_agent.setdefault(row.agent, []).append(row)
    return by_agent


def _mean_of(rows: Sequence[_Scored], pick) -> float:
    values = [pick(r) for r in rows]
    return sum(values) / len(values) if values else float("nan")


def _components(rows: Sequence[Row], ranking: Ranking, title: str) -> str | None:
    """Stacked weighted components per agent, penalties to the left of 0."""
    return _weighted_components(rows, ranking, title, {c: DEFAULT_WEIGHTS[c] for c in COMPONENTS})


def _weighted_components(
    rows: Sequence[_Scored], ranking: Ranking, title: str, weights: Mapping[str, float]
) -> str | None:
    """Stacked components times `weights` (their order) per agent, penalties left of 0."""
    ok = _ok_rows(rows)
    agents = [r.agent for r in ranking.rows if r.agent in ok]
    if len(agents) * len(weights) < 2 or not agents:
        return None
    series = [
        Series(
            c,
            [weight * _mean_of(ok[a], lambda r, c=c: r.components[c]) for a in agents],
            series_style(j)[0],
        )
        for j, (c, weight) in enumerate(weights.items())
    ]
    return bar_chart(
        [_label(a) for a in agents],
        series,
        stacked=True,
        x_label="weighted contribution to reward",
        title=title,
    )


def _failures(rows: Sequence[Row], ranking: Ranking, title: str) -> str | None:
    ok = _ok_rows(rows)
    agents = [r.agent for r in ranking.rows if r.agent in ok]
    if not agents:
        return None
    series = [
        Series(label, [_mean_of(ok[a], lambda r, k=key: r.metrics[k]) for a in agents], colour)
        for label, key, colour in (
            ("failures / episode", "failures", "#D55E00"),
            ("pressure steps / episode", "pressure_steps", "#56B4E9"),
        )
    ]
    return bar_chart(
        [_label(a) for a in agents], series, stacked=False, x_label="per episode", title=title
    )


def _slo(rows: Sequence[Row], ranking: Ranking, title: str) -> str | None:
    """One row per agent (rank order), one marker per scenario: its mean SLO attainment."""
    attained = {
        (r.scenario, r.agent): value
        for r in rows
        if r.ok and (value := r.metrics.get("slo_attainment")) is not None and value == value
    }
    scenarios = ranking.scenarios
    agents = [r.agent for r in ranking.rows if any((sc, r.agent) in attained for sc in scenarios)]
    if len(attained) < 2:
        return None
    drawn = [sc for sc in ranking.scenarios if any((sc, a) in attained for a in agents)]
    series = [
        Series(
            _label(sc),
            [attained.get((sc, a)) for a in agents],
            series_style(k)[0],
            marker=series_style(k)[1],
        )
        for k, sc in enumerate(drawn)
    ]
    return dot_chart(
        [_label(a) for a in agents],
        series,
        x_label="SLO attainment",
        title=title,
        references=((0.0, FLOOR_GREY), (1.0, REFERENCE_BLACK)),
    )


MAX_LINE_POINTS = 400
"""Points of one line in the usage chart: a longer series (a full trace replay has thousands of
turns) is drawn as that many bucket means."""


def _thin(values: Sequence[float]) -> list[float]:
    """`values` as at most `MAX_LINE_POINTS` bucket means (the same list when shorter)."""
    if len(values) <= MAX_LINE_POINTS:
        return list(values)
    edges = [round(i * len(values) / MAX_LINE_POINTS) for i in range(MAX_LINE_POINTS + 1)]
    return [sum(values[a:b]) / (b - a) for a, b in pairwise(edges) if b > a]


def _usage(rows: Sequence[Row], ranking: Ranking, title: str) -> str | None:
    """One panel per scenario (four to a row), one line per agent: the top `USAGE_AGENTS` in
    rank order in colour, over the others thin and grey."""
    ranked = [r.agent for r in ranking.rows]
    top = ranked[:USAGE_AGENTS]
    coloured = agent_styles(top)
    others = len(ranked) - len(top)
    group = f"{others} other agent{'s' if others != 1 else ''}"
    styles = {a: (OTHERS_GREY, "") for a in ranked[USAGE_AGENTS:]} | coloured
    panels = []
    by_scenario: dict[str, dict[str, Row]] = {}
    for row in rows:
        if row.usage:
            by_scenario.setdefault(row.scenario, {})[row.agent] = row
    for scenario in ranking.scenarios:
        mine = by_scenario.get(scenario, {})
        lines = [
            Series(
                _label(agent),
                _thin(mine[agent].usage),
                colour,
                dash,
                width=1.0 if agent not in coloured else 2.0,
                group="" if agent in coloured else group,
            )
            for agent, (colour, dash) in styles.items()
            if agent in mine
        ]
        if lines:
            panels.append((_label(scenario), lines))
    if not panels or max(len(s.values) for _, lines in panels for s in lines) < 2:
        return None
    return line_panels(
        panels,
        y_label="GPU memory usage",
        x_label="turn",
        title=title,
        y_range=(0.0, 1.05),
        bands=((0.0, 0.8, "#e5f5ee"), (0.8, 0.95, "#fdf4d6"), (0.95, 1.0, "#fbe3d3")),
    )
