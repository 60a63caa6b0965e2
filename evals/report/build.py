"""Leaderboard reports from one or more `results.jsonl` runs (policies and models mixed).

`build_report(results, out)` writes `leaderboard.md` and a self-contained `index.html` (sortable
table, matplotlib figures embedded as inline SVG, no network needed), and `to_dataset(results)`
gives the results as a Hugging Face `datasets.Dataset`. Intervals are Student-t 95% intervals
over episodes (`evals.common.stats.mean_ci`). Failed rollouts are counted and shown, never dropped;
their rewards are not averaged (there are none).
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kv_cache_env.sim import SUITE, SUITE_VERSION, TIERS
from rubrics import COMPONENTS, DEFAULT_WEIGHTS

from ..common.result_check import parse_line
from ..common.stats import mean_ci
from ..prompt_cache.dollars import mean_episode_cost
from ..prompt_cache.provider import Prices
from ..serving.normalize import normalized_scores
from ..serving.policies import REFERENCE
from ..serving.summary import group_results

METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("failures", "failures/ep"),
    ("pressure_steps", "pressure steps"),
    ("tool_calls_per_turn", "tool calls/turn"),
    ("evict_calls", "evict calls"),
    ("compress_calls", "compress calls"),
    ("swap_calls", "swap calls"),
    ("invalid_calls", "invalid calls"),
)


class ReportError(ValueError):
    """A results file that cannot be read; the message names the file and line."""


def load_results(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Results from run directories (their `results.jsonl`) or results files."""
    results: list[dict[str, Any]] = []
    for path in paths:
        file = path / "results.jsonl" if path.is_dir() else path
        if not file.is_file():
            raise ReportError(f"{path}: no results.jsonl here")
        try:
            data = file.read_bytes()
        except OSError as error:
            raise ReportError(f"{file}: cannot read it ({error.strerror})") from None
        for number, line in enumerate(data.splitlines(), start=1):
            if not line.strip():
                continue
            result, problems = parse_line(line)
            if result is None:
                raise ReportError(f"{file}:{number}: {'; '.join(problems)[:300]}")
            results.append(result)
    if not results:
        raise ReportError("no results to report")
    suites = sorted({str(r["suite_version"]) for r in results})
    if len(suites) > 1:
        raise ReportError(
            f"results of different suite versions ({', '.join(suites)}) cannot share a leaderboard"
        )
    if suites[0] != SUITE_VERSION:
        raise ReportError(
            f"results of serving suite v{suites[0]}: this kvarena reports suite v{SUITE_VERSION} "
            "(rerun the evaluation with it)"
        )
    return results


@dataclass(frozen=True)
class Row:
    scenario: str
    agent: str
    episodes: int
    failed: int
    reward: tuple[float, float]
    """(mean, 95% half-width) over ok episodes."""
    components: dict[str, float]
    metrics: dict[str, float]
    gap: float | None
    """Mean reward of the bound minus this agent's, on the same scenario (None: not run)."""
    usage: list[float]
    """Mean memory usage per turn."""
    normalized: float | None = None
    """(agent - noop) / (bound - noop) on paired seeds (None: no range, or not run)."""
    to_bound: tuple[float, float] | None = None
    """Paired bound - agent, (mean, 95% half-width)."""
    cost: float | None = None
    """Mean input dollars per episode from the recorded model usage (`build_report` with
    prices; None for policies or without prices)."""


def scenario_order(name: str) -> tuple[int, str]:
    order = {tier: i for i, tier in enumerate(dict.fromkeys((*TIERS, *SUITE, "medium-128")))}
    return (order.get(name, len(order)), name)


def leaderboard(results: Sequence[dict[str, Any]]) -> list[Row]:
    rows = []
    for (scenario, agent), group in group_results(results).items():
        ok = [r for r in group if r["status"] == "ok"]
        reward = mean_ci([r["reward"] for r in ok]) if ok else (float("nan"), float("nan"))
        components = {c: _mean(r["components"][c] for r in ok) for c in COMPONENTS}
        metrics = {m: _mean(r["metrics"][m] for r in ok) for m, _ in METRIC_COLUMNS}
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
    reference = {
        r.scenario: r.reward[0] for r in rows if r.agent == REFERENCE and r.failed < r.episodes
    }
    rows = [
        replace(r, gap=reference[r.scenario] - r.reward[0])
        if r.scenario in reference and r.episodes > r.failed
        else r
        for r in rows
    ]
    normalized = normalized_scores(results)
    rows = [
        replace(r, normalized=n.score, to_bound=n.to_bound)
        if (n := normalized.get((r.scenario, r.agent)))
        else r
        for r in rows
    ]
    rows.sort(key=lambda r: (scenario_order(r.scenario), -_key(r.reward[0]), r.agent))
    return rows


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else float("nan")


def _key(value: float) -> float:
    return value if value == value else float("-inf")


def _fmt(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None or value != value:
        return "–"
    return f"{value:{'+' if sign else ''}.{digits}f}"


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
        *(["input $/episode"] if cost else []),
    ]


def _cells(row: Row, cost: bool = False) -> list[tuple[str, float | str]]:
    """(text, sort value) per column."""
    mean, half = row.reward
    reward = "–" if mean != mean else f"{mean:+.3f} ± {half:.3f}"
    cells: list[tuple[str, float | str]] = [
        (row.scenario, f"{scenario_order(row.scenario)[0]:02d}{row.scenario}"),
        (row.agent, row.agent),
        (str(row.episodes), row.episodes),
        (str(row.failed), row.failed),
        (reward, _key(mean)),
        (
            _fmt(row.normalized, 2),
            _key(row.normalized if row.normalized is not None else float("nan")),
        ),
        (
            "–" if row.to_bound is None else f"{row.to_bound[0]:+.3f} ± {row.to_bound[1]:.3f}",
            _key(row.to_bound[0] if row.to_bound is not None else float("nan")),
        ),
    ]
    cells += [(_fmt(row.components[c], sign=True), _key(row.components[c])) for c in COMPONENTS]
    cells += [(_fmt(row.metrics[m], 2), _key(row.metrics[m])) for m, _ in METRIC_COLUMNS]
    if cost:
        value = row.cost if row.cost is not None else float("nan")
        cells.append((_fmt(row.cost, 4), _key(value)))
    return cells


def _has_cost(rows: Sequence[Row]) -> bool:
    return any(row.cost is not None for row in rows)


def render_markdown(rows: Sequence[Row]) -> str:
    cost = _has_cost(rows)
    headers = _headers(cost)
    lines = [
        "# kvcache-arena leaderboard",
        "",
        "One row per agent x scenario. Reward: mean ± Student-t 95% CI over the ok episodes; "
        "components are their unweighted means (weights: "
        + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_WEIGHTS.items())
        + "). `failed` counts rollouts that produced no episode (never dropped). `normalized` "
        "= (agent - noop) / (bound - noop) on the seeds all three ran (shown where bound - noop "
        ">= 0.05); `bound − agent` is the paired difference to the reference bound with its 95% "
        f"CI. Serving suite version {SUITE_VERSION}.",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(text for text, _ in _cells(row, cost)) + " |")
    return "\n".join(lines) + "\n"


# --- figures --------------------------------------------------------------------------------
def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def figures(rows: Sequence[Row]) -> dict[str, str]:
    """Figure title -> inline SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9})
    scenarios = sorted({r.scenario for r in rows}, key=scenario_order)
    agents = sorted({r.agent for r in rows})
    colors = {a: plt.get_cmap("tab20")(i % 20) for i, a in enumerate(agents)}
    by_key = {(r.scenario, r.agent): r for r in rows}
    out: dict[str, str] = {}

    # 1. weighted reward components per agent, stacked (negative ones to the left)
    fig, axes = plt.subplots(
        1, len(scenarios), figsize=(5 * len(scenarios), 0.35 * len(agents) + 1.5), squeeze=False
    )
    comp_colors = plt.get_cmap("Set2")
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        present = [
            a
            for a in agents
            if (scenario, a) in by_key and by_key[scenario, a].episodes > by_key[scenario, a].failed
        ]
        for j, component in enumerate(COMPONENTS):
            values = [
                DEFAULT_WEIGHTS[component] * by_key[scenario, a].components[component]
                for a in present
            ]
            pos_left = [
                sum(
                    max(0.0, DEFAULT_WEIGHTS[c] * by_key[scenario, a].components[c])
                    for c in list(COMPONENTS)[:j]
                )
                for a in present
            ]
            neg_left = [
                sum(
                    min(0.0, DEFAULT_WEIGHTS[c] * by_key[scenario, a].components[c])
                    for c in list(COMPONENTS)[:j]
                )
                for a in present
            ]
            lefts = [p if v >= 0 else n for v, p, n in zip(values, pos_left, neg_left, strict=True)]
            ax.barh(present, values, left=lefts, color=comp_colors(j), label=component)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(scenario)
        ax.set_xlabel("weighted contribution to reward")
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
    out["Reward components per agent (weighted, stacked)"] = _svg(fig)
    plt.close(fig)

    # 2. memory usage over the episode, with the headroom bands
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 3.6), squeeze=False)
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        ax.axhspan(0, 0.8, color="#d9f2d9", zorder=0)
        ax.axhspan(0.8, 0.95, color="#fff3cc", zorder=0)
        ax.axhspan(0.95, 1.0, color="#ffd9b3", zorder=0)
        ax.axhline(1.0, color="#cc0000", linewidth=1)
        for agent in agents:
            row = by_key.get((scenario, agent))
            if row and row.usage:
                ax.plot(
                    range(len(row.usage)),
                    row.usage,
                    label=agent,
                    color=colors[agent],
                    linewidth=1.4,
                )
        ax.set_ylim(0, 1.05)
        ax.set_title(scenario)
        ax.set_xlabel("turn")
        ax.set_ylabel("mean GPU memory usage")
    _agent_legend(fig, agents, colors)
    out["Memory usage over the episode (bands: <0.8 best, 0.8-0.95, 0.95-1, full)"] = _svg(fig)
    plt.close(fig)

    # 3. failures and pressure steps
    fig, axes = plt.subplots(
        1, len(scenarios), figsize=(5 * len(scenarios), 0.35 * len(agents) + 1.5), squeeze=False
    )
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        present = [a for a in agents if (scenario, a) in by_key]
        ys = range(len(present))
        ax.barh(
            [y - 0.2 for y in ys],
            [by_key[scenario, a].metrics["failures"] for a in present],
            height=0.4,
            color="#d62728",
            label="failures / episode",
        )
        ax.barh(
            [y + 0.2 for y in ys],
            [by_key[scenario, a].metrics["pressure_steps"] for a in present],
            height=0.4,
            color="#ff7f0e",
            label="pressure steps / episode",
        )
        ax.set_yticks(list(ys), present)
        ax.set_title(scenario)
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
    out["Failures and pressure steps per episode"] = _svg(fig)
    plt.close(fig)

    # 4. reward by scenario difficulty
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(scenarios)), 3.8))
    for agent in agents:
        xs = [
            s
            for s in scenarios
            if (s, agent) in by_key and by_key[s, agent].episodes > by_key[s, agent].failed
        ]
        if xs:
            means = [by_key[s, agent].reward[0] for s in xs]
            halves = [by_key[s, agent].reward[1] for s in xs]
            ax.errorbar(
                xs,
                means,
                yerr=halves,
                label=agent,
                color=colors[agent],
                marker="o",
                capsize=3,
                linewidth=1.2,
            )
    ax.set_ylabel("reward (mean ± 95% CI)")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
    out["Reward by scenario"] = _svg(fig)
    plt.close(fig)
    return out


def _agent_legend(fig: Any, agents: Sequence[str], colors: dict[str, Any]) -> None:
    """One legend for every agent, whichever subplots they appear in."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[a], linewidth=2) for a in agents]
    fig.legend(handles, list(agents), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)


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
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; cursor: pointer; position: sticky; top: 0; }
th[data-order=asc]::after { content: ' \\25B2'; } th[data-order=desc]::after { content: ' \\25BC'; }
td:nth-child(1), td:nth-child(2), th:nth-child(1), th:nth-child(2) { text-align: left; }
tr.failed td { background: #fff0f0; }
figure { margin: 1.5rem 0; } figure svg { max-width: 100%; height: auto; }
.scroll { overflow-x: auto; }
"""


def render_html(rows: Sequence[Row], figs: dict[str, str], sources: Sequence[str]) -> str:
    cost = _has_cost(rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in _headers(cost))
    body = []
    for row in rows:
        cells = "".join(
            f'<td data-sort="{html.escape(str(value))}">{html.escape(text)}</td>'
            for text, value in _cells(row, cost)
        )
        css = ' class="failed"' if row.failed else ""
        body.append(f"<tr{css}>{cells}</tr>")
    figures_html = "".join(
        f"<figure><figcaption><b>{html.escape(title)}</b></figcaption>{svg}</figure>"
        for title, svg in figs.items()
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<title>kvcache-arena leaderboard</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<h1>kvcache-arena leaderboard</h1>"
        f"<p>From {len(sources)} run(s): {html.escape(', '.join(sources))}. Reward: mean ± "
        "Student-t 95% CI over ok episodes; components unweighted means; click a column "
        "header to sort. Rows shaded red have failed rollouts.</p>"
        f"<div class='scroll'><table class='sortable' id='leaderboard'><thead><tr>{head}"
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        f"{figures_html}<script>{_SCRIPT}</script></body></html>\n"
    )


def to_dataset(results: Sequence[dict[str, Any]]) -> Any:
    """The results as a `datasets.Dataset`: components and metrics as structs (null for a
    failed rollout), the per-turn usage series, the model's token usage and the full episode
    record as JSON text."""
    import datasets

    rows = [
        {
            "agent": r["agent"],
            "scenario": r["scenario"],
            "seed": r["seed"],
            "status": r["status"],
            "error": r["error"],
            "reward": r["reward"],
            "components": r["components"],
            "metrics": r["metrics"],
            "usage_series": (r["series"] or {}).get("usage", []),
            "model_usage": json.dumps(r["usage"]),
            "record": json.dumps(r["record"]),
        }
        for r in results
    ]
    return datasets.Dataset.from_list(rows)


def build_report(
    results: Sequence[dict[str, Any]],
    out: Path,
    sources: Sequence[str],
    prices: Prices | None = None,
) -> list[Row]:
    """`prices`: add each row's mean input dollars per episode (`prompt_cache.dollars`)."""
    rows = leaderboard(results)
    if prices is not None:
        groups = group_results(results)
        rows = [
            replace(r, cost=mean_episode_cost(groups[r.scenario, r.agent], prices)) for r in rows
        ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "leaderboard.md").write_text(render_markdown(rows), encoding="utf-8")
    (out / "index.html").write_text(render_html(rows, figures(rows), sources), encoding="utf-8")
    return rows
