"""Where a conversation's text falls in the block cache: the blocks the whole conversation fills,
the blocks one span's characters sit in, and how many distinct blocks a set of statements takes
(absolute coordinates, no recall: messages back to back from token 0)."""

from __future__ import annotations

from collections.abc import Sequence

from kv_context_env.tokenizer import tokenize
from kv_context_env.vocabulary import BLOCK_SIZE, Conversation, FactSpan


def total_blocks(conversation: Conversation, block_size: int = BLOCK_SIZE) -> int:
    """Blocks the whole conversation fills (absolute coordinates: messages back to back)."""
    tokens = sum(m.n_tokens for m in conversation.messages)
    return -(-tokens // block_size)


def span_blocks(conversation: Conversation, span: FactSpan, block_size: int = BLOCK_SIZE) -> range:
    """Blocks (absolute coordinates, no recall) holding the characters of `span`."""
    start = sum(m.n_tokens for m in conversation.messages[: span.message_index])
    text = conversation.messages[span.message_index].text
    first = len(tokenize(text[: span.start]))
    last = max(first, len(tokenize(text[: span.end])) - 1)
    return range((start + first) // block_size, (start + last) // block_size + 1)


def statement_blocks(
    conversation: Conversation,
    spans: Sequence[FactSpan] | None = None,
    block_size: int = BLOCK_SIZE,
) -> int:
    """Distinct blocks that hold `spans` (default: every statement)."""
    blocks: set[int] = set()
    for span in conversation.statements if spans is None else spans:
        blocks.update(span_blocks(conversation, span, block_size))
    return len(blocks)
