"""How the conversation-context family says things (issue 16): the many wordings of one fact
statement, and filler that carries the same entity types as facts (names, numbers, codes,
dates, places) without stating any fact. It owns only text; `conversation` decides what is
said where.

A statement names its owner (the user or someone else), the template's attribute and the value,
in one of several wordings, none of them announcing itself ("Actually, I have to correct
myself" is gone: an update reads like any other statement). Every wording keeps the attribute's
words and the owner, so a reader that matches a question's words can still find it; what it
loses is a fixed shape a regular expression could spot (`My <attr> is <value>.`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ATTRIBUTE_FILLER",
    "ENTITY_FILLER",
    "attribute_sentence",
    "entity_sentence",
    "statement",
]

# Wordings by where the statement is said. {p}: possessive ("my" / "Maria's"), {P}: the same
# capitalised, {a}: attribute, {v}: value.
CHAT_WORDINGS: tuple[str, ...] = (
    "{P} {a} is {v}.",
    "Oh, {p} {a} is {v}, in case that comes up.",
    "{v} is {p} {a}, by the way.",
    "I wrote down {p} {a} as {v}.",
    "For what it's worth, {p} {a} ended up being {v}.",
    "Turns out {p} {a} is {v}.",
    "{P} {a}, if anyone asks, is {v}.",
    "Somebody checked and {p} {a} is {v}.",
    "So {p} {a} is {v} these days.",
    "Not that it matters here, but {p} {a} is {v}.",
)
NOTE_WORDINGS: tuple[str, ...] = (
    "- {a} ({o}): {v}",
    "- {P} {a} is {v}",
    "- {v} = {p} {a}",
    "- remember {p} {a}: {v}",
)
REASONING_WORDINGS: tuple[str, ...] = (
    "Earlier it came up that {p} {a} is {v}, which does not matter for this step.",
    "I note {p} {a} is {v}; not needed right now.",
    "Side detail: {p} {a} is {v}.",
)
WORDINGS = {"chat": CHAT_WORDINGS, "notes": NOTE_WORDINGS, "reasoning": REASONING_WORDINGS}


def statement(rng: np.random.Generator, where: str, owner: str, attr: str, value: str) -> str:
    """One wording of "`owner`'s `attr` is `value`" ("" = the user) for `where` (chat, notes,
    reasoning). Reasoning is the assistant speaking, so the user's facts there say "your"."""
    forms = WORDINGS[where]
    form = forms[int(rng.integers(len(forms)))]
    if owner:
        p, o = f"{owner}'s", owner
    elif where == "reasoning":
        p, o = "your", "you"
    else:
        p, o = "my", "mine"
    return form.format(p=p, P=p[0].upper() + p[1:], a=attr, v=value, o=o)


ENTITY_FILLER: tuple[str, ...] = (
    "{n} sent the draft over at {t}.",
    "I still owe {n} for the tickets from {d}.",
    "{n} and I talked it through on {d}.",
    "Ticket {x} is still open, apparently.",
    "We had lunch at {r} with {n} on {d}.",
    "{n} is back from {c} on {d}.",
    "The delivery reference was {x}, not that it helps.",
    "{n} asked whether {m} is joining the call.",
    "The invoice came to {x} before tax.",
    "{n} moved to {c} last spring.",
    "I ran into {m} near {r} yesterday.",
    "The shared drive folder is called {k}.",
    "{n} keeps calling the new dashboard {k}.",
    "Order {x} shipped on {d}.",
)
"""Filler with the entity types facts have: {n} a first name, {m} a full name, {d} a date,
{t} a time, {x} a number or code, {r} a restaurant, {c} a town, {k} a codename. The values
come from the same pools as facts' values, so a value alone says nothing."""

ATTRIBUTE_FILLER: tuple[str, ...] = (
    "I keep meaning to sort out {p} {a} at some point.",
    "{P} {a} came up in a chat with {n} today.",
    "No idea why {n} was asking about {p} {a}.",
)
"""Filler that names a fact's attribute without a value (so attribute words alone mark no
fact)."""


def entity_sentence(rng: np.random.Generator, pools: dict[str, tuple[str, ...]]) -> str:
    """One `ENTITY_FILLER` sentence, its slots drawn from `pools` (keys n, m, d, t, x, r, c,
    k)."""
    form = ENTITY_FILLER[int(rng.integers(len(ENTITY_FILLER)))]
    slots = {key: values[int(rng.integers(len(values)))] for key, values in pools.items()}
    return form.format(**slots)


def attribute_sentence(rng: np.random.Generator, owner: str, attr: str, name: str) -> str:
    """One `ATTRIBUTE_FILLER` sentence about `owner`'s `attr` ("" = the user)."""
    form = ATTRIBUTE_FILLER[int(rng.integers(len(ATTRIBUTE_FILLER)))]
    p = f"{owner}'s" if owner else "my"
    return form.format(p=p, P=p[0].upper() + p[1:], a=attr, n=name)
