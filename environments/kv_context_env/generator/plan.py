"""Planning a conversation before any text is written: the subjects the user deals with, their
facts (a property and its values), which facts are asked about and when, which value changes,
and the signals of need the conversation carries. Pure: everything comes from the `rng` the
caller passes, so a seed gives one plan. `conversation.generate_conversation` plans, then
writes the text.

Time is counted in turns (one user message each); days of varying length in three parts
(morning, afternoon, evening; `calendar.Calendar`), and a signal names the day and part a fact
will be needed ("tomorrow morning", "on Thursday afternoon", "next Monday"). Which
facts are asked follows the signals with noise (`levels` documents each probability): most
asks are announced, some are not, some announced facts are never asked, and a named day can be
off by one. Questions never share a turn; a statement never sits on a question turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from .calendar import PARTS, Calendar, draw_calendar
from .levels import LevelSpec
from .lexicon import Lexicon, Prop, SubjectKind
from .valuegen import ValueDraw

FactRole = Literal["later", "soon", "aside"]
SignalKind = Literal["plan", "need", "todo", "calendar", "again", "mention", "close", "aside"]
"""`aside`: an aside talked about near its statement, naming no time to come."""
MAX_ASKS = 3
FIRST_SIGNAL_KINDS: tuple[SignalKind, ...] = ("plan", "need", "need", "todo", "calendar")
"""The kinds a first-ask signal is drawn from (an aside's mention is hosted by the same draw)."""


@dataclass(frozen=True, slots=True)
class Subject:
    kind: SubjectKind
    full: str
    """With its qualifier: "Maya's piano teacher", "the Lisbon hotel"."""
    short: str
    """"the piano teacher": unambiguous, as heads are distinct within a conversation."""


@dataclass(frozen=True, slots=True)
class Signal:
    turn: int
    """The turn that carries it; for `again`, the question turn whose message carries it."""
    kind: SignalKind
    day: int = -1
    """The day it names (plans, reminders, to-dos, calendar lines, `again`); -1 for none."""
    part: int = -1
    """The part of that day it names: 0 morning, 1 afternoon, 2 evening; -1 for none."""


@dataclass(slots=True)
class Fact:
    id: int
    subject: Subject
    prop: Prop
    role: FactRole
    values: list[str] = field(default_factory=list)
    """The first value, then each update."""
    said: list[int] = field(default_factory=list)
    """The turn each value is said in (ascending)."""
    asks: list[int] = field(default_factory=list)
    """The question turns (ascending)."""
    signals: list[Signal] = field(default_factory=list)

    @property
    def key(self) -> str:
        """ "<subject>|<property>": what the statement list and the answer key call it."""
        return f"{self.subject.full}|{self.prop.nouns[0]}"

    def value_at(self, turn: int) -> int:
        """Index of the value current at `turn` (the latest said before it)."""
        return max(i for i, t in enumerate(self.said) if t < turn)


@dataclass(slots=True)
class World:
    subjects: list[Subject]
    facts: list[Fact]
    questions: dict[int, int]
    """Question turn → fact id."""
    calendar: Calendar


class Planner:
    def __init__(self, rng: np.random.Generator, spec: LevelSpec, lex: Lexicon) -> None:
        self.rng = rng
        self.spec = spec
        self.lex = lex
        self.values = ValueDraw(rng, lex)
        self.calendar = draw_calendar(rng, spec.n_turns, spec.day_turns)
        self.busy: set[int] = set()
        """Question turns."""
        self.first_asks: list[tuple[Fact, int]] = []
        """(fact, its first ask) of each first ask to announce, once the statements sit where
        they will be said."""
        self.reserved: set[int] = set()
        """Turns of `soon` facts' statements (never a question turn)."""

    def pick(self, items: tuple[str, ...] | list[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def day(self, turn: int) -> int:
        return self.calendar.day(turn)

    def part(self, turn: int) -> int:
        """0, 1 or 2: the part of its day `turn` falls in."""
        return self.calendar.part(turn)

    def free(self, lo: int, hi: int) -> list[int]:
        """Turns in [lo, hi] that can still take a question."""
        last = self.spec.n_turns - 1
        return [
            t
            for t in range(max(1, lo), min(last, hi) + 1)
            if t not in self.busy and t not in self.reserved
        ]

    # ------------------------------------------------------------------------------ plan

    def plan(self) -> World:
        subjects = self.subjects()
        facts = self.facts(subjects)
        for fact in facts:
            if fact.role == "later":
                self.later(fact)
        for fact in sorted(facts, key=lambda f: f.said[0]):
            if fact.role == "soon":
                self.soon(fact)
        for fact in facts:  # a statement never sits on a question turn
            for i, turn in enumerate(fact.said):
                # nor on its previous value's turn: a message says an update after the value
                # it replaces only by chance, and the answer key follows the plan's order
                floor = fact.said[i - 1] + 1 if i else 0
                while turn in self.busy and turn > floor:
                    turn -= 1
                while turn in self.busy and turn < self.spec.n_turns - 1:
                    turn += 1
                fact.said[i] = turn
        for fact, ask in self.first_asks:  # placed from where the statement now sits
            turn = min(self.cue_turn(fact.said[0]), ask - 1)
            self.announce(fact, turn, ask, FIRST_SIGNAL_KINDS)
        for fact in facts:
            if fact.role == "aside":
                self.aside(fact)
            self.close(fact, facts)
            self.idle_update(fact)
            if self.rng.random() < self.spec.p_mention:
                first = fact.said[0]
                fact.signals.append(
                    Signal(int(self.rng.integers(first, self.spec.n_turns)), "mention")
                )
        for fact in facts:
            self.off_question_turns(fact)
        for fact in facts:
            assert all(a > fact.said[0] for a in fact.asks), "an ask before its statement"
        questions = {t: f.id for f in facts for t in f.asks}
        return World(subjects, facts, questions, self.calendar)

    def subjects(self) -> list[Subject]:
        threads = self.lex.threads
        chosen = {
            threads[int(i)] for i in self.rng.permutation(len(threads))[: self.spec.n_threads]
        }
        pool = [k for k in self.lex.subjects if k.thread in chosen]
        names = self.lex.raw["names"]
        out = []
        for i in self.rng.permutation(len(pool))[: self.spec.n_subjects]:
            kind = pool[int(i)]
            if kind.qualifier == "person":  # a friend or relative, often with a surname
                owner = self.pick(names["first"])
                if self.rng.random() < 0.7:
                    owner = f"{owner} {self.pick(names['surnames'])}"
                full = f"{owner}'s {kind.head}"
            elif kind.qualifier == "town":
                full = f"the {self.pick(names['towns'])} {kind.head}"
            elif kind.qualifier == "street":
                street = f"{self.pick(names['streets'])} {self.pick(names['street_types'])}"
                full = f"the {street} {kind.head}"
            else:
                full = f"the {kind.head}"
            out.append(Subject(kind, full, f"the {kind.head}"))
        return out

    def facts(self, subjects: list[Subject]) -> list[Fact]:
        """Each subject's facts, their roles dealt from a shuffled deck: `p_later` and
        `p_soon` of the facts (rounded) are `later` and `soon`, the rest `aside`, so every
        episode gets its share of facts asked days later (drawn one by one, the count of
        `later` facts swings by a binomial's spread and a thin episode never fills the
        cache)."""
        spec, rng = self.spec, self.rng
        slots: list[tuple[Subject, Prop]] = []
        for subject in subjects:
            props = subject.kind.props
            n = int(rng.integers(min(2, len(props)), min(3, len(props)) + 1))
            slots += [(subject, props[int(j)]) for j in rng.permutation(len(props))[:n]]
        n_later = round(spec.p_later * len(slots))
        n_soon = round(spec.p_soon * len(slots))
        deck: list[FactRole] = ["later"] * n_later + ["soon"] * n_soon
        deck += ["aside"] * (len(slots) - len(deck))
        facts: list[Fact] = []
        for (subject, prop), i in zip(slots, rng.permutation(len(slots)), strict=True):
            role = deck[int(i)]
            fact = Fact(len(facts), subject, prop, role)
            fact.values.append(self.values.draw(fact.prop))
            share = spec.later_said if role == "later" else spec.said
            fact.said.append(int(rng.integers(1, max(2, int(spec.n_turns * share)))))
            facts.append(fact)
        return facts

    def announce(self, fact: Fact, turn: int, ask: int, kinds: tuple[SignalKind, ...]) -> None:
        """A signal at `turn` naming the day and part of `ask` (a neighbouring part of a day
        with `p_day_noise`, never before `turn`)."""
        slot = self.day(ask) * PARTS + self.part(ask)
        if self.rng.random() < self.spec.p_day_noise:
            slot += 1 if self.rng.random() < 0.5 else -1
        slot = max(slot, self.day(turn) * PARTS + self.part(turn))
        kind = kinds[int(self.rng.integers(len(kinds)))]
        fact.signals.append(Signal(turn, kind, slot // PARTS, slot % PARTS))

    def later(self, fact: Fact) -> None:
        spec, rng = self.spec, self.rng
        start = int(spec.asks_from * spec.n_turns)
        previous = fact.said[0]
        for j in range(MAX_ASKS):
            if j and rng.random() >= spec.p_reask:
                break
            lo = (
                max(previous + spec.lead_turns[0], start)
                if j == 0
                else previous + spec.reask_turns[0]
            )
            hi = lo + (spec.lead_turns[1] if j == 0 else spec.reask_turns[1])
            turns = self.free(lo, hi)
            if not turns:
                break
            ask = turns[int(rng.integers(len(turns)))]
            self.busy.add(ask)
            fact.asks.append(ask)
            if rng.random() < spec.p_signal:
                if j == 0:  # before the statement or after it (`cue_turns`), before the ask
                    self.first_asks.append((fact, ask))
                else:  # the previous question says it will come up again
                    self.announce(fact, previous, ask, ("again",))
            previous = ask
        if not fact.asks:
            fact.role = "aside"
        elif rng.random() < spec.p_update and fact.asks[-1] - fact.said[0] > 3:
            fact.values.append(self.values.draw(fact.prop))
            fact.said.append(int(rng.integers(fact.said[0] + 1, fact.asks[-1])))

    def off_question_turns(self, fact: Fact) -> None:
        """Move each of `fact`'s signals (but `again`, which a question carries) off question
        turns to the nearest free turn, the earlier one on a tie; a signal of need stays
        before the ask it announces, a closure after the subject's last ask. (Moving them
        back only, as the conversation's build once did, pushed a signal days early where
        questions follow one another.)"""
        last = self.spec.n_turns - 1
        for i, signal in enumerate(fact.signals):
            if signal.kind == "again" or signal.turn not in self.busy:
                continue
            limit = last + 1
            if signal.kind in FIRST_SIGNAL_KINDS:
                limit = min((a for a in fact.asks if a > signal.turn), default=limit)
            first = signal.turn + 1 if signal.kind == "close" else 1  # after the last ask
            free = [t for t in range(first, max(first, limit)) if t not in self.busy]
            if free:
                near = min(free, key=lambda t: (abs(t - signal.turn), t))
                fact.signals[i] = replace(signal, turn=near)

    def cue_turn(self, said: int) -> int:
        """The turn of a first signal about a fact said at `said`: `said` plus an offset drawn
        evenly from `LevelSpec.cue_turns` (before or after the statement alike)."""
        lo, hi = self.spec.cue_turns
        offset = int(self.rng.integers(lo, hi + 1))
        return min(max(1, said + offset), self.spec.n_turns - 1)

    def soon(self, fact: Fact) -> None:
        """Said at a turn that is not a question's, asked `LevelSpec.soon_turns` later."""
        spec, rng = self.spec, self.rng
        last = max(2, int(spec.n_turns * spec.said))
        delay = int(rng.integers(spec.soon_turns[0], spec.soon_turns[1] + 1))
        slots = [
            t for t in range(1, last) if t not in self.busy and self.free(t + delay, t + delay)
        ]
        if not slots:
            fact.role = "aside"
            return
        fact.said[0] = slots[int(rng.integers(len(slots)))]
        ask = fact.said[0] + delay
        self.busy.add(ask)
        self.reserved.add(fact.said[0])
        fact.asks.append(ask)
        if rng.random() < spec.p_signal:
            self.first_asks.append((fact, ask))

    def aside(self, fact: Fact) -> None:
        """A signal anyway, now and then (`p_false_signal`), or else mostly a mention with no
        time (`p_aside_mention`), placed like a real first signal."""
        spec, rng = self.spec, self.rng
        if rng.random() < spec.p_false_signal:
            turn = self.cue_turn(fact.said[0])
            day = self.day(turn) + int(rng.integers(0, 8))
            kind = self.pick(["plan", "need", "todo", "calendar"])
            fact.signals.append(Signal(turn, kind, day, int(rng.integers(PARTS))))  # type: ignore[arg-type]
        elif rng.random() < spec.p_aside_mention:
            fact.signals.append(Signal(self.cue_turn(fact.said[0]), "aside"))

    def close(self, fact: Fact, facts: list[Fact]) -> None:
        """With `p_close`, a closure of the fact's subject once nothing more of the subject is
        asked (any role: a subject whose asks are over is closed like an aside)."""
        spec, rng = self.spec, self.rng
        if rng.random() >= spec.p_close:
            return
        last = max((t for f in facts if f.subject is fact.subject for t in f.asks), default=0)
        lo = max(fact.said[-1] + 1, last + 1)
        if lo < spec.n_turns:
            fact.signals.append(Signal(int(rng.integers(lo, spec.n_turns)), "close"))

    def idle_update(self, fact: Fact) -> None:
        """With `p_idle_update`, a new value that no question will ask: after an aside's
        statement, or after a fact's last ask."""
        spec, rng = self.spec, self.rng
        if rng.random() >= spec.p_idle_update:
            return
        after = max([*fact.said, *fact.asks])
        turns = [t for t in range(after + 1, spec.n_turns) if t not in self.busy]
        if turns:
            fact.values.append(self.values.draw(fact.prop))
            fact.said.append(turns[int(rng.integers(len(turns)))])


def plan_world(rng: np.random.Generator, spec: LevelSpec, lex: Lexicon) -> World:
    """The plan of one conversation (see the module docstring)."""
    return Planner(rng, spec, lex).plan()
