"""Reader (c): a deterministic extractive reader for keyless runs and tests. It owns nothing but
`extractive_answer`: given the text the cache still shows and a question, return the visible
sentence that best matches the question, or "I don't know." when none does.

Method: split the visible text into sentences (at `.`, `!` or `?` followed by whitespace, and
at every line break, so tool-output lines are sentences of their own); skip questions
(sentences ending in `?`: the asking message itself is no answer); score each remaining
sentence by how many distinct content stems of the question it contains (lower-cased words,
stop-words and question-framing words dropped, a light suffix stemmer); the best score wins
and ties go to the LATEST sentence, so a later update of a fact beats the stale value.
Possessives such as "my" or "Maria's" are content here: they tell whose locker code is asked;
"my", "mine" and "your" are one stem, so the assistant's "your locker code" answers "my locker
code".

Issue 16 additions: a sentence must share at least two stems with the question (one when the
question has only one), so a lone "my" picks nothing; a question joining two asks with " and "
("What are my locker code and Maria's flight number?") is answered part by part.

Time order: the episode's visible text opens each message with `role #index: `, and a recalled
copy with `[recalled turn from message N]`. "Latest" compares message indices, a recalled copy
standing at its original message N, so a recalled stale value never outranks a later update
that is still in view. Text without message heads is one message.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["NO_ANSWER", "content_stems", "extractive_answer", "split_sentences"]

NO_ANSWER = "I don't know."
"""What the reader says when no visible sentence shares a content word with the question."""

_STOP_TEXT = """a about above after again all also am an and any are as at be been before being
    below
    between both but by can could did do does doing down during each else ever few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most much must no nor not now of off on once only or other our ours
    ourselves out over own please s same she should so some such t than that the their theirs
    them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you yours yourself yourselves
    remind remember recall tell again said say mentioned earlier back know think wonder quick
    question ok okay hey hi"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
"""Dropped before matching. Deliberately keeps `my`/`your`: whose fact it is matters."""

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


_FIRST_PERSON = frozenset({"my", "mine", "your"})


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A light suffix stemmer: enough that "codes"/"code" and "planned"/"plan" meet; the
    user's possessive is "my" whoever speaks ("my" from the user, "your" from the
    assistant)."""
    if word in _FIRST_PERSON:
        return "my"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]  # planned → plann → plan
    return word


def content_stems(text: str) -> frozenset[str]:
    """The distinct stems of `text`'s content words (lower-cased, stop-words dropped)."""
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS)


def split_sentences(text: str) -> list[str]:
    """Non-empty, stripped sentences of `text`, in order."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


_HEAD = re.compile(r"(?:^|\n)(?:system|user|assistant|tool) #(\d+): ")
_RECALLED = re.compile(r"\[recalled turn from message (\d+)\]")


def _segments(visible_text: str) -> list[tuple[int, list[str]]]:
    """(position in time, sentences) per message: its index, or a recalled copy's origin."""
    parts = _HEAD.split(visible_text)
    out = [(-1, split_sentences(parts[0]))] if parts[0].strip() else []
    for i in range(1, len(parts) - 1, 2):
        text = parts[i + 1]
        origin = _RECALLED.search(text)
        out.append((int(origin.group(1)) if origin else int(parts[i]), split_sentences(text)))
    return out


def _answer_one(segments: list[tuple[int, list[str]]], question: str) -> str:
    wanted = content_stems(question)
    need = min(2, len(wanted))
    best, best_key = NO_ANSWER, (0, -2, -1)
    for position, sentences in segments:
        for order, sentence in enumerate(sentences):
            if sentence.endswith("?"):
                continue
            shared = len(wanted & content_stems(sentence))
            if shared < max(1, need):
                continue
            key = (shared, position, order)
            if key >= best_key:
                best, best_key = sentence, key
    return best


def extractive_answer(visible_text: str, question: str) -> str:
    """The visible sentence sharing the most content stems with `question` (at least two);
    the latest (see the module docstring) wins a tie. `NO_ANSWER` when no declarative
    sentence shares enough. A question asking two things joined by " and " gets one sentence
    per part."""
    segments = _segments(visible_text)
    parts = [p for p in re.split(r"\s+and\s+", question.rstrip(" ?")) if content_stems(p)]
    if len(parts) == 2 and all(len(content_stems(p)) >= 2 for p in parts):
        answers = list(dict.fromkeys(_answer_one(segments, p) for p in parts))
        known = [a for a in answers if a != NO_ANSWER]
        return " ".join(known) if known else NO_ANSWER
    return _answer_one(segments, question)
