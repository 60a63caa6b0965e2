"""The report's rankings in the terminal: what `kvarena eval` and `context-eval` end with and
what `kvarena report` prints after writing its files. The cells are the report's own
(`tables.ranking_cells`), so the terminal and `leaderboard.md` say the same; the headers are
shorter, and the columns a narrow terminal cannot hold are left out (`common.columns`): the
per-scenario scores first, then the episodes, the mean reward and the rank interval. The rank,
the agent and the score with its 95% CI always stay.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from kv_cache_env.policies import REFERENCE

from ..common.columns import Column, Fitted, fit_table
from ..common.console import out_console
from ..serving.normalize import FLOOR, MIN_RANGE
from . import context_board
from .build import Board
from .display import display_name
from .ranking import Ranking
from .tables import anchor_header, few_header, ranking_cells, ranking_headers

SHORT = {
    "rank 95% interval": "rank CI",
    "normalized score (95% CI)": "score (95% CI)",
    "mean reward": "reward",
}
"""Report header -> the terminal's."""
DROP = {"rank 95% interval": 3, "mean reward": 2, "episodes": 4}
"""Which columns go first at a narrow width (higher: sooner); a scenario's column goes before
any of these, whether an agent beats an anchor after them, the rank, agent and score never."""
SCENARIO_DROP = 5
ANCHOR_DROP = 1


def ranking_table(
    ranking: Ranking,
    title: str,
    *,
    wide: bool = False,
    width: int | None = None,
    ends: tuple[str, str] = (FLOOR, REFERENCE),
    what: str = "scenario",
) -> Fitted:
    """One ranking as a terminal table; `ends`: the agents at 0 and 1 of the score, `what`: what
    the ranking averages over (a serving scenario, a context level)."""
    headers = ranking_headers(ranking)
    scenarios = {display_name(sc) for sc in ranking.normalized}
    scenarios |= {few_header(sc, n) for sc, n in ranking.few.items()}
    anchors = {anchor_header(a) for a in ranking.anchors}

    def drop(header: str) -> int:
        if header in scenarios:
            return SCENARIO_DROP
        return ANCHOR_DROP if header in anchors else DROP.get(header, 0)

    columns = [
        Column(
            SHORT.get(header, header),
            drop=drop(header),
            justify="left" if header == "agent" else "right",
        )
        for header in headers
    ]
    rows = [[text for text, _ in ranking_cells(r, ranking)] for r in ranking.rows]
    caption = _caption(ranking, ends, what)
    return fit_table(columns, rows, title=title, caption=caption, wide=wide, width=width)


def _caption(ranking: Ranking, ends: tuple[str, str], what: str) -> str:
    floor, top = ends
    if not ranking.normalized and ranking.few:
        few = ", ".join(f"{sc} ({n})" for sc, n in ranking.few.items())
        return (
            f"no score: each {what} with a range has fewer than {ranking.min_seeds} paired "
            f"episodes ({few}); ranked by mean reward (kvarena report --min-episodes 1 counts "
            "them)"
        )
    if not ranking.normalized:
        return (
            f"no score: no {what} has {floor} and {top} on the same seeds with a range of at "
            f"least {MIN_RANGE}; ranked by mean reward"
        )
    text = (
        f"score: mean over {len(ranking.normalized)} {what}(s) of (agent - {floor}) / "
        f"({top} - {floor}) on paired seeds, 95% CI by a paired bootstrap over seeds"
    )
    if ranking.few:
        text += f"; fewer than {ranking.min_seeds} paired episodes, shown but not in the mean: "
        text += ", ".join(f"{sc} ({n})" for sc, n in ranking.few.items())
    left_out = [sc for sc in ranking.scenarios if sc not in ranking.normalized]
    left_out = [sc for sc in left_out if sc not in ranking.few]
    if left_out:
        text += f"; not in the mean ({top} - {floor} < {MIN_RANGE}, or not run): "
        text += ", ".join(left_out)
    return text


def rankings(board: Board, *, wide: bool = False, width: int | None = None) -> list[Fitted]:
    """The board's rankings: the serving suite's, then one per context reader."""
    tables = []
    if board.ranking is not None:
        tables.append(ranking_table(board.ranking, "ranking", wide=wide, width=width))
    if board.context is not None:
        for reader, ranking in board.context.rankings:
            ends = (context_board.FLOOR, context_board.TOP)
            title = f"context ranking (reader {reader})"
            tables.append(
                ranking_table(ranking, title, wide=wide, width=width, ends=ends, what="level")
            )
    return tables


def print_rankings(board: Board, *, wide: bool = False) -> None:
    for fitted in rankings(board, wide=wide):
        out_console.print()
        fitted.print()


def report_command_line(runs: Sequence[Path], out: Path) -> str:
    """The `kvarena report` command that builds the report of `runs` into `out` (printed on
    one line, whatever its length: a command to copy)."""
    return " ".join(["kvarena report", *(shlex.quote(str(r)) for r in runs), "-o", str(out)])
