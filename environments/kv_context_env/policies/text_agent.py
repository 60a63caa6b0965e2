"""A keyless stand-in for an LLM on the conversation-context family, deciding from the
observation text alone (what a model sees), so the whole LLM path — tool calls over HTTP, the
reader call, the verifiers harness — can be tested without a model.

Agent (`context_text_calls`): when a question arrives it first `recall`s with the question's
text; then it evicts whole messages oldest first (never the system prompt, the new message, or
a user message with a digit in it) until the blocks it estimates it frees bring the cache under
the budget. A question is a new user message ending in "?" (the observation shows no kinds).
Its estimates ignore blocks shared with a neighbour, so the engine's fallback (OOM) still fires
now and then, as it would for a careless model.

Reader (`context_text_answer`): the extractive reader over the context text of the request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kv_context_env.readers.extractive import extractive_answer

_HEADER = re.compile(r"Active blocks (\d+)/(\d+) \(newest block (-?\d+)")
_ROW = re.compile(r"^#(\d+) (\w+) b(\d+)-(\d+) (resident|partial)( <- new)?: (.*)$")
_DIGIT = re.compile(r"\d")
RECALL_MARGIN_BLOCKS = 8
"""Room kept for a recalled turn (about 128 tokens) when a question arrives."""


@dataclass(frozen=True, slots=True)
class Row:
    index: int
    role: str
    first: int
    last: int
    state: str
    new: bool
    text: str


def parse_rows(text: str) -> tuple[int, int, list[Row]]:
    """(active blocks, budget, listed messages) of a `render_context` observation."""
    header = _HEADER.search(text)
    if header is None:
        raise ValueError("not a context observation")
    rows = []
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            index, role, first, last, state, new, body = match.groups()
            rows.append(Row(int(index), role, int(first), int(last), state, bool(new), body))
    return int(header.group(1)), int(header.group(2)), rows


def context_text_calls(text: str) -> list[tuple[str, dict[str, object]]]:
    active, budget, rows = parse_rows(text)
    calls: list[tuple[str, dict[str, object]]] = []
    new = next((row for row in rows if row.new), None)
    target = budget
    if new is not None and new.role == "user" and new.text.rstrip().endswith("?"):
        calls.append(("recall", {"query": new.text}))
        target = budget - RECALL_MARGIN_BLOCKS
    freed = 0
    scheduled: set[int] = set()
    for row in rows:
        if active - freed <= target:
            break
        if row.new or row.role == "system" or (row.role == "user" and _DIGIT.search(row.text)):
            continue
        blocks = set(range(row.first, row.last + 1))
        if blocks <= scheduled:
            continue  # its blocks go with a neighbour already asked for: nothing left to evict
        calls.append(("evict_message", {"index": row.index}))
        scheduled |= blocks
        freed += row.last - row.first + 1
    return calls


def context_text_answer(context: str, question: str) -> str:
    return extractive_answer(context, question)
