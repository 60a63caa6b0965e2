"""Leaderboard reports from one or more `results.jsonl` runs (policies and models mixed), of
either family: `read_results` reads serving and context lines alike (`result_check.family_of`
tells them apart) and `build_report` gives each family its own section, serving first (the
context family's is `context_board`).

`build_report(results, out)` writes `leaderboard.md` and a self-contained `index.html` (sortable
tables, figures embedded as inline SVG, no network needed), and `to_dataset(results)`
gives the results as a Hugging Face `datasets.Dataset`. Intervals are Student-t 95% intervals
over episodes (`evals.common.stats.mean_ci`). Failed rollouts are counted and shown, never dropped;
their rewards are not averaged (there are none).
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kv_cache_env.bounded_read import (
    RESULTS_LIMITS,
    SMALL_JSON_LIMITS,
    FileReadError,
    iter_line_bytes,
    read_json,
)
from kv_cache_env.policies import ANCHORS, REFERENCE
from kv_cache_env.sim import ACTIONS, SUITE, SUITE_VERSION, TIERS
from kv_context_env import CONTEXT_SUITE_VERSION
from rubrics import COMPONENTS, DEFAULT_WEIGHTS
from rubrics.metrics import TOOL_COUNTERS

from ..common.durable import write_all_atomic
from ..common.result_check import FAMILIES, Family, family_of, parse_line
from ..common.stats import mean_ci
from ..prompt_cache.dollars import mean_episode_cost
from ..prompt_cache.provider import Prices
from ..serving.labels import labels_sentence
from ..serving.normalize import FLOOR, MIN_RANGE, normalized_scores
from ..serving.summary import group_results
from . import MIN_EPISODES, context_board
from .context_board import ContextBoard, ContextRow
from .display import display_name, html_text, markdown_cell
from .episodes import Episode, episode_list_html, serving_episodes, write_pages
from .ranking import RESAMPLES, Ranking, rank_agents
from .row import Row
from .tables import fmt, html_table, ranking_cells, ranking_headers, sort_key

METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("failures", "failures/ep"),
    ("pressure_steps", "pressure steps"),
    ("tool_calls_per_turn", "tool calls/turn"),
    *(
        (tool.counter, f"{tool.name} calls")
        for tool in ACTIONS.targeted
        if tool.counter in TOOL_COUNTERS
    ),
    ("invalid_calls", "invalid calls"),
)

SERVING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("slo_attainment", "SLO attainment"),
    ("goodput_rps", "goodput req/s"),
    ("first_token_p50_s", "first token p50 s"),
    ("first_token_p95_s", "first token p95 s"),
    ("resumed_first_token_p95_s", "resumed first token p95 s"),
    ("token_gap_p95_s", "time between tokens p95 s"),
    ("offloaded_bytes", "offloaded GB"),
    ("loaded_bytes", "loaded GB"),
    ("recompute_tokens", "recompute tokens"),
)
"""The serving metrics' column group (`rubrics.metrics.SERVING_METRIC_NAMES`): means over the
episodes that have a value, blank where none has (results written before these metrics)."""
_GIGABYTE_COLUMNS = frozenset({"offloaded_bytes", "loaded_bytes"})


NOTE_NAMES = 10
"""Scenario names listed in the ranking's note; more are counted."""


class ReportError(ValueError):
    """A results file that cannot be read; the message names the file and line."""


def load_results(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Results from run directories (their `results.jsonl`) or results files (`read_results`,
    its duplicate count dropped)."""
    return read_results(paths)[0]


SUITES: dict[Family, tuple[str, str]] = {
    "serving": (SUITE_VERSION, "kvarena eval"),
    "context": (CONTEXT_SUITE_VERSION, "kvarena context-eval"),
}
"""Family -> (the suite version this kvarena reports, the command that makes its results)."""


def episode_key(result: dict[str, Any]) -> tuple[Any, ...]:
    """What names one episode of a checked result: its family and suite, then (scenario,
    agent, seed) for serving, (level, agent, reader, seed) for context."""
    family = family_of(result)
    suite = str(result["suite_version"])
    if family == "context":
        return (family, suite, result["level"], result["agent"], result["reader"], result["seed"])
    return (family, suite, result["scenario"], result["agent"], result["seed"])


def _episode_name(result: dict[str, Any]) -> str:
    if family_of(result) == "context":
        return (
            f"{display_name(result['agent'])} (reader {display_name(result['reader'])}) on "
            f"{display_name(result['level'])} seed {result['seed']}"
        )
    return (
        f"{display_name(result['agent'])} on {display_name(result['scenario'])} "
        f"seed {result['seed']}"
    )


def read_results(
    paths: Iterable[Path], origins: list[Path] | None = None
) -> tuple[list[dict[str, Any]], int]:
    """(results, duplicates): every line of the run directories (their `results.jsonl`) or
    results files, of either family, read within `RESULTS_LIMITS` and checked by its family's
    schema (`result_check`). A line repeating an earlier one's episode (`episode_key`) byte
    for byte is counted once (`duplicates` says how many were dropped: the same run given
    twice); one that repeats the key with other content is refused, naming both lines. Each
    family's lines must be of one suite version, the one this kvarena reports. `origins`: a
    list to append each kept result's run directory to (where its transcripts are)."""
    results: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], tuple[str, bytes]] = {}
    duplicates = 0
    for path in paths:
        file = path / "results.jsonl" if path.is_dir() else path
        if not file.is_file():
            raise ReportError(f"{path}: no results.jsonl here")
        try:
            for number, line in iter_line_bytes(file, RESULTS_LIMITS):
                result, problems = parse_line(line, FAMILIES)
                if result is None:
                    raise ReportError(f"{file}:{number}: {'; '.join(problems)[:300]}")
                key = episode_key(result)
                digest = hashlib.sha256(line.strip()).digest()
                if key in seen:
                    where, before = seen[key]
                    if before != digest:
                        one = (
                            "agent, reader, level and seed"
                            if key[0] == "context"
                            else "agent, scenario and seed"
                        )
                        raise ReportError(
                            f"{file}:{number}: {_episode_name(result)} is also at {where} with "
                            f"other results (one episode per {one})"
                        )
                    duplicates += 1
                    continue
                seen[key] = (f"{file}:{number}", digest)
                results.append(result)
                if origins is not None:
                    origins.append(file.parent)
        except FileReadError as error:
            raise ReportError(str(error)) from None
    if not results:
        raise ReportError("no results to report")
    for family, (current, command) in SUITES.items():
        suites = sorted({str(r["suite_version"]) for r in results if family_of(r) == family})
        if len(suites) > 1:
            shown = ", ".join(display_name(suite, 20) for suite in suites[:5])
            raise ReportError(
                f"{family} results of different suite versions ({shown}) cannot share a leaderboard"
            )
        if suites and suites[0] != current:
            raise ReportError(
                f"results of {family} suite v{display_name(suites[0], 20)}: this kvarena reports "
                f"{family} suite v{current} (rerun {command} with it)"
            )
    return results, duplicates


def scenario_order(name: str) -> tuple[int, str]:
    order = {tier: i for i, tier in enumerate(dict.fromkeys((*TIERS, *SUITE, "medium-128")))}
    return (order.get(name, len(order)), name)


def leaderboard(
    results: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]] = ()
) -> list[Row]:
    """One row per agent x scenario. `reference`: noop and bound results to normalize by
    where `results` lack them (from the shipped table); they get no rows of their own."""
    rows = []
    for (scenario, agent), group in group_results(results).items():
        ok = [r for r in group if r["status"] == "ok"]
        reward = mean_ci([r["reward"] for r in ok]) if ok else (float("nan"), float("nan"))
        components = {c: _mean(r["components"][c] for r in ok) for c in COMPONENTS}
        metrics = {m: _mean(r["metrics"][m] for r in ok) for m, _ in METRIC_COLUMNS}
        metrics |= {
            m: _mean(v for r in ok if (v := r["metrics"].get(m)) is not None)
            for m, _ in SERVING_COLUMNS
        }
        turns = max((len(r["series"]["usage"]) for r in ok), default=0)
        usage = [
            _mean(r["series"]["usage"][t] for r in ok if t < len(r["series"]["usage"]))
            for t in range(turns)
        ]
        rows.append(
            Row(
                scenario,
                agent,
                len(group),
                len(group) - len(ok),
                reward,
                components,
                metrics,
                None,
                usage,
            )
        )
    reference_rewards = {
        r.scenario: r.reward[0] for r in rows if r.agent == REFERENCE and r.failed < r.episodes
    }
    for (scenario, agent), group in group_results(reference).items():
        if agent == REFERENCE and scenario not in reference_rewards:
            reference_rewards[scenario] = _mean(r["reward"] for r in group)
    rows = [
        replace(r, gap=reference_rewards[r.scenario] - r.reward[0])
        if r.scenario in reference_rewards and r.episodes > r.failed
        else r
        for r in rows
    ]
    normalized = normalized_scores([*results, *reference])
    rows = [
        replace(r, normalized=n.score, to_bound=n.to_bound)
        if (n := normalized.get((r.scenario, r.agent)))
        else r
        for r in rows
    ]
    rows.sort(key=lambda r: (scenario_order(r.scenario), -sort_key(r.reward[0]), r.agent))
    return rows


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else float("nan")


def _headers(cost: bool = False) -> list[str]:
    return [
        "scenario",
        "agent",
        "episodes",
        "failed",
        "reward ± 95% CI",
        "normalized",
        "bound − agent ± 95% CI (paired)",
        *COMPONENTS,
        *(label for _, label in METRIC_COLUMNS),
        *(label for _, label in SERVING_COLUMNS),
        *(["input $/episode"] if cost else []),
    ]


def _cells(row: Row, cost: bool = False) -> list[tuple[str, float | str]]:
    """(text, sort value) per column."""
    mean, half = row.reward
    reward = "–" if mean != mean else f"{mean:+.3f} ± {half:.3f}"
    cells: list[tuple[str, float | str]] = [
        (
            display_name(row.scenario),
            f"{scenario_order(row.scenario)[0]:02d}{display_name(row.scenario)}",
        ),
        (display_name(row.agent), display_name(row.agent)),
        (str(row.episodes), row.episodes),
        (str(row.failed), row.failed),
        (reward, sort_key(mean)),
        (
            fmt(row.normalized, 2),
            sort_key(row.normalized if row.normalized is not None else float("nan")),
        ),
        (
            "–" if row.to_bound is None else f"{row.to_bound[0]:+.3f} ± {row.to_bound[1]:.3f}",
            sort_key(row.to_bound[0] if row.to_bound is not None else float("nan")),
        ),
    ]
    cells += [(fmt(row.components[c], sign=True), sort_key(row.components[c])) for c in COMPONENTS]
    cells += [(fmt(row.metrics[m], 2), sort_key(row.metrics[m])) for m, _ in METRIC_COLUMNS]
    for m, _ in SERVING_COLUMNS:
        value = row.metrics[m]
        shown = value / 1e9 if m in _GIGABYTE_COLUMNS else value
        cells.append((fmt(shown, 2), sort_key(value)))
    if cost:
        value = row.cost if row.cost is not None else float("nan")
        cells.append((fmt(row.cost, 4), sort_key(value)))
    return cells


def _has_cost(rows: Sequence[Row]) -> bool:
    return any(row.cost is not None for row in rows)


def ranking_note(
    ranking: Ranking, reference: str, name: Callable[[str], str] = display_name
) -> str:
    """How the ranking was computed, in one paragraph; `name` shows a scenario's name (cleaned
    for the output: `markdown_cell` for Markdown)."""
    left_out = [sc for sc in ranking.scenarios if sc not in ranking.normalized]
    left_out = [sc for sc in left_out if sc not in ranking.few]
    why = ""
    if ranking.few:
        few = ", ".join(f"{name(sc)} ({n})" for sc, n in list(ranking.few.items())[:NOTE_NAMES])
        why += (
            f" Shown but not in the mean, too few paired episodes (under {ranking.min_seeds}): "
            f"{few}{' and more' if len(ranking.few) > NOTE_NAMES else ''}; "
            "`kvarena report --min-episodes 1` counts them."
        )
    if left_out:
        shown = ", ".join(name(sc) for sc in left_out[:NOTE_NAMES])
        more = f" and {len(left_out) - NOTE_NAMES} more" if len(left_out) > NOTE_NAMES else ""
        why += (
            f" Not in the mean ({shown}{more}): no noop and bound on the same seeds, or a "
            f"range (bound − noop) under {MIN_RANGE}."
        )
    return (
        "Agents ranked by their mean normalized score over the scenarios with a range: per "
        "scenario (agent − noop) / (bound − noop) on paired seeds, 0 doing nothing and 1 the "
        "reference bound. The score's 95% CI and the rank interval come from a paired "
        f"bootstrap over seeds ({RESAMPLES} resamples, the same draw for every agent)."
        + why
        + f" Reference: {reference}. "
        + labels_sentence(ranking.scenarios)
    )


def render_markdown(
    rows: Sequence[Row],
    ranking: Ranking | None,
    reference: str,
    context: ContextBoard | None = None,
) -> str:
    """The leaderboard in Markdown: the serving section (where `ranking` is given), then the
    context family's (where `context` is)."""
    lines = ["# kvcache-arena leaderboard", ""]
    if ranking is not None:
        lines += _serving_markdown(rows, ranking, reference)
    if context is not None:
        if ranking is not None:
            lines.append("")
        lines += context_board.render_markdown(context)
    return "\n".join(lines) + "\n"


def _serving_markdown(rows: Sequence[Row], ranking: Ranking, reference: str) -> list[str]:
    cost = _has_cost(rows)
    headers = _headers(cost)
    rank_headers = ranking_headers(ranking)
    lines = [
        f"Serving suite version {SUITE_VERSION}. "
        + ranking_note(ranking, reference, markdown_cell),
        "",
        "## Ranking",
        "",
        "| " + " | ".join(markdown_cell(h) for h in rank_headers) + " |",
        "|" + "|".join("---" if h == "agent" else "---:" for h in rank_headers) + "|",
    ]
    for ranked in ranking.rows:
        cells = ranking_cells(ranked, ranking)
        lines.append("| " + " | ".join(markdown_cell(text) for text, _ in cells) + " |")
    lines += [
        "",
        "## Every agent on every scenario",
        "",
        "One row per agent x scenario. Reward: mean ± Student-t 95% CI over the ok episodes; "
        "components are their unweighted means (weights: "
        + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_WEIGHTS.items())
        + "). `failed` counts rollouts that produced no episode (never dropped). `normalized` "
        "= (agent - noop) / (bound - noop) on the seeds all three ran (shown where bound - noop "
        ">= 0.05); `bound − agent` is the paired difference to the reference bound with its 95% "
        "CI. The serving columns (SLO attainment to recompute tokens) are means over the "
        "episodes that report them (blank: results written before they were kept); the "
        "objectives are each scenario's (the docs' serving page).",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(markdown_cell(t) for t, _ in _cells(row, cost)) + " |")
    return lines


# --- HTML -----------------------------------------------------------------------------------
_SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th, column) {
  th.addEventListener('click', function () {
    var table = th.closest('table');
    var body = table.tBodies[0];
    var ascending = th.dataset.order !== 'asc';
    table.querySelectorAll('th').forEach(function (h) { delete h.dataset.order; });
    th.dataset.order = ascending ? 'asc' : 'desc';
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[column].dataset.sort, y = b.cells[column].dataset.sort;
      var nx = parseFloat(x), ny = parseFloat(y);
      var cmp = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
      return ascending ? cmp : -cmp;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1400px;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2rem; }
p.note { color: #444; font-size: 13px; max-width: 60rem; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; cursor: pointer; position: sticky; top: 0; }
th[data-order=asc]::after { content: ' \\25B2'; }
th[data-order=desc]::after { content: ' \\25BC'; }
#ranking { font-size: 13px; }
#ranking td:nth-child(3), #ranking th:nth-child(3) { text-align: left; font-weight: 600; }
#leaderboard td:nth-child(1), #leaderboard td:nth-child(2),
#leaderboard th:nth-child(1), #leaderboard th:nth-child(2) { text-align: left; }
table[id^=context-ranking] { font-size: 13px; }
table[id^=context-ranking] td:nth-child(3), table[id^=context-ranking] th:nth-child(3) {
  text-align: left; font-weight: 600; }
#context-leaderboard td:nth-child(-n+3), #context-leaderboard th:nth-child(-n+3) {
  text-align: left; }
tr.failed td { background: #fff0f0; }
table.compact th { white-space: normal; max-width: 8em; vertical-align: bottom;
                   overflow-wrap: break-word; font-size: 12px; }
table.compact th, table.compact td { padding: 3px 4px; }
table.compact td:nth-child(3) { white-space: normal; min-width: 8em; max-width: 15em;
                                overflow-wrap: break-word; }
table.compact small { color: #666; font-size: 11px; }
ul.episodes { font-size: 13px; padding-left: 1.2rem; } ul.episodes a { margin-right: 0.3em; }
a.failed { color: #a00; }
figure { margin: 1.5rem 0; width: 100%; } figure svg { width: 100%; height: auto; }
figcaption { margin-bottom: 0.4rem; }
.scroll { overflow: auto; max-height: 85vh; }
"""


def render_html(
    rows: Sequence[Row],
    ranking: Ranking | None,
    figs: dict[str, str],
    sources: Sequence[str],
    reference: str,
    context: ContextBoard | None = None,
    context_figs: Mapping[str, str] | None = None,
    episode_list: str = "",
) -> str:
    """The page: per family (serving where `ranking` is given, then context where `context`
    is) the ranking first, then the figures (full width), then every row; then `episode_list`
    (the serving episodes' pages, `episodes.episode_list_html`)."""
    suites = [f"serving suite v{SUITE_VERSION}"] if ranking is not None else []
    suites += [f"context suite v{CONTEXT_SUITE_VERSION}"] if context is not None else []
    summary = ", ".join(suites)
    serving = _serving_html(rows, ranking, figs, reference) if ranking is not None else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>kvcache-arena leaderboard</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<h1>kvcache-arena leaderboard</h1>"
        f"<p class='note'>{summary[:1].upper() + summary[1:]}; {len(sources)} run(s): "
        f"{', '.join(html_text(source, 200) for source in sources)}.</p>"
        f"{serving}"
        f"{context_board.render_html(context, context_figs or {}) if context else ''}"
        f"{'<h2 id=episodes>Episodes</h2>' + episode_list if episode_list else ''}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def _serving_html(
    rows: Sequence[Row], ranking: Ranking, figs: dict[str, str], reference: str
) -> str:
    cost = _has_cost(rows)
    ranking_table = html_table(
        "ranking",
        ranking_headers(ranking),
        [("", ranking_cells(r, ranking)) for r in ranking.rows],
        compact=True,
    )
    detail = html_table(
        "leaderboard",
        _headers(cost),
        [("failed" if row.failed else "", _cells(row, cost)) for row in rows],
    )
    figures_html = "".join(
        f"<figure><figcaption><b>{html.escape(title)}</b></figcaption>{svg}</figure>"
        for title, svg in figs.items()
    )
    return (
        f"<h2>Ranking</h2>{ranking_table}"
        f"<p class='note'>{html.escape(ranking_note(ranking, reference))} Click a column "
        "header to sort.</p>"
        f"<h2>Figures</h2>{figures_html or '<p>(no figure: too few points)</p>'}"
        "<h2>Every agent on every scenario</h2>"
        "<p class='note'>Reward: mean ± Student-t 95% CI over ok episodes; components are "
        "unweighted means. Rows shaded red have failed rollouts (counted, never dropped).</p>"
        f"{detail}"
    )


def to_dataset(results: Sequence[dict[str, Any]]) -> Any:
    """The results as a `datasets.Dataset`, one row per episode of either family: its
    `family`, the serving `scenario` or the context `level` and `reader` (null where the family
    has none), components and metrics as structs (null for a failed rollout; the two families'
    names side by side, null where a row's family lacks one), the per-turn usage series
    (serving), the model's token usage and the full episode record as JSON text."""
    import datasets

    rows = [
        {
            "family": family_of(r),
            "agent": r["agent"],
            "scenario": r.get("scenario"),
            "level": r.get("level"),
            "reader": r.get("reader"),
            "seed": r["seed"],
            "status": r["status"],
            "error": r["error"],
            "reward": r["reward"],
            "components": r["components"],
            "metrics": r["metrics"],
            "usage_series": (r.get("series") or {}).get("usage", []),
            "model_usage": json.dumps(r.get("usage")),
            "record": json.dumps(r["record"]),
        }
        for r in results
    ]
    return datasets.Dataset.from_list(rows)


@dataclass(frozen=True)
class Board:
    """What a report shows, before it is written: each family's rows and ranking."""

    rows: list[Row]
    """The serving section's rows (empty without serving results)."""
    ranking: Ranking | None
    """The serving ranking (None without serving results)."""
    context: ContextBoard | None
    """The context section (None without context results)."""
    reference: str
    """Where the serving reference (noop and bound) came from."""


def assemble(
    results: Sequence[dict[str, Any]],
    prices: Prices | None = None,
    reference: Sequence[dict[str, Any]] = (),
    reference_source: str | None = None,
    min_episodes: int = MIN_EPISODES,
) -> Board:
    """Rows and rankings of checked results of either family (`read_results`). `min_episodes`:
    the paired episodes a serving scenario needs to count in the suite mean (`ranking`).
    `prices`: add each row's mean input dollars per episode (`prompt_cache.dollars`).
    `reference`: noop and bound results from the shipped table, to normalize serving scenarios
    by where the runs lack them; `reference_source` says where the reference came from.
    `kvarena eval` and `context-eval` print the rankings of their own results from here."""
    serving = [r for r in results if family_of(r) == "serving"]
    context = [r for r in results if family_of(r) == "context"]
    rows: list[Row] = []
    ranking: Ranking | None = None
    if serving:
        rows = leaderboard(serving, reference)
        if prices is not None:
            groups = group_results(serving)
            rows = [
                replace(r, cost=mean_episode_cost(groups[r.scenario, r.agent], prices))
                for r in rows
            ]
        scenarios = sorted({r.scenario for r in rows}, key=scenario_order)
        ranking = rank_agents(
            serving, scenarios, reference, anchors=ANCHORS, min_seeds=min_episodes
        )
    board = context_board.context_board(context, prices) if context else None
    source = reference_source or _reference_source(serving, reference)
    return Board(rows, ranking, board, source)


def write_report(
    board: Board, out: Path, sources: Sequence[str], episodes: Sequence[Episode] = ()
) -> list[Row | ContextRow]:
    """Write `board` as `leaderboard.md` and `index.html` in `out`, and a page per serving
    episode of `episodes` in `out/episodes/` (`episodes.write_pages`, linked from the page);
    returns its rows, serving first."""
    from .figures import build_context_figures, build_figures

    figs = build_figures(board.rows, board.ranking) if board.ranking is not None else {}
    out.mkdir(parents=True, exist_ok=True)
    order = [(r.scenario, r.agent) for r in board.rows]
    links = write_pages(episodes, order, out)
    listing = episode_list_html(episodes, order, links) if serving_episodes(episodes) else ""
    # both files whole or neither (`durable`): a full disk leaves no half-written report
    markdown = render_markdown(board.rows, board.ranking, board.reference, board.context)
    context_figs = build_context_figures(board.context) if board.context else None
    page = render_html(
        board.rows,
        board.ranking,
        figs,
        sources,
        board.reference,
        board.context,
        context_figs,
        listing,
    )
    write_all_atomic([(out / "leaderboard.md", markdown), (out / "index.html", page)])
    return [*board.rows, *(board.context.rows if board.context else [])]


def build_report(
    results: Sequence[dict[str, Any]],
    out: Path,
    sources: Sequence[str],
    prices: Prices | None = None,
    reference: Sequence[dict[str, Any]] = (),
    reference_source: str | None = None,
) -> list[Row | ContextRow]:
    """Write the report of checked results of either family (`assemble`, then `write_report`);
    returns its rows, serving first."""
    board = assemble(results, prices, reference, reference_source)
    return write_report(board, out, sources, [Episode(r) for r in results])


def _reference_source(
    results: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]]
) -> str:
    agents = {r["agent"] for r in results}
    if reference:
        return "shipped table (noop and bound records of the package)"
    if {FLOOR, REFERENCE} <= agents:
        return "computed (noop and bound were run)"
    return "missing (noop and bound were not run, and the shipped table does not cover these runs)"


def shipped_reference(
    paths: Sequence[Path],
    results: Sequence[dict[str, Any]],
    of_path: Mapping[Path, Sequence[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """noop's and the bound's results from the shipped table for the suite episodes of `paths`
    that lack them: only for runs whose `run.json` says they were made by the code the table
    was made by (`source_digest`), for the same suite, at the scenarios' own length and with
    no trace. Scored with the weights of the run's own results; the bound only where those are
    the default weights (the table's bound searched under them). `of_path`: each path's results
    where the caller holds them (else they are read again)."""
    from rubrics import WeightError, Weights

    from ..common.results import episode_result
    from ..serving.reference_table import AGENTS, played_alike, shipped

    table = shipped()
    if table is None:
        return []
    eligible: set[tuple[str, int]] = set()
    weights: dict[tuple[str, int], Weights] = {}
    for path in paths:
        info = _run_info(path)
        arguments = info.get("arguments") if info else None
        if not isinstance(arguments, dict):
            continue
        if not (
            info
            and info.get("source_digest") == table.digest
            and str(info.get("suite_version")) == table.suite_version
            and arguments.get("steps") is None
            and arguments.get("trace") is None
        ):
            continue
        for r in of_path[path] if of_path is not None else _results_of(path):
            if family_of(r) != "serving":
                continue
            try:
                run_weights = Weights(r["weights"])
            except WeightError:  # weights no run of this code writes: no reference for it
                continue
            eligible.add((r["scenario"], r["seed"]))
            weights.setdefault((r["scenario"], r["seed"]), run_weights)
    played = {(r["scenario"], r["agent"], r["seed"]) for r in results if family_of(r) == "serving"}
    return [
        episode_result(
            agent=agent,
            scenario=scenario,
            seed=seed,
            record=table.record(agent, scenario, seed),
            weights=weights[scenario, seed],
        )
        for scenario, seed in sorted(eligible)
        for agent in AGENTS
        if (scenario, agent, seed) not in played
        and (agent, scenario, seed) in table.records
        and played_alike(agent, weights[scenario, seed])
    ]


def _run_info(path: Path) -> dict[str, Any] | None:
    file = (path if path.is_dir() else path.parent) / "run.json"
    try:
        info = read_json(file, SMALL_JSON_LIMITS)  # bounded: a run.json may be anything
    except FileReadError:
        return None
    return info if isinstance(info, dict) else None


def _results_of(path: Path) -> list[dict[str, Any]]:
    """The checked results of one path (`load_results` read them already: none is refused)."""
    try:
        return read_results([path])[0]
    except ReportError:
        return []
