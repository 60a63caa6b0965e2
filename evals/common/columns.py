"""Tables that fit the terminal by leaving columns out, never by cutting a cell.

A table the CLI prints is declared as `Column`s and rows of strings. Names and numbers never
wrap and are never cut; prose columns (`wrap=True`) wrap between words. Where the table does not
fit the width, `fit_table` leaves out the column of lowest priority (the highest `drop` number;
the last such column first) until it fits, and says which it left out; with `wide` every column
stays and the table is as wide as its widest row (`--wide`). Columns with `drop=0` always stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from .console import out_console

CUT_WIDTH = 12
"""The narrowest a `cut` column gets."""


@dataclass(frozen=True)
class Column:
    header: str
    drop: int = 0
    """0: always shown; otherwise the higher, the sooner it is left out at a narrow width."""
    justify: Literal["left", "right"] = "right"
    wrap: bool = False
    """Prose that may wrap between words (names and numbers never wrap)."""
    cut: bool = False
    """Prose that may be cut short with an ellipsis to keep one line per row (a summary whose
    whole text is one command away); never a name or a number."""
    bold: bool = False


@dataclass(frozen=True)
class Fitted:
    table: Table
    left_out: list[str]
    """Headers of the columns left out to fit the width."""
    width: int
    """The width the table was laid out for."""

    def print(self, console: Console | None = None, note: bool = True) -> None:
        """Print the table (at `width`) and, where columns were left out, a line naming them."""
        target = console or out_console
        printer = target if self.width <= target.width else _wide_console(target, self.width)
        printer.print(self.table)
        if note and self.left_out:
            target.print(
                f"(left out at {self.width} columns: {', '.join(self.left_out)}; --wide or "
                "a wider terminal shows them)",
                highlight=False,
                soft_wrap=False,
            )


def _wide_console(like: Console, width: int) -> Console:
    return Console(width=width, file=like.file, no_color=like.no_color, highlight=False)


def build_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    caption: str | None = None,
) -> Table:
    """The rich table of `columns` and `rows` as they are (no fitting)."""
    table = Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        highlight=False,
        pad_edge=False,
    )
    for column in columns:
        table.add_column(
            column.header,
            justify=column.justify,
            no_wrap=not column.wrap,
            overflow="fold" if column.wrap else "ellipsis",
            min_width=CUT_WIDTH if column.cut else None,
            style="bold" if column.bold else None,
        )
    for row in rows:
        table.add_row(*row)
    return table


def table_width(table: Table, console: Console | None = None) -> Measurement:
    """(narrowest, widest) the table can be laid out at without cutting a cell: rich's own
    minimum lets a column that must not wrap shrink to its longest word."""
    printer = console or out_console
    widest = Measurement.get(printer, printer.options.update_width(10_000), table).maximum
    natural = narrowest = 0
    for column in table.columns:
        texts = [str(column.header), *(str(cell) for cell in column.cells)]
        natural += max(cell_len(text) for text in texts)
        if column.min_width == CUT_WIDTH:  # a `cut` column
            narrowest += max(CUT_WIDTH, cell_len(str(column.header)))
        elif column.no_wrap:
            narrowest += max(cell_len(text) for text in texts)
        else:
            narrowest += max(cell_len(word) for text in texts for word in text.split() or [""])
    return Measurement(widest - natural + narrowest, widest)


def fit_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    caption: str | None = None,
    wide: bool = False,
    width: int | None = None,
) -> Fitted:
    """The table at `width` (the terminal's by default) with the fewest columns left out; with
    `wide`, every column at whatever width that takes."""
    width = width or out_console.width
    keep = list(range(len(columns)))

    def build(kept: list[int]) -> Table:
        return build_table(
            [columns[i] for i in kept],
            [[row[i] for i in kept] for row in rows],
            title=title,
            caption=caption,
        )

    table = build(keep)
    if wide:
        return Fitted(table, [], max(width, table_width(table).maximum))
    while table_width(table).minimum > width:
        droppable = [i for i in keep if columns[i].drop > 0]
        if not droppable:
            break
        worst = max(droppable, key=lambda i: (columns[i].drop, i))
        keep.remove(worst)
        table = build(keep)
    left_out = [columns[i].header for i in range(len(columns)) if i not in keep]
    cut = [i for i in keep if columns[i].cut]
    widest = table_width(table).maximum
    if cut and widest > width:
        # the `cut` columns take what the others leave, cut after a whole word (rich would
        # narrow every column alike, names included, and cut mid-word)
        natural = sum(
            max(cell_len(str(r[i])) for r in [[c.header for c in columns], *rows]) for i in cut
        )
        room = max(CUT_WIDTH, (width - (widest - natural)) // len(cut))
        rows = [[_shorten(v, room) if i in cut else v for i, v in enumerate(r)] for r in rows]
        table = build(keep)
    return Fitted(table, left_out, width)


def _shorten(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut after a whole word and marked " …"."""
    if cell_len(text) <= width:
        return text
    words, kept = text.split(), ""
    for word in words:
        if cell_len(f"{kept} {word} …".strip()) > width:
            break
        kept = f"{kept} {word}".strip()
    return f"{kept} …" if kept else text[: max(1, width - 1)] + "…"
