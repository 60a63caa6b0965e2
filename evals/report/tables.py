"""The report's tables as every family's section writes them: a cell is (text, sort value);
`markdown_table` and `html_table` render rows of cells (names cleaned by `display`), and the
ranking table's columns (`ranking_headers`, `ranking_cells`) are the same for both families: a
rank, its interval, the agent, the normalized score, whether it beats each anchor (the serving
suite's `vllm-default` and `regime-rule`), one column per scenario (a context level), the mean
reward and the episodes. A scenario with too few paired episodes to count in the mean
(`Ranking.few`) follows the counted ones, its header flagged (`few_header`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .display import display_name, html_text, markdown_cell, unsafe_html
from .ranking import Ranked, Ranking

Cell = tuple[str, float | str]
"""(text shown, value the page sorts by)."""


def fmt(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None or value != value:
        return "–"
    return f"{value:{'+' if sign else ''}.{digits}f}"


def sort_key(value: float) -> float:
    """NaN sorts below every number."""
    return value if value == value else float("-inf")


def ranking_headers(ranking: Ranking) -> list[str]:
    return [
        "rank",
        "rank 95% interval",
        "agent",
        "normalized score (95% CI)",
        *(anchor_header(a) for a in ranking.anchors),
        *(display_name(sc) for sc in ranking.normalized),
        *(few_header(sc, n) for sc, n in ranking.few.items()),
        "mean reward",
        "episodes",
    ]


def few_header(scenario: str, seeds: int) -> str:
    """The ranking column of a scenario shown but not in the mean: too few paired episodes."""
    return f"{display_name(scenario)} ({seeds} ep.: not in the mean)"


def anchor_header(anchor: str) -> str:
    """The ranking column saying whether each agent beats `anchor`."""
    return f"beats {display_name(anchor)}"


def beats(versus: tuple[float, float, float] | None) -> Cell:
    """Whether a score beats an anchor's: yes (the paired interval above 0), no (below), tie,
    with the difference and its interval; – without one."""
    if versus is None:
        return ("–", float("-inf"))
    diff, low, high = versus
    verdict = "yes" if low > 0 else "no" if high < 0 else "tie"
    return (f"{verdict} {diff:+.3f} ({low:+.3f} to {high:+.3f})", diff)


def ranking_cells(row: Ranked, ranking: Ranking) -> list[Cell]:
    """(text, sort value) per column of the ranking table."""
    score = "–" if row.score is None else f"{row.score:.3f}"
    if row.ci is not None:
        score += f" ({row.ci[0]:.3f} to {row.ci[1]:.3f})"
    interval = (
        "–" if row.rank_interval is None else f"{row.rank_interval[0]}–{row.rank_interval[1]}"
    )
    name = display_name(row.agent) + (" (anchor)" if row.agent in ranking.anchors else "")
    cells: list[Cell] = [
        ("–" if row.rank is None else str(row.rank), row.rank if row.rank is not None else 1e9),
        (interval, row.rank_interval[0] if row.rank_interval else 1e9),
        (name, display_name(row.agent)),
        (score, sort_key(row.score if row.score is not None else float("nan"))),
    ]
    cells += [beats(row.versus.get(anchor)) for anchor in ranking.anchors]
    for scenario in (*ranking.normalized, *ranking.few):
        value = row.per_scenario.get(scenario)
        cells.append((fmt(value, 2), sort_key(value if value is not None else float("nan"))))
    cells.append((fmt(row.reward, sign=True), sort_key(row.reward)))
    cells.append((str(row.episodes), row.episodes))
    return cells


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Cell]], left: int | Sequence[str]
) -> list[str]:
    """The lines of a Markdown table; `left`: how many first columns, or which named ones, are
    left-aligned (the rest are numbers)."""
    aligned = [
        (i < left) if isinstance(left, int) else (header in left)
        for i, header in enumerate(headers)
    ]
    lines = [
        "| " + " | ".join(markdown_cell(h) for h in headers) + " |",
        "|" + "|".join("---" if a else "---:" for a in aligned) + "|",
    ]
    for cells in rows:
        lines.append("| " + " | ".join(markdown_cell(text) for text, _ in cells) + " |")
    return lines


def _two_lines(text: str) -> str:
    """An escaped cell's "value (interval)" as the value over the interval in small type (a
    ranking's columns then fit the page)."""
    main, paren, rest = text.partition(" (")
    main = main.replace(":", ":<wbr>")  # trace:name may break after its colon
    return f"{main}<br><small>({rest}</small>" if paren else main


def html_table(
    table_id: str,
    headers: Sequence[str],
    rows: Sequence[tuple[str, list]],
    *,
    compact: bool = False,
) -> str:
    """A sortable table in a box that scrolls sideways when the table is wider than the page:
    rows are (css class, [(text, sort value), ...]). `compact` (the rankings): headers wrap and
    a "value (interval)" cell shows its interval on a second line, in small type."""
    split = _two_lines if compact else str
    head = "".join(f"<th>{split(html_text(h))}</th>" for h in headers)
    body = []
    for css, cells in rows:
        plain = [(str(text), str(value)) for text, value in cells]
        if unsafe_html(" ".join(t + " " + v for t, v in plain)):  # a name to escape: rare
            plain = [(html_text(t), html_text(v)) for t, v in plain]
        tds = "".join(f'<td data-sort="{value}">{split(text)}</td>' for text, value in plain)
        body.append(f"<tr{f' class={css!r}' if css else ''}>{tds}</tr>")
    kind = "sortable compact" if compact else "sortable"
    return (
        f"<div class='scroll'><table class='{kind}' id='{table_id}'><thead><tr>{head}"
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )
