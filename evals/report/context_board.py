"""The context family's section of the leaderboard: its rows, its ranking and how both are
shown (Markdown lines, an HTML fragment); `build` puts it after the serving section.

An entry is an agent with the reader that answered its questions: a reader changes every score
(`docs/context.md`), so rows are per (level, agent, reader) and each reader's agents are ranked
apart, between that reader's `noop` (0) and `oracle` (1) on paired seeds, the range the
family's validity checks state their shares in ("closes x of noop → oracle"). The ranking is
the serving section's (`ranking.rank_agents`): a level plays the part of a scenario, with the
same paired bootstrap and the same minimum range (`MIN_RANGE`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kv_context_env import CONTEXT_SUITE_VERSION
from kv_context_env.generator.levels import LEVELS
from rubrics.context import CONTEXT_COMPONENTS, CONTEXT_WEIGHTS

from ..common.stats import mean_ci
from ..prompt_cache.dollars import mean_episode_cost
from ..prompt_cache.provider import Prices
from ..serving.normalize import MIN_RANGE, normalized_scores
from .display import display_name, html_text, markdown_cell
from .ranking import RESAMPLES, Ranking, rank_agents
from .tables import (
    Cell,
    fmt,
    html_table,
    markdown_table,
    ranking_cells,
    ranking_headers,
    sort_key,
)

FLOOR = "noop"
"""The context family's floor: the engine's own prioritized LRU evicts (`docs/context.md`)."""
TOP = "oracle"
"""Its ceiling: the clairvoyant keep / evict / recall plan from the answer key (greedy, so an
honest agent may pass it on an episode)."""
METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rouge_l", "ROUGE-L"),
    ("value_accuracy", "value accuracy"),
    ("facts_visible", "facts visible"),
    ("oom_events", "OOM events"),
    ("mean_active_blocks", "blocks (mean)"),
    ("recalls", "recalls"),
)
"""The metrics the table shows (those `kvarena context-eval` prints)."""
NOTE_NAMES = 10
"""Level names listed in the ranking's note; more are counted."""
FIGURE_READERS = 3
"""Readers whose agents get figures (the first in order, extractive first): each reader has
its own, so a page's figures stay bounded however many readers the results hold."""


@dataclass(frozen=True)
class ContextRow:
    level: str
    agent: str
    reader: str
    episodes: int
    failed: int
    reward: tuple[float, float]
    """(mean, Student-t 95% half-width) over ok episodes."""
    components: dict[str, float]
    """Unweighted means over ok episodes."""
    metrics: dict[str, float]
    normalized: float | None = None
    """(agent - noop) / (oracle - noop) on the seeds all three ran with this reader (None: no
    range, or not run)."""
    to_top: tuple[float, float] | None = None
    """Paired oracle - agent, (mean, 95% half-width); None where the oracle was not run."""
    cost: float | None = None
    """Mean input dollars per episode from the recorded model usage (with prices; None for
    policies)."""

    @property
    def ok(self) -> bool:
        """At least one episode ran to the end."""
        return self.episodes > self.failed


@dataclass(frozen=True)
class ContextBoard:
    rows: list[ContextRow]
    """One per (level, agent, reader), in level order, then reader, then best reward first."""
    rankings: list[tuple[str, Ranking]]
    """(reader, its agents ranked over the levels), the extractive reader first."""


def level_order(name: str) -> tuple[int, str]:
    order = {level: i for i, level in enumerate(LEVELS)}
    return (order.get(name, len(order)), name)


def _reader_order(name: str) -> tuple[bool, str]:
    return (name != "extractive", name)


def _as_scenario(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the ranking and the normalization read of a result, a level as the scenario."""
    return {
        "scenario": result["level"],
        "agent": result["agent"],
        "seed": result["seed"],
        "status": result["status"],
        "reward": result["reward"],
    }


def context_board(
    results: Sequence[Mapping[str, Any]], prices: Prices | None = None
) -> ContextBoard:
    """The section's rows and rankings from checked context results (`result_check`)."""
    by_reader: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        by_reader.setdefault(r["reader"], []).append(r)
    rows: list[ContextRow] = []
    rankings: list[tuple[str, Ranking]] = []
    for reader in sorted(by_reader, key=_reader_order):
        mine = by_reader[reader]
        groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for r in mine:
            groups.setdefault((r["level"], r["agent"]), []).append(r)
        projected = [_as_scenario(r) for r in mine]
        normalized = normalized_scores(projected, floor=FLOOR, top=TOP)
        for (level, agent), group in groups.items():
            row = _row(level, agent, reader, group)
            figures = normalized.get((level, agent))
            if figures is not None:
                row = replace(row, normalized=figures.score, to_top=figures.to_bound)
            if prices is not None:
                row = replace(row, cost=mean_episode_cost(group, prices))
            rows.append(row)
        levels = sorted({r["level"] for r in mine}, key=level_order)
        rankings.append((reader, rank_agents(projected, levels, floor=FLOOR, top=TOP)))
    rows.sort(
        key=lambda r: (
            level_order(r.level),
            _reader_order(r.reader),
            -sort_key(r.reward[0]),
            r.agent,
        )
    )
    return ContextBoard(rows, rankings)


def _row(level: str, agent: str, reader: str, group: Sequence[Mapping[str, Any]]) -> ContextRow:
    ok = [r for r in group if r["status"] == "ok"]
    reward = mean_ci([r["reward"] for r in ok]) if ok else (float("nan"), float("nan"))
    return ContextRow(
        level=level,
        agent=agent,
        reader=reader,
        episodes=len(group),
        failed=len(group) - len(ok),
        reward=reward,
        components={c: _mean([r["components"][c] for r in ok]) for c in CONTEXT_COMPONENTS},
        metrics={m: _mean([r["metrics"][m] for r in ok]) for m, _ in METRIC_COLUMNS},
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _has_cost(board: ContextBoard) -> bool:
    return any(row.cost is not None for row in board.rows)


def headers(cost: bool = False) -> list[str]:
    return [
        "level",
        "agent",
        "reader",
        "episodes",
        "failed",
        "reward ± 95% CI",
        "normalized",
        "oracle − agent ± 95% CI (paired)",
        *CONTEXT_COMPONENTS,
        *(label for _, label in METRIC_COLUMNS),
        *(["input $/episode"] if cost else []),
    ]


def cells(row: ContextRow, cost: bool = False) -> list[Cell]:
    """(text, sort value) per column of the detail table."""
    mean, half = row.reward
    out: list[Cell] = [
        (display_name(row.level), f"{level_order(row.level)[0]:02d}{display_name(row.level)}"),
        (display_name(row.agent), display_name(row.agent)),
        (display_name(row.reader), display_name(row.reader)),
        (str(row.episodes), row.episodes),
        (str(row.failed), row.failed),
        ("–" if mean != mean else f"{mean:+.3f} ± {half:.3f}", sort_key(mean)),
        (
            fmt(row.normalized, 2),
            sort_key(row.normalized if row.normalized is not None else float("nan")),
        ),
        (
            "–" if row.to_top is None else f"{row.to_top[0]:+.3f} ± {row.to_top[1]:.3f}",
            sort_key(row.to_top[0] if row.to_top is not None else float("nan")),
        ),
    ]
    out += [
        (fmt(row.components[c], sign=True), sort_key(row.components[c])) for c in CONTEXT_COMPONENTS
    ]
    out += [(fmt(row.metrics[m], 2), sort_key(row.metrics[m])) for m, _ in METRIC_COLUMNS]
    if cost:
        value = row.cost if row.cost is not None else float("nan")
        out.append((fmt(row.cost, 4), sort_key(value)))
    return out


def ranking_note() -> str:
    """How the section ranks, in one paragraph."""
    return (
        f"Context suite version {CONTEXT_SUITE_VERSION}. Each reader's agents ranked by their "
        "mean normalized score over the levels with a range: per level "
        f"(agent − {FLOOR}) / ({TOP} − {FLOOR}) in mean reward on paired seeds, {FLOOR} and "
        f"the {TOP} read by the same reader; 0 leaves eviction to the engine's LRU, 1 is the "
        "clairvoyant oracle (greedy: an agent may pass it). The score's 95% CI and the rank "
        f"interval come from a paired bootstrap over seeds ({RESAMPLES} resamples, the same "
        "draw for every agent)."
    )


def left_out_note(ranking: Ranking, name: Callable[[str], str] = display_name) -> str:
    """The levels one reader's ranking leaves out of the mean, and why ("" when none);
    `name` shows a level's name (cleaned for the output: `markdown_cell` for Markdown)."""
    left_out = [level for level in ranking.scenarios if level not in ranking.normalized]
    if not left_out:
        return ""
    shown = ", ".join(name(level) for level in left_out[:NOTE_NAMES])
    more = f" and {len(left_out) - NOTE_NAMES} more" if len(left_out) > NOTE_NAMES else ""
    return (
        f"Not in the mean ({shown}{more}): no {FLOOR} and {TOP} with this reader on the same "
        f"seeds, or a range ({TOP} − {FLOOR}) under {MIN_RANGE}."
    )


def detail_note(cost: bool = False) -> str:
    weights = ", ".join(f"{k} {v:g}" for k, v in CONTEXT_WEIGHTS.items())
    return (
        "One row per agent x reader x level. Reward: mean ± Student-t 95% CI over the ok "
        f"episodes; components are their unweighted means (default weights: {weights}; a "
        "run's own `--weights` are in its run.json). `failed` counts episodes that did not "
        f"finish (never dropped). `normalized` = (agent − {FLOOR}) / ({TOP} − {FLOOR}) on "
        f"the seeds all three ran with the same reader (shown where {TOP} − {FLOOR} >= "
        f"{MIN_RANGE}); `{TOP} − agent` is the paired difference with its 95% CI."
        + (" Input dollars per episode from the recorded model usage." if cost else "")
    )


def render_markdown(board: ContextBoard) -> list[str]:
    """The section's Markdown lines, from its first heading."""
    cost = _has_cost(board)
    lines = ["## Context family: ranking", "", ranking_note()]
    for reader, ranking in board.rankings:
        lines += ["", f"### Reader {markdown_cell(reader)}", ""]
        note = left_out_note(ranking, markdown_cell)
        lines += [note, ""] if note else []
        lines += markdown_table(
            ranking_headers(ranking),
            [ranking_cells(r, ranking) for r in ranking.rows],
            left=["agent"],
        )
    lines += [
        "",
        "## Context family: every agent on every level",
        "",
        detail_note(cost),
        "",
    ]
    lines += markdown_table(headers(cost), [cells(row, cost) for row in board.rows], left=3)
    return lines


def render_html(board: ContextBoard, figures: Mapping[str, str]) -> str:
    """The section as an HTML fragment: the rankings (a table per reader), the figures, every
    row."""
    cost = _has_cost(board)
    parts = [
        "<h2>Context family: ranking</h2>",
        f"<p class='note'>{html.escape(ranking_note())} Click a column header to sort.</p>",
    ]
    for i, (reader, ranking) in enumerate(board.rankings, start=1):
        parts.append(f"<h3>Reader {html_text(reader)}</h3>")
        note = left_out_note(ranking)
        if note:
            parts.append(f"<p class='note'>{html.escape(note)}</p>")
        parts.append(
            html_table(
                f"context-ranking-{i}",
                ranking_headers(ranking),
                [("", ranking_cells(r, ranking)) for r in ranking.rows],
                compact=True,
            )
        )
    figures_html = "".join(
        f"<figure><figcaption><b>{html.escape(title)}</b></figcaption>{svg}</figure>"
        for title, svg in figures.items()
    )
    more = len(board.rankings) - FIGURE_READERS
    if more > 0:
        figures_html += (
            f"<p class='note'>Figures for the first {FIGURE_READERS} readers; {more:,} more "
            "reader(s) in the tables.</p>"
        )
    parts += [
        f"<h2>Context family: figures</h2>{figures_html or '<p>(no figure: too few points)</p>'}",
        "<h2>Context family: every agent on every level</h2>",
        f"<p class='note'>{html.escape(detail_note(cost).replace('`', ''))} Rows shaded red "
        "have failed episodes.</p>",
        html_table(
            "context-leaderboard",
            headers(cost),
            [("failed" if row.failed else "", cells(row, cost)) for row in board.rows],
        ),
    ]
    return "".join(parts)
