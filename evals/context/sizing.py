"""How a conversation is sized against its budget, and how new its attributes are.

- `live_load`: a statement is live while its value is current and a later question asks it; the
  live load at a message is what its live statements take: distinct blocks (what keeping them
  costs: a block is kept whole) and tokens. Reported relative to the budget, at the episode's
  peak and on average over the messages that ask a question.
- `novelty`: the share of an episode's attributes (a subject with its qualifier, and a
  property: "Maya's piano teacher" + "lesson fee") that never occur in a set of training
  episodes, and the same for kinds (subject kind + property: "piano teacher" + "lesson fee").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kv_cache_env.context.conversation import LEVELS, generate_conversation, span_blocks
from kv_cache_env.context.lexicon import lexicon
from kv_cache_env.context.tokenizer import count_tokens
from kv_cache_env.context.types import BLOCK_SIZE, Conversation


@dataclass(frozen=True)
class LiveLoad:
    peak_blocks: float
    mean_blocks: float
    """Over the question messages."""
    peak_tokens: float
    mean_tokens: float
    """Tokens relative to the budget's tokens (blocks x 16)."""


def live_load(conversation: Conversation) -> LiveLoad:
    budget = LEVELS[conversation.level].max_blocks
    last: dict[tuple[int, int, int], int] = {}
    for q in conversation.questions:
        span = q.facts[0]
        key = (span.message_index, span.start, span.end)
        last[key] = max(last.get(key, 0), q.message_index)
    n = len(conversation.messages)
    blocks: list[set[int]] = [set() for _ in range(n)]
    tokens = [0] * n
    for (index, start, end), until in last.items():
        held = span_blocks(conversation, conversation.statements[0].__class__(index, start, end))
        size = count_tokens(conversation.messages[index].text[start:end])
        for t in range(index, until + 1):
            blocks[t].update(held)
            tokens[t] += size
    asked = [q.message_index for q in conversation.questions] or [0]
    return LiveLoad(
        max(len(b) for b in blocks) / budget,
        sum(len(blocks[t]) for t in asked) / len(asked) / budget,
        max(tokens) / (budget * BLOCK_SIZE),
        sum(tokens[t] for t in asked) / len(asked) / (budget * BLOCK_SIZE),
    )


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


@dataclass(frozen=True)
class Novelty:
    attributes: float
    kinds: float
    episodes: int
    training: int


@dataclass(frozen=True)
class Seen:
    """The attributes and kinds of a set of training episodes."""

    attributes: frozenset[str]
    kinds: frozenset[str]
    episodes: int


def seen_in(conversations: Iterable[Conversation]) -> Seen:
    seen_attributes: set[str] = set()
    seen_kinds: set[str] = set()
    n = 0
    for conversation in conversations:
        seen_attributes |= attributes(conversation)
        seen_kinds |= kinds(conversation)
        n += 1
    return Seen(frozenset(seen_attributes), frozenset(seen_kinds), n)


def novelty_against(seen: Seen, levels: Sequence[str], test: Iterable[int]) -> Novelty:
    """Mean per-episode share of attributes (and kinds) of the `test` seeds, on every level of
    `levels`, absent from `seen`."""
    shares, kind_shares = [], []
    for seed in test:
        for level in levels:
            conversation = generate_conversation(seed, level)
            a, k = attributes(conversation), kinds(conversation)
            shares.append(len(a - seen.attributes) / len(a))
            kind_shares.append(len(k - seen.kinds) / len(k))
    return Novelty(
        sum(shares) / len(shares), sum(kind_shares) / len(kind_shares), len(shares), seen.episodes
    )


def novelty(train: Iterable[int], levels: Sequence[str], test: Iterable[int]) -> Novelty:
    """Mean per-episode share of attributes (and kinds) of the `test` seeds unseen in the
    `train` seeds, on every level of `levels`."""
    seen = seen_in(generate_conversation(seed, level) for seed in train for level in levels)
    return novelty_against(seen, levels, test)
