"""The project tokenizer of the context family: a small, deterministic, download-free stand-in
for a BPE tokenizer. It owns what a "token" is, so `Message.n_tokens`, block boundaries
(`BLOCK_SIZE` tokens per block) and cache budgets all count the same thing.

Pieces (GPT-2's pre-tokenizer, simplified), before length limits:

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

_TOKEN = re.compile(
    rf"\s?[^\W\d]{{1,{MAX_WORD_CHARS}}}"  # (lead space +) up to 6 letters of a word
    rf"|\s?\d{{1,{MAX_DIGIT_CHARS}}}"  # (lead space +) up to 3 digits
    r"|\s?[^\w\s]"  # (lead space +) one other character
    rf"|\s{{1,{MAX_SPACE_CHARS}}}(?!\S)"  # whitespace, leaving one char to lead a word
    rf"|\s{{1,{MAX_SPACE_CHARS}}}"
)
"""One token per match. Every character is `\\w` (a letter-like or a digit), `\\s` or neither,
so the alternatives cover any text. A chunk after the first of a long word follows a word
character, so its optional lead `\\s?` is empty: only the first chunk carries the space."""


def tokenize(text: str) -> list[str]:
    """Split `text` into tokens whose concatenation is exactly `text`."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """Number of tokens in `text` (`len(tokenize(text))`)."""
    return len(_TOKEN.findall(text))
