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
question has only one), so a lone "my" picks nothing; a sentence of a recalled turn marked
outdated (`[recalled turn, outdated]`: a later message restated one of its facts) scores half
a stem less, so the current value wins a tie; a question joining two asks with " and " ("What
are my locker code and Maria's flight number?") is answered part by part.
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


_SEGMENT = re.compile(r"\n(?=(?:system|user|assistant|tool): )")
OUTDATED = "[recalled turn, outdated]"


def _answer_one(segments: list[tuple[list[str], bool]], question: str) -> str:
    wanted = content_stems(question)
    need = min(2, len(wanted))
    best, best_score = NO_ANSWER, 0.0
    for sentences, outdated in segments:
        for sentence in sentences:
            if sentence.endswith("?"):
                continue
            shared = len(wanted & content_stems(sentence))
            if shared < max(1, need):
                continue
            score = shared - (0.5 if outdated else 0.0)
            if score >= best_score:
                best, best_score = sentence, score
    return best


def extractive_answer(visible_text: str, question: str) -> str:
    """The visible sentence sharing the most content stems with `question` (at least two);
    the latest wins a tie. `NO_ANSWER` when no declarative sentence shares enough. A question
    asking two things joined by " and " gets one sentence per part."""
    segments = [
        (split_sentences(segment), OUTDATED in segment) for segment in _SEGMENT.split(visible_text)
    ]
    parts = [p for p in re.split(r"\s+and\s+", question.rstrip(" ?")) if content_stems(p)]
    if len(parts) == 2 and all(len(content_stems(p)) >= 2 for p in parts):
        answers = list(dict.fromkeys(_answer_one(segments, p) for p in parts))
        known = [a for a in answers if a != NO_ANSWER]
        return " ".join(known) if known else NO_ANSWER
    return _answer_one(segments, question)
