"""The session-before reference, kept as an attack: a signal reader built from the closed list
of signal templates an earlier generator used (33 sentences: plans, reminders, to-dos, calendar
lines, "again", recurring mentions, closures; and four day openings), matched by regular
expressions. `validate` plays it on the current generator and reports how far it falls below
the reference (which reads the documented rules with general means): if the wording is really
open, a list of phrases no longer finds the signals.

It keeps the reference's ranking (`SignalReader`) and replaces only the reading: day openings,
signals and "again" by the old regexes, subjects by the lexicon's head nouns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kv_context_env.generator.lexicon import lexicon
from kv_context_env.readers.extractive import split_sentences
from kv_context_env.sim.episode import ContextEpisode

from .baselines import ContextPolicy
from .extraction import _head_regex, parse_message
from .signal_reader import DEFAULT_DAY_TURNS, PARTS, WEEKDAYS, SignalReader

_WEEKDAY = "|".join(WEEKDAYS)

DAY_OPENING = re.compile(
    rf"(?:Morning! It's|Good morning, it's|New day:|Right,) ({_WEEKDAY})", re.IGNORECASE
)
NEED = re.compile(
    r"\b(?:remind me|i'll need|i'll want|don't let me forget|have to sort out|keep .{1,60} in "
    r"mind|going to matter|will come up|on my plate|bring the|i'm dealing with|lined up)\b"
    r"|\[ \]|\bTODO\b|\breminder:|\bfollow-up:",
    re.IGNORECASE,
)
AGAIN = re.compile(r"\b(?:again|keep that handy)\b", re.IGNORECASE)
CLOSED = re.compile(
    r"\b(?:all sorted|cancelled|crossed .{1,40} off|no need to worry|done and dusted|scrap)\b",
    re.IGNORECASE,
)


def named_time(text: str, today: int, weekday: int) -> tuple[int, int] | None:
    """(day, part of the day or -1) a phrase in `text` names, days counted like `today`; day
    `today` with part -1 means "any moment now"; None when no time is named."""
    low = text.lower()
    if re.search(r"\b(?:in a bit|shortly|later today)\b", low):
        return today, -1
    part = next((i for i, name in enumerate(PARTS) if name in low), -1)
    if "tonight" in low:
        return today, 2
    if re.search(r"\bthis (?:morning|afternoon|evening)\b", low):
        return today, part
    if "tomorrow" in low:
        return today + 1, part
    match = re.search(rf"(?:next|a week on) ({_WEEKDAY})", low)
    if match:
        return today + 7 + (WEEKDAYS.index(match.group(1)) - weekday) % 7, part
    match = re.search(rf"(?:on|this|come) ({_WEEKDAY})", low)
    if match:
        return today + ((WEEKDAYS.index(match.group(1)) - weekday) % 7 or 7), part
    if re.search(r"couple of weeks|two weeks", low):
        return today + 14, -1
    return None


@dataclass
class TemplateSignalReader(SignalReader):
    """`SignalReader`'s ranking on the closed templates' reading."""

    def named_time(self, text: str, today: int) -> tuple[int, int] | None:
        return named_time(text, today, self.weekday)

    def read(self, episode: ContextEpisode) -> None:
        for message in self.unread(episode):
            if message.role == "user":
                self.turn += 1
                opening = DAY_OPENING.search(message.text)
                if opening is not None:
                    self.open_day(WEEKDAYS.index(opening.group(1).lower()))
            for found in parse_message(message.index, message.text):
                self.facts[found.key] = found
                self.said_turn[found.key] = self.turn
            for sentence in split_sentences(message.text):
                self.template_signal(sentence)

    def template_signal(self, sentence: str) -> None:
        match = _head_regex().search(sentence)
        if match is None:
            return
        head = match.group(1).lower()
        if CLOSED.search(sentence):
            self.closed.add(head)
            return
        if not NEED.search(sentence):
            return
        named = self.window(sentence)
        unnamed = self.turn + 2 * DEFAULT_DAY_TURNS
        when = (unnamed, unnamed) if named is None else named
        low = sentence.lower()
        kind = next(k for k in lexicon().subjects if k.head.lower() == head)
        named_classes = [
            p.value_class for p in kind.props if any(n.lower() in low for n in p.nouns)
        ]
        for cls in named_classes or ["*"]:
            self.need[(head, cls)] = when
        self.closed.discard(head)

    def again_window(self, text: str, question: str) -> tuple[int, int] | None:
        return self.window(text) if AGAIN.search(text) else None


def template_signal_reader() -> ContextPolicy:
    return TemplateSignalReader()
