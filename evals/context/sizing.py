"""How a conversation is sized against its budget, and how new its attributes are.

- `live_load` (from `kv_context_env.generator.load`): the tokens and blocks of live statements
  against the budget, at the episode's peak and over the question times; `fresh_load`: the
  blocks of everything said in the last turns a soon ask may reach back, at each soon ask.
- `novelty`: the share of an episode's signal sentences whose normalized form (subject mention,
  time, names and joined sentences masked) never occurs in a set of training episodes; the
  share of an episode's attributes (a subject with its qualifier, and a
  property: "Maya's piano teacher" + "lesson fee") that never occur in a set of training
  episodes, and the same for kinds (subject kind + property: "piano teacher" + "lesson fee").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.generator.lexicon import lexicon
from kv_context_env.generator.load import FreshLoad, LiveLoad, fresh_load, live_load
from kv_context_env.vocabulary import Conversation

__all__ = [
    "FreshLoad",
    "LiveLoad",
    "Novelty",
    "Seen",
    "fresh_load",
    "live_load",
    "novelty",
    "novelty_against",
    "seen_in",
]


def attributes(conversation: Conversation) -> set[str]:
    """The episode's attributes: "<subject with qualifier>|<property>" keys."""
    return {s.key for s in conversation.facts}


def kinds(conversation: Conversation) -> set[str]:
    """The episode's attribute kinds: "<subject head>|<property>"."""
    heads = sorted((k.head for k in lexicon().subjects), key=len, reverse=True)
    out = set()
    for key in attributes(conversation):
        subject, prop = key.split("|")
        head = next(h for h in heads if subject.endswith(h))
        out.add(f"{head}|{prop}")
    return out


def signal_forms(conversation: Conversation) -> list[str]:
    """The normalized forms of the episode's signals of need (subject mention, time, names
    and joined sentences masked), one per signal."""
    return [s.form for s in conversation.signals]


@dataclass(frozen=True)
class Novelty:
    attributes: float
    kinds: float
    episodes: int
    training: int
    signal_forms: float = 0.0
    """Share of the episode's signal sentences whose normalized form is unseen."""


@dataclass(frozen=True)
class Seen:
    """The attributes and kinds of a set of training episodes."""

    attributes: frozenset[str]
    kinds: frozenset[str]
    episodes: int
    signal_forms: frozenset[str] = frozenset()


def seen_in(conversations: Iterable[Conversation]) -> Seen:
    seen_attributes: set[str] = set()
    seen_kinds: set[str] = set()
    seen_forms: set[str] = set()
    n = 0
    for conversation in conversations:
        seen_attributes |= attributes(conversation)
        seen_kinds |= kinds(conversation)
        seen_forms.update(signal_forms(conversation))
        n += 1
    return Seen(frozenset(seen_attributes), frozenset(seen_kinds), n, frozenset(seen_forms))


def novelty_against(seen: Seen, levels: Sequence[str], test: Iterable[int]) -> Novelty:
    """Mean per-episode share of attributes (and kinds) of the `test` seeds, on every level of
    `levels`, absent from `seen`."""
    shares, kind_shares, form_shares = [], [], []
    for seed in test:
        for level in levels:
            conversation = generate_conversation(seed, level)
            a, k = attributes(conversation), kinds(conversation)
            shares.append(len(a - seen.attributes) / len(a))
            kind_shares.append(len(k - seen.kinds) / len(k))
            forms = signal_forms(conversation)
            unseen = sum(f not in seen.signal_forms for f in forms)
            form_shares.append(unseen / max(1, len(forms)))
    return Novelty(
        sum(shares) / len(shares),
        sum(kind_shares) / len(kind_shares),
        len(shares),
        seen.episodes,
        sum(form_shares) / len(form_shares),
    )


def novelty(train: Iterable[int], levels: Sequence[str], test: Iterable[int]) -> Novelty:
    """Mean per-episode share of attributes (and kinds) of the `test` seeds unseen in the
    `train` seeds, on every level of `levels`."""
    seen = seen_in(generate_conversation(seed, level) for seed in train for level in levels)
    return novelty_against(seen, levels, test)
