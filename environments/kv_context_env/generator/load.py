"""The live load of a conversation against its cache budget. A statement is live while its
value is current and a later question asks it; the live load at a message is what its live
statements take: distinct blocks (what keeping them costs: a block is kept whole) and tokens.
Reported relative to the budget, at the episode's peak and on average over the messages that
ask a question. The generator redraws a plan whose peak falls under its level's floor
(`LevelSpec.min_peak_load`), so the floor holds on every episode.

The fresh load is what keeping everything just said would take: at each `soon` ask, the blocks
of every statement said in the last `LevelSpec.soon_turns` (at most) turns, relative to the
budget. Where it is well over the budget, "keep the newest facts" cannot hold the facts a soon
ask wants; only knowing which fresh facts are needed can."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from kv_context_env.tokenizer import count_tokens
from kv_context_env.vocabulary import BLOCK_SIZE, Conversation, FactSpan

from .blocks import span_blocks
from .levels import LEVELS


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
        held = span_blocks(conversation, FactSpan(index, start, end))
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


@dataclass(frozen=True)
class FreshLoad:
    median: float
    """Median over the `soon` asks of the fresh statements' blocks relative to the budget."""
    over: float
    """Share of the `soon` asks at which they take more blocks than the budget holds."""
    asks: int


def fresh_load(conversation: Conversation) -> FreshLoad:
    """The fresh load at the conversation's `soon` asks (module docstring)."""
    spec = LEVELS[conversation.level]
    turns, turn = [], 0
    for message in conversation.messages:
        turn += message.role == "user"
        turns.append(turn)
    said = [(turns[s.span.message_index], s.span) for s in conversation.facts]
    loads = []
    for q in conversation.questions:
        if q.level != "soon":
            continue
        now = turns[q.message_index]
        blocks: set[int] = set()
        for at, span in said:
            if now - spec.soon_turns[1] <= at <= now and span.message_index < q.message_index:
                blocks.update(span_blocks(conversation, span))
        loads.append(len(blocks) / spec.max_blocks)
    if not loads:
        return FreshLoad(0.0, 0.0, 0)
    return FreshLoad(median(loads), sum(x > 1 for x in loads) / len(loads), len(loads))
