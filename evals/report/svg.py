"""Small SVG charts for the report: horizontal bars (stacked or grouped), a horizontal dot
plot, and small multiples of line charts. Each returns one `<svg>` element with a viewBox, so
the page scales it to its full width.

Why not matplotlib, which the report used before: importing it and laying out four figures
took 1.5-3 s of CPU with a bytecode cache and over 6 s without one (its import compiles
hundreds of modules), for a report whose target is 2 s. These charts need axes, ticks, bars,
markers, lines, bands and a legend, and nothing else; they are drawn in a few milliseconds.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

WIDTH = 1000
"""viewBox width; the page scales it."""
LABEL_W = 210
"""The narrowest room for category labels on the left; a longer label widens it
(`label_width`), never cut."""
"""Room for category labels on the left."""
LEGEND_W = 190
"""The narrowest legend column; a longer label widens it (`legend_width`), never cut."""
CHAR_W = 7.0
"""Width of one character of a 12 px label, a generous mean (system-ui; digits and capitals are
the widest)."""
ROW_H = 22
FONT = "font-family='system-ui, sans-serif' font-size='12'"


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float | None]
    colour: str
    dash: str = ""
    """SVG stroke-dasharray for lines ("" solid)."""
    marker: str = "o"
    """Dot plots: "o" circle, "s" square, "^" triangle, "D" diamond, "|" bar."""
    width: float = 1.6
    """Lines: the stroke width."""
    group: str = ""
    """Lines: the legend entry it shares with others ("" its own `label`)."""


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return (
        f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}' {FONT} {extra}>"
        f"{html.escape(text)}</text>"
    )


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while not ticks or ticks[-1] < high - 1e-12:
        ticks.append(round(value, 10))
        value += step
    return ticks


class _Scale:
    def __init__(self, low: float, high: float, left: float, right: float) -> None:
        self.ticks = nice_ticks(low, high)
        self.low, self.high = self.ticks[0], self.ticks[-1]
        self.left, self.right = left, right

    def __call__(self, value: float) -> float:
        span = self.high - self.low or 1.0
        return self.left + (value - self.low) / span * (self.right - self.left)


def _x_axis(scale: _Scale, top: float, bottom: float, label: str) -> list[str]:
    parts = []
    for tick in scale.ticks:
        x = scale(tick)
        parts.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{bottom}' stroke='#e6e6e6'/>")
        parts.append(_text(x, bottom + 15, f"{tick:g}", "middle"))
    parts.append(_text((scale.left + scale.right) / 2, bottom + 32, label, "middle"))
    return parts


def label_width(categories: Sequence[str]) -> float:
    """The room on the left that holds every category label whole (at least `LABEL_W`)."""
    return max(LABEL_W, 16 + CHAR_W * max((len(c) for c in categories), default=0))


def legend_width(labels: Sequence[str]) -> float:
    """The legend column that holds every label whole (at least `LEGEND_W`)."""
    return max(LEGEND_W, 12 + 24 + CHAR_W * max((len(label) for label in labels), default=0))


def _legend(items: Sequence[tuple[str, str, str]], top: float) -> list[str]:
    """(label, colour, kind: "box" | "line" | dash pattern) entries at the right, in a column
    as wide as the longest label (`legend_width`)."""
    x = WIDTH - legend_width([label for label, _, _ in items]) + 12
    parts = []
    for i, (label, colour, kind) in enumerate(items):
        y = top + i * 18
        if kind == "box":
            parts.append(f"<rect x='{x}' y='{y - 9}' width='12' height='10' fill='{colour}'/>")
        else:
            dash = f" stroke-dasharray='{kind}'" if kind not in ("line", "") else ""
            parts.append(
                f"<line x1='{x}' x2='{x + 18}' y1='{y - 4}' y2='{y - 4}' stroke='{colour}' "
                f"stroke-width='2.5'{dash}/>"
            )
        parts.append(_text(x + 24, y, label))
    return parts


def _frame(height: float, parts: list[str], title: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {height:.0f}' "
        f"role='img' aria-label='{html.escape(title, quote=True)}'>"
        f"<rect width='{WIDTH}' height='{height:.0f}' fill='white'/>{''.join(parts)}</svg>"
    )


def bar_chart(
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    stacked: bool,
    x_label: str,
    title: str,
) -> str:
    """Horizontal bars, one row per category: stacked (negative values to the left of 0) or
    grouped (one thin bar per series)."""
    top, plot_h = 12, ROW_H * len(categories)
    bottom = top + plot_h
    lows, highs = [0.0], [0.0]
    for i in range(len(categories)):
        vals = [s.values[i] or 0.0 for s in series]
        if stacked:
            lows.append(sum(v for v in vals if v < 0))
            highs.append(sum(v for v in vals if v > 0))
        else:
            lows += vals
            highs += vals
    right = WIDTH - legend_width([s.label for s in series]) - 10
    labels_w = label_width(categories)
    scale = _Scale(min(lows), max(highs), labels_w, right)
    parts = _x_axis(scale, top, bottom, x_label)
    for i, category in enumerate(categories):
        y = top + i * ROW_H
        parts.append(_text(labels_w - 8, y + ROW_H * 0.65, category, "end"))
        positive = negative = 0.0
        for k, s in enumerate(series):
            value = s.values[i]
            if value is None or value != value:
                continue
            if stacked:
                start = positive if value >= 0 else negative + value
                if value >= 0:
                    positive += value
                else:
                    negative += value
                y0, h = y + 3, ROW_H - 6
            else:
                start = min(0.0, value)
                h = (ROW_H - 6) / len(series)
                y0 = y + 3 + k * h
            x0, x1 = scale(start), scale(start + abs(value))
            parts.append(
                f"<rect x='{x0:.1f}' y='{y0:.1f}' width='{max(x1 - x0, 0.5):.1f}' "
                f"height='{h:.1f}' fill='{s.colour}'><title>{html.escape(category)}: "
                f"{html.escape(s.label)} {value:.3f}</title></rect>"
            )
    zero = scale(0.0)
    parts.append(f"<line x1='{zero:.1f}' x2='{zero:.1f}' y1='{top}' y2='{bottom}' stroke='#222'/>")
    parts += _legend([(s.label, s.colour, "box") for s in series], top + 10)
    return _frame(max(bottom + 45, top + 18 * len(series) + 20), parts, title)


def _marker(kind: str, x: float, y: float, colour: str, tip: str) -> str:
    tip = f"<title>{html.escape(tip)}</title>"
    if kind == "s":
        box = f"x='{x - 5:.1f}' y='{y - 5:.1f}' width='10' height='10'"
        return f"<rect {box} fill='{colour}'>{tip}</rect>"
    if kind == "^":
        points = f"{x:.1f},{y - 6:.1f} {x - 6:.1f},{y + 5:.1f} {x + 6:.1f},{y + 5:.1f}"
        return f"<polygon points='{points}' fill='{colour}'>{tip}</polygon>"
    if kind == "D":
        points = f"{x:.1f},{y - 6:.1f} {x + 6:.1f},{y:.1f} {x:.1f},{y + 6:.1f} {x - 6:.1f},{y:.1f}"
        return f"<polygon points='{points}' fill='{colour}'>{tip}</polygon>"
    if kind == "|":
        return (
            f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{y - 9:.1f}' y2='{y + 9:.1f}' "
            f"stroke='{colour}' stroke-width='3'>{tip}</line>"
        )
    return f"<circle cx='{x:.1f}' cy='{y:.1f}' r='5' fill='{colour}'>{tip}</circle>"


def dot_chart(
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    x_label: str,
    title: str,
    references: Sequence[tuple[float, str]] = (),
) -> str:
    """One row per category, one marker per series; `references`: vertical lines (x, colour)."""
    top = 12
    bottom = top + ROW_H * len(categories)
    values = [v for s in series for v in s.values if v is not None and v == v]
    values += [x for x, _ in references]
    right = WIDTH - legend_width([s.label for s in series]) - 10
    labels_w = label_width(categories)
    scale = _Scale(min(values), max(values), labels_w, right)
    parts = _x_axis(scale, top, bottom, x_label)
    for x, colour in references:
        parts.append(
            f"<line x1='{scale(x):.1f}' x2='{scale(x):.1f}' y1='{top}' y2='{bottom}' "
            f"stroke='{colour}' stroke-width='1.2'/>"
        )
    for i, category in enumerate(categories):
        y = top + i * ROW_H + ROW_H / 2
        parts.append(_text(labels_w - 8, y + 4, category, "end"))
        for s in series:
            value = s.values[i]
            if value is not None and value == value:
                parts.append(_marker(s.marker, scale(value), y, s.colour, f"{s.label} {value:.3f}"))
    legend = [(s.label, s.colour, "box" if s.marker != "|" else "line") for s in series]
    parts += _legend(legend, top + 10)
    return _frame(max(bottom + 45, top + 18 * len(series) + 20), parts, title)


def line_panels(
    panels: Sequence[tuple[str, Sequence[Series]]],
    *,
    y_label: str,
    x_label: str,
    title: str,
    y_range: tuple[float, float],
    bands: Sequence[tuple[float, float, str]] = (),
    columns: int = 4,
) -> str:
    """Small multiples: one line chart per panel, `columns` to a row, one shared legend."""
    columns = max(1, min(columns, len(panels)))
    rows = -(-len(panels) // columns)
    left, gap, panel_h = 50, 18, 150
    entries = [s.group or s.label for _, series in panels for s in series]
    width = (WIDTH - legend_width(entries) - left) / columns
    parts: list[str] = []
    legend: dict[str, tuple[str, str, str]] = {}
    grouped: set[str] = set()
    for k, (name, series) in enumerate(panels):
        x0 = left + (k % columns) * width
        y0 = 24 + (k // columns) * (panel_h + 58)
        x1, y1 = x0 + width - gap, y0 + panel_h
        turns = max((len(s.values) for s in series), default=1)
        sx = _Scale(0, max(turns - 1, 1), x0, x1)

        def sy(v: float, y0: float = y0, y1: float = y1) -> float:
            return y1 - (v - y_range[0]) / (y_range[1] - y_range[0]) * (y1 - y0)

        for low, high, colour in bands:
            parts.append(
                f"<rect x='{x0:.1f}' y='{sy(high):.1f}' width='{x1 - x0:.1f}' "
                f"height='{sy(low) - sy(high):.1f}' fill='{colour}'/>"
            )
        parts.append(
            f"<rect x='{x0:.1f}' y='{y0}' width='{x1 - x0:.1f}' height='{panel_h}' "
            "fill='none' stroke='#bbb'/>"
        )
        parts.append(_text((x0 + x1) / 2, y0 - 8, name, "middle", "font-weight='600'"))
        for tick in sx.ticks:
            parts.append(_text(sx(tick), y1 + 14, f"{tick:g}", "middle"))
        parts.append(_text((x0 + x1) / 2, y1 + 30, x_label, "middle"))
        if k % columns == 0:
            for tick in nice_ticks(*y_range):
                if y_range[0] <= tick <= y_range[1]:
                    parts.append(_text(x0 - 6, sy(tick) + 4, f"{tick:g}", "end"))
        for s in series:
            points = " ".join(
                f"{sx(t):.1f},{sy(v):.1f}" for t, v in enumerate(s.values) if v is not None
            )
            dash = f" stroke-dasharray='{s.dash}'" if s.dash else ""
            parts.append(
                f"<polyline points='{points}' fill='none' stroke='{s.colour}' "
                f"stroke-width='{s.width:g}'{dash}><title>{html.escape(s.label)}</title>"
                "</polyline>"
            )
            entry = s.group or s.label
            legend.setdefault(entry, (entry, s.colour, s.dash or "line"))
            if s.group:
                grouped.add(entry)
    parts.append(
        _text(
            12,
            24 + rows * (panel_h + 58) / 2,
            y_label,
            "middle",
            f"transform='rotate(-90 12 {24 + rows * (panel_h + 58) / 2:.0f})'",
        )
    )
    entries = sorted(legend.values(), key=lambda item: item[0] in grouped)  # groups last
    parts += _legend(entries, 30)
    height = max(24 + rows * (panel_h + 58), 30 + 18 * len(legend) + 10)
    return _frame(height, parts, title)


TIMELINE_POINTS = 400
"""Points of an episode's timeline: a longer episode (a full trace replay has thousands of
turns) is drawn as that many buckets (the usage's mean, the events' sum per bucket)."""


def _buckets(turns: int) -> list[tuple[int, int]]:
    """[start, end) turn ranges, at most `TIMELINE_POINTS` of them, covering `turns`."""
    count = min(turns, TIMELINE_POINTS)
    edges = [round(i * turns / count) for i in range(count + 1)]
    return [(a, b) for a, b in pairwise(edges) if b > a]


def timeline(
    usage: Sequence[float],
    pressure: Sequence[bool],
    lanes: Sequence[tuple[str, str, Sequence[int]]],
    *,
    title: str,
    bands: Sequence[tuple[float, float, str]] = (),
) -> str:
    """One episode over its turns: memory usage as a line over `bands`, the turns under
    `pressure` shaded, and below it one lane per event kind (label, colour, count per turn), a
    dot per turn with events (its area grows with the count; its tooltip says it)."""
    turns = len(usage)
    buckets = _buckets(max(turns, 1))
    left, right, top, plot_h, lane_h = 150, WIDTH - 20, 14, 170, 22
    scale = _Scale(0, max(turns - 1, 1), left, right)

    def y(v: float) -> float:
        return top + plot_h - min(max(v, 0.0), 1.05) / 1.05 * plot_h

    lane_top = top + plot_h + 10
    bottom = lane_top + len(lanes) * lane_h
    parts = [
        f"<rect x='{left}' y='{y(high):.1f}' width='{right - left}' "
        f"height='{y(low) - y(high):.1f}' fill='{colour}'/>"
        for low, high, colour in bands
    ]
    parts += _x_axis(scale, top, bottom, "turn")
    under = [any(pressure[a:b]) for a, b in buckets]
    k = 0
    while k < len(buckets):  # one rectangle per run of pressured buckets
        if not under[k]:
            k += 1
            continue
        end = k
        while end + 1 < len(buckets) and under[end + 1]:
            end += 1
        x0 = max(scale(buckets[k][0] - 0.5), left)  # a turn's slot: half a turn each side
        x1 = min(scale(buckets[end][1] - 0.5), right)
        parts.append(
            f"<rect x='{x0:.1f}' y='{top}' width='{x1 - x0:.1f}' height='{plot_h}' "
            f"fill='#D55E00' fill-opacity='0.18'><title>under pressure: turns "
            f"{buckets[k][0]}-{buckets[end][1] - 1}</title></rect>"
        )
        k = end + 1
    for tick in (0.0, 0.5, 0.8, 1.0):
        parts.append(_text(left - 6, y(tick) + 4, f"{tick:g}", "end"))
    middle = top + plot_h / 2
    parts.append(
        _text(
            left - 40,
            middle,
            "GPU memory usage",
            "middle",
            f"transform='rotate(-90 {left - 40} {middle:.0f})'",
        )
    )
    means = [(a, sum(usage[a:b]) / (b - a)) for a, b in buckets if b <= turns]
    points = " ".join(f"{scale(a):.1f},{y(v):.1f}" for a, v in means)
    parts.append(
        f"<rect x='{left}' y='{top}' width='{right - left}' height='{plot_h}' fill='none' "
        "stroke='#bbb'/>"
        f"<polyline points='{points}' fill='none' stroke='#0072B2' stroke-width='2'/>"
    )
    for i, (label, colour, counts) in enumerate(lanes):
        cy = lane_top + i * lane_h + lane_h / 2
        parts.append(_text(left - 12, cy + 4, label, "end"))
        parts.append(
            f"<line x1='{left}' x2='{right}' y1='{cy:.1f}' y2='{cy:.1f}' stroke='#e4e4e4'/>"
        )
        for a, b in buckets:
            n = sum(counts[a:b])
            if n <= 0:
                continue
            r = min(2.5 + 1.5 * math.sqrt(n), 9.0)
            when = f"turn {a}" if b - a == 1 else f"turns {a}-{b - 1}"
            parts.append(
                f"<circle cx='{scale(a):.1f}' cy='{cy:.1f}' r='{r:.1f}' fill='{colour}'>"
                f"<title>{when}: {n} {html.escape(label)}</title></circle>"
            )
    return _frame(bottom + 45, parts, title)
