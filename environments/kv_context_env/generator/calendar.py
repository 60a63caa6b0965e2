"""The conversation's calendar: which day, and which part of it (morning, afternoon, evening),
each turn falls in. Days are not a fixed number of turns: each day's length is drawn evenly
from `LevelSpec.day_turns`, and its turns are split into the three parts at two cut points
drawn evenly (every part at least one turn), so a turn can stand for minutes or for hours and
a named day and part maps to no fixed turns. What the conversation says tells where it is: a
day's first user message names the weekday, a part's first one says the part has come
("Later that afternoon.", `conversation`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PARTS = 3
"""Parts of a day (0 morning, 1 afternoon, 2 evening)."""


@dataclass(frozen=True, slots=True)
class Calendar:
    """Day and part of every turn (turns from 0)."""

    days: tuple[int, ...]
    """The day each turn falls in (days from 0)."""
    parts: tuple[int, ...]
    """The part of its day each turn falls in (0-2)."""

    def day(self, turn: int) -> int:
        """The day `turn` falls in; a turn past the end extends the last day."""
        return self.days[min(turn, len(self.days) - 1)]

    def part(self, turn: int) -> int:
        return self.parts[min(turn, len(self.parts) - 1)]

    def opens_day(self, turn: int) -> bool:
        """Whether `turn` is its day's first."""
        return turn == 0 or self.days[turn] != self.days[turn - 1]

    def opens_part(self, turn: int) -> bool:
        """Whether `turn` is the first of a part of a day other than its morning."""
        return (
            0 < turn < len(self.parts)
            and not self.opens_day(turn)
            and (self.parts[turn] != self.parts[turn - 1])
        )


def day_parts(rng: np.random.Generator, length: int) -> list[int]:
    """The part of each of a day's `length` turns (at least `PARTS`): two cut points drawn
    evenly among the gaps between turns."""
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, length), PARTS - 1, replace=False))
    return [sum(t >= c for c in cuts) for t in range(length)]


def draw_calendar(rng: np.random.Generator, n_turns: int, day_turns: tuple[int, int]) -> Calendar:
    """Days of lengths drawn evenly from `day_turns` (at least, at most) until `n_turns`
    turns are covered (the last day is cut short)."""
    if day_turns[0] < PARTS or day_turns[1] < day_turns[0]:
        raise ValueError(f"day_turns must be an ordered range from at least {PARTS}")
    days: list[int] = []
    parts: list[int] = []
    day = 0
    while len(days) < n_turns:
        length = int(rng.integers(day_turns[0], day_turns[1] + 1))
        days += [day] * length
        parts += day_parts(rng, length)
        day += 1
    return Calendar(tuple(days[:n_turns]), tuple(parts[:n_turns]))
