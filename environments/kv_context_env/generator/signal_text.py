"""How a signal of need is worded: composed from open parts, never picked from a list of
sentences. It owns only text; `plan` decides which signals there are and `conversation` where
they sit.

A signal is made of three things (the docs' context page states the same rules):
- a **cue class**: need (a plan, a reminder, a to-do, a calendar line; or no cue word at all,
  an implied plan: "Seeing to the Lisbon hotel on Friday."), again (said with a question: it
  will be asked again), recur (a mention with no time) or close (it will not be needed);
- a **time** (`time_phrase`): "in a bit", "tonight", "tomorrow after lunch", "on Thursday",
  "in 3 days", "the day after tomorrow", "next Monday morning", "on day 12", "in a
  fortnight", ...; days are counted from the first day of the chat (day 1);
- a **subject mention** that names the fact's subject the way people do (`mention`): in full
  ("Maya Demir's piano teacher"), short ("the piano teacher"), by its owner and the head's last
  word ("Maya's teacher"), with or without the property ("the lesson fee for ...").
Around the frame: an optional lead ("Oh, heads up:", "As Ana said,"), hedge ("probably"), tail
(", fingers crossed") and coda (", honestly"); in chat it may be joined to another sentence.
To-do and calendar lines are composed the same way (a box, a verb, the mention, the time, a
suffix). It is said in the user's
chat, an e-mail, the assistant's reply, a notes file (a to-do line) or a calendar listing.

Each signal also gets a normalized form: the words around its slots, with the subject mention,
the time, names and joined sentences masked (`{X}`, `{W}`, `{n}`, `{F}`). `validate` counts how
many of a new episode's forms never occur in training episodes (phrasing novelty).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .calendar import Calendar
from .lexicon import Lexicon
from .plan import Fact, Signal
from .wording import capital, possessive

PART_NAMES = ("morning", "afternoon", "evening")


@dataclass(frozen=True, slots=True)
class Worded:
    text: str
    form: str
    """The normalized form (slots masked)."""


class SignalText:
    def __init__(
        self, rng: np.random.Generator, lex: Lexicon, calendar: Calendar, first_weekday: int
    ):
        self.rng = rng
        self.lex = lex
        self.calendar = calendar
        self.first_weekday = first_weekday
        self.grammar = lex.raw["signals"]

    def pick(self, items: tuple[str, ...] | list[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    # --- times -------------------------------------------------------------------------

    def number(self, n: int) -> str:
        words = self.lex.text("days", "numbers")
        return words[n] if n < len(words) and self.chance(0.6) else str(n)

    def time_phrase(self, turn: int, day: int, part: int = -1) -> str:
        """How (`day`, `part` of it) is named at `turn` (days from 0; parts 0-2 or -1)."""
        weekdays = self.lex.text("days", "weekdays")
        today = self.calendar.day(turn)
        now = self.calendar.part(turn)
        ahead = day - today
        if ahead <= 0 and part <= now:
            return self.pick(
                [
                    "in a bit",
                    "shortly",
                    "later today",
                    "later on",
                    "in an hour or so",
                    "before long",
                    "a bit later today",
                ]
            )
        if ahead <= 0:
            return self.pick(
                [
                    ["this morning"],
                    ["this afternoon", "after lunch", "later this afternoon"],
                    ["this evening", "tonight", "later this evening"],
                ][part]
            )
        name = weekdays[(self.first_weekday + day) % 7]
        if ahead >= 14:
            return self.pick(
                [
                    "in a couple of weeks",
                    "in two weeks or so",
                    "in a fortnight",
                    "in about two weeks",
                    f"in {self.number(ahead)} days",
                ]
            )
        options: list[tuple[str, str]] = []  # (day phrase, how a part joins it)
        if ahead == 1:
            options.append(("tomorrow", "tomorrow"))
        if ahead == 2:
            options.append(("the day after tomorrow", "plain"))
        if 2 <= ahead <= 6:
            options += [
                (f"on {name}", "weekday"),
                (f"this {name}", "weekday"),
                (f"come {name}", "weekday"),
                (name, "weekday"),
            ]
        if ahead >= 2:
            n = self.number(ahead)
            options += [
                (f"in {n} days", "plain"),
                (f"{n} days from now", "plain"),
                (f"on day {day + 1}", "plain"),
            ]
        if ahead >= 7:
            options += [
                (f"next {name}", "weekday"),
                (f"a week on {name}", "weekday"),
                (f"{name} week", "plain"),
            ]
        phrase, joins = options[int(self.rng.integers(len(options)))]
        return phrase if part < 0 else self._with_part(phrase, joins, part)

    def _with_part(self, phrase: str, joins: str, part: int) -> str:
        """`phrase` (a day) narrowed to `part` of it, as `joins` says the two combine."""
        if joins == "tomorrow":
            return self.pick(
                [
                    ["tomorrow morning", "first thing tomorrow", "tomorrow before lunch"],
                    ["tomorrow afternoon", "tomorrow after lunch"],
                    ["tomorrow evening", "tomorrow night", "tomorrow after work"],
                ][part]
            )
        if joins == "weekday":
            return self.pick(
                [
                    [f"{phrase} morning", f"first thing {phrase}", f"{phrase} before lunch"],
                    [f"{phrase} afternoon", f"{phrase} after lunch"],
                    [f"{phrase} evening", f"{phrase} night", f"{phrase} after work"],
                ][part]
            )
        return f"{phrase} in the {PART_NAMES[part]}"

    # --- subjects ----------------------------------------------------------------------

    def subject(self, fact: Fact) -> str:
        """The subject as people name it: in full, short, or by owner and the head's last
        word ("Maya's teacher" for "Maya Demir's piano teacher")."""
        full, short, head = fact.subject.full, fact.subject.short, fact.subject.kind.head
        qualifier = full[: len(full) - len(head)].strip()
        last = head.split()[-1]
        u = self.rng.random()
        if u < 0.4 or not qualifier.strip() or qualifier == "the":
            return full if u < 0.4 or self.chance(0.5) else short
        if u < 0.65:
            return short
        if qualifier.endswith("'s"):  # a person's: "Maya's teacher"
            owner = qualifier.split()[0].removesuffix("'s")
            return f"{owner}'s {last}"
        return f"{qualifier} {last}"  # a town's or street's: "the Lisbon car"

    def mention(self, fact: Fact, with_property: float = 0.9) -> str:
        s = self.subject(fact)
        if not self.chance(with_property):
            return s
        noun = self.pick(fact.prop.nouns)
        u = self.rng.random()
        if u < 0.5:
            return f"{possessive(s)} {noun}"
        if u < 0.8:
            return f"the {noun} for {s}"
        return f"{s} ({noun})" if self.chance(0.5) else f"the {noun} of {s}"

    # --- sentences ---------------------------------------------------------------------

    def name(self) -> str:
        return self.pick(self.lex.raw["names"]["first"])

    def dress(self, frame: str, x: str, w: str, filler: str | None = None) -> Worded:
        """`frame` filled, with an optional lead (an opener and a discourse marker), hedge and
        tail (a clause and a coda), and in chat sometimes joined to another sentence."""
        g = self.grammar
        form = frame.replace("{h}", self.pick(g["hedges"]))
        lead = [self.pick(g[k]) for k, p in (("openers", 0.5), ("markers", 0.6)) if self.chance(p)]
        if lead:
            form = " ".join([*lead, form])
        if self.chance(0.6):
            form += self.pick(g["tails"])
        if self.chance(0.4):
            form += self.pick(g["codas"])
        question = form.lower().startswith(("can you", "could you"))
        if not form.endswith(("?", "!", ")")):
            form += "?" if question else "."
        form = capital(form)
        if filler is not None and self.chance(0.3):
            form = "{F}" + self.pick(g["joins"]) + form[:1].lower() + form[1:]
        text = form.format(X=x, W=w, F=(filler or "").rstrip(".!"), n=self.name())
        return Worded(capital(text), form)

    def need(self, fact: Fact, signal: Signal, turn: int, host: str, filler: str | None) -> Worded:
        """A plan, reminder, to-do or calendar line naming the day of need; `host` is where it
        is said ("chat", "email", "assistant", "notes", "calendar")."""
        g = self.grammar
        w = self.time_phrase(turn, signal.day, signal.part)
        if host in ("notes", "calendar"):
            return self.dated_line(fact, host, w)
        if host == "assistant":
            frames = g["assistant"]
        elif host == "chat" and self.chance(0.15):
            frames = g["implied"]
        else:
            frames = g["need"]
        return self.dress(self.pick(frames), self.mention(fact), w, filler)

    def again(self, signal: Signal, turn: int) -> Worded:
        w = self.time_phrase(turn, signal.day, signal.part)
        return self.dress(self.pick(self.grammar["again"]), "", w)

    def aside(self, fact: Fact, host: str, filler: str | None) -> Worded:
        """An aside talked about in `host` with no time to come: a recurring mention in chat,
        an e-mail or the assistant's reply; a to-do or calendar line dated in the past."""
        g = self.grammar
        if host in ("notes", "calendar"):
            w = self.pick(self.lex.text("days", "past"))
            return self.dated_line(fact, host, w)
        return self.dress(self.pick(g["recur"]), self.mention(fact, 0.5), "", filler)

    def dated_line(self, fact: Fact, host: str, when: str) -> Worded:
        """A to-do ("notes") or calendar ("calendar") line naming `fact` and the time `when`."""
        g = self.grammar
        line = self.pick(g["todo_lines"] if host == "notes" else g["calendar_lines"])
        form = line.replace("{b}", self.pick(g["todo_boxes"]))
        form = form.replace("{v}", self.pick(g["todo_verbs"])) + self.pick(g["note_suffixes"])
        text = form.format(X=self.mention(fact), W=when, n=self.name())
        boxed = text.startswith(tuple(g["todo_boxes"]))
        return Worded(text if boxed else "- " + text, form)

    def plain(self, fact: Fact, kind: str, filler: str | None) -> Worded:
        """A recurring mention (`recur`) or a closure (`close`): the subject, no time."""
        return self.dress(self.pick(self.grammar[kind]), self.subject(fact), "", filler)
