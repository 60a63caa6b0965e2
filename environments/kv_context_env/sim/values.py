"""The value check of the conversation-context family (issue 16): did the reader's answer name
the right value? It owns the answer verdicts, their scores, and the first-person
normalisation that lets ROUGE-L compare "My locker code is 4471." with the key "your locker
code is 4471".

Verdicts, from the question's key values and its candidate values (every other value the
fact's template could take, distractors' and stale values included):
- `correct`: every key value is named (whole words, case-insensitive, a leading article of the
  value optional) and no other candidate value is;
- `wrong`: some other candidate value is named (a stale value, a distractor's, a guess);
- `abstain`: neither: "I don't know", an echo of the question, anything without a value, and
  any answer longer than `MAX_ANSWER_TOKENS` that names no other candidate: a reader that
  hands back everything it can see has not read the value out of it, so a dump of a lean
  cache earns nothing even when the right value is somewhere in it.

Scores: correct 1, abstain 0, wrong -0.25. "I don't know" beats a wrong value, and an answer
that rephrases the question without reading anything is worth exactly as much as "I don't
know": nothing. This departs from the masking design, which scores the answer by ROUGE-L alone;
ROUGE-L stays as a metric (`person_normalised`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from kv_context_env.tokenizer import count_tokens

__all__ = [
    "MAX_ANSWER_TOKENS",
    "VERDICT_SCORES",
    "Verdict",
    "judge_answer",
    "names_value",
    "person_normalised",
]

Verdict = Literal["correct", "abstain", "wrong"]
VERDICT_SCORES: dict[str, float] = {"correct": 1.0, "abstain": 0.0, "wrong": -0.25}
"""The answer term of one question, by verdict."""

MAX_ANSWER_TOKENS = 96
"""The longest answer that can be `correct`: over twice the longest sentence the generator
writes (40 tokens) and above a chat reader's reply cap (`readers.ChatReader.max_tokens`, 64)."""

_ARTICLE = re.compile(r"^(a|an|the)\s+")


def names_value(answer: str, value: str) -> bool:
    """Whether `answer` names `value` as whole words (case-insensitive; "a double espresso"
    matches "double espresso"; "5120" does not match "512"; "B-17" does not match "B-1")."""
    core = _ARTICLE.sub("", value.strip(" .").lower())
    if not core:
        return False
    return re.search(rf"(?<![\w-]){re.escape(core)}(?![\w-])", answer.lower()) is not None


def judge_answer(answer: str, values: Iterable[str], candidates: Iterable[str]) -> Verdict:
    """The verdict of `answer` for key `values` among `candidates` (see the module docstring).
    Candidates equal to a key value are ignored."""
    keys = tuple(values)
    if not keys:
        raise ValueError("a question needs at least one key value")
    others = [c for c in candidates if c not in keys]
    if any(names_value(answer, c) for c in others):
        return "wrong"
    if count_tokens(answer) > MAX_ANSWER_TOKENS:
        return "abstain"
    if all(names_value(answer, v) for v in keys):
        return "correct"
    return "abstain"


_PERSON = re.compile(r"\b(?:my|your|mine|yours|i|me|you)\b", re.IGNORECASE)


def person_normalised(text: str) -> str:
    """`text` with first- and second-person words mapped to one token ("my"), so a correct
    first-person answer ("My locker code is 4471.") matches the key ("your locker code is
    4471") in full under ROUGE-L."""
    return _PERSON.sub("my", text)
