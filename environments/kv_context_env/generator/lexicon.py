"""The vocabulary of the conversation-context family, loaded from `data/lexicon.json` (package
data, written by hand for this project, Apache-2.0 like the rest of it; no corpus, no model).

It owns the open pools a conversation is drawn from:
- subject kinds (`SubjectKind`): the things a user deals with ("plumber", "rental car",
  "parents' evening"), each in a thread of life ("home", "travel", ...), with how it is
  qualified (a person's: "Maya's piano teacher", a town's: "the Lisbon hotel", a street's: "the
  Elm Road flat") and its properties (`Prop`): a value class plus the nouns people use for it
  ("quote" / "call-out fee");
- value classes (`ValueClass`): phone numbers, amounts, dates and times, addresses, names,
  codes, references, ... each with how a value is stated, updated ("went up to"), asked about
  in paraphrase ("How much is the plumber costing us?") and the cue words a reader maps a
  question to it with;
- the parts signals of need are composed from (cue frames by class, openers, discourse
  markers, hedges, tails, codas, to-do boxes and verbs, calendar line shapes, closure words),
  day openings and number words, speech habits, topic filler, tool outputs and names.

An attribute is a subject (a kind with its qualifier) and a property: a few hundred kinds and
properties times thousands of qualifiers, so no list of names covers a new episode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal

Qualifier = Literal["person", "town", "street", "none"]


@dataclass(frozen=True, slots=True)
class Prop:
    """One property of a subject kind: its value class and the nouns that name it."""

    value_class: str
    nouns: tuple[str, ...]
    """At least one; statements, questions and signals pick among them, so a question often
    names the property with another noun than the statement did."""
    choice: str | None = None
    """For the `choice` class: which choice pool the values come from ("flavour", ...)."""


@dataclass(frozen=True, slots=True)
class SubjectKind:
    thread: str
    head: str
    """The noun phrase every mention of the subject contains ("piano teacher")."""
    qualifier: Qualifier
    props: tuple[Prop, ...]


@dataclass(frozen=True, slots=True)
class ValueClass:
    name: str
    say: tuple[str, ...]
    """Statement forms without the property noun ({S} subject, {v} value)."""
    update: tuple[str, ...]
    """Forms that state a new value as news, never as a correction ("{S} went up to {v}.")."""
    ask: tuple[str, ...]
    """Question forms, paraphrasing the property ({S}; {a2}: a property noun)."""
    cues: frozenset[str]
    """Words (lower case) a question about this class may use: the reader's lexicon."""


@dataclass(frozen=True, slots=True)
class Lexicon:
    subjects: tuple[SubjectKind, ...]
    classes: MappingProxyType[str, ValueClass]
    raw: MappingProxyType[str, Any]
    """Everything else, as loaded (names, generic forms, signals, speech, filler, tools)."""

    def text(self, *path: str) -> tuple[str, ...]:
        """A list of strings at `path` in the JSON, as a tuple."""
        node: Any = self.raw
        for key in path:
            node = node[key]
        return tuple(node)

    @property
    def threads(self) -> tuple[str, ...]:
        return tuple(sorted({s.thread for s in self.subjects}))


@cache
def lexicon() -> Lexicon:
    """The lexicon (loaded once per process)."""
    data = json.loads(
        resources.files("kv_context_env.generator").joinpath("data/lexicon.json").read_text("utf-8")
    )
    subjects = tuple(
        SubjectKind(
            thread=s["thread"],
            head=s["head"],
            qualifier=s["qualifier"],
            props=tuple(Prop(p["class"], tuple(p["nouns"]), p.get("choice")) for p in s["props"]),
        )
        for s in data["subjects"]
    )
    classes = {
        name: ValueClass(
            name,
            tuple(c["say"]),
            tuple(c["update"]),
            tuple(c["ask"]),
            frozenset(w.lower() for w in c["cues"]),
        )
        for name, c in data["classes"].items()
    }
    _check(subjects, classes, data)
    return Lexicon(subjects, MappingProxyType(classes), MappingProxyType(data))


def _check(
    subjects: tuple[SubjectKind, ...], classes: dict[str, ValueClass], data: dict[str, Any]
) -> None:
    heads = [s.head.lower() for s in subjects]
    if len(set(heads)) != len(heads):
        raise ValueError("lexicon: subject heads must be distinct")
    for s in subjects:
        seen: set[str] = set()
        for p in s.props:
            if p.value_class not in classes:
                raise ValueError(f"lexicon: {s.head}: unknown value class {p.value_class!r}")
            if p.value_class in seen:
                raise ValueError(f"lexicon: {s.head}: two properties of class {p.value_class}")
            seen.add(p.value_class)
            if p.value_class == "choice" and p.choice not in data["choices"]:
                raise ValueError(f"lexicon: {s.head}: unknown choice pool {p.choice!r}")
        if {"when", "hour"} <= seen or {"when", "date"} <= seen or {"when", "day"} <= seen:
            raise ValueError(f"lexicon: {s.head}: a 'when' property excludes date/day/hour")
