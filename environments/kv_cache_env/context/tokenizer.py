"""The project tokenizer of the context family: a small, deterministic, download-free stand-in
for a BPE tokenizer. It owns what a "token" is, so `Message.n_tokens`, block boundaries
(`BLOCK_SIZE` tokens per block) and cache budgets all count the same thing.

Pieces, in order of the pattern (GPT-2's pre-tokenizer, simplified):

* a word (letters, digits, underscore, any script) with at most one leading whitespace char;
* a single other character (punctuation, symbol) with at most one leading whitespace char;
* a run of whitespace; when a word follows, its last char is left to lead that word.

Long pieces are then cut so counts look like a real subword tokenizer (~4 chars per token
in English prose): a run of letters into chunks of at most `MAX_WORD_CHARS`, a run of digits
into chunks of at most `MAX_DIGIT_CHARS` (as cl100k groups digits in threes), a whitespace run
into chunks of at most `MAX_SPACE_CHARS`. The leading whitespace char stays on the first chunk.

Contract: `"".join(tokenize(text)) == text` for every string; every piece is non-empty; the
empty string has no tokens. Pure functions, no state.
"""

from __future__ import annotations

import re

__all__ = ["MAX_DIGIT_CHARS", "MAX_SPACE_CHARS", "MAX_WORD_CHARS", "count_tokens", "tokenize"]

MAX_WORD_CHARS = 6
"""Longest run of word characters (not digits) in one token; longer words are split."""
MAX_DIGIT_CHARS = 3
"""Longest run of digits in one token ("2024" → "202", "4")."""
MAX_SPACE_CHARS = 8
"""Longest whitespace-only token (indentation and blank lines cost tokens too)."""

_PIECE = re.compile(r"(\s?)(\w+)|\s?[^\w\s]|\s+(?!\S)|\s+")
"""Covers every character: each is either `\\w`, `\\s` or neither (see the module docstring).
Groups 1 and 2 (lead whitespace, word) are set only for word pieces."""
_RUN = re.compile(r"\d+|[^\W\d]+")
"""Within one word: runs of digits and runs of other word characters."""


def _chunks(run: str, limit: int) -> list[str]:
    return [run[i : i + limit] for i in range(0, len(run), limit)]


def tokenize(text: str) -> list[str]:
    """Split `text` into tokens whose concatenation is exactly `text`."""
    tokens: list[str] = []
    for match in _PIECE.finditer(text):
        lead, word = match.group(1), match.group(2)
        if word is None:
            piece = match.group(0)
            if piece.isspace():
                tokens.extend(_chunks(piece, MAX_SPACE_CHARS))  # a whitespace run
            else:
                tokens.append(piece)  # optional lead whitespace + one other character
            continue
        chunks = [
            chunk
            for run in _RUN.findall(word)
            for chunk in _chunks(run, MAX_DIGIT_CHARS if run[0].isdecimal() else MAX_WORD_CHARS)
        ]
        chunks[0] = lead + chunks[0]
        tokens.extend(chunks)
    return tokens


def count_tokens(text: str) -> int:
    """Number of tokens in `text` (`len(tokenize(text))`)."""
    return len(tokenize(text))
