"""The extractive reader: deterministic, keyless, the leaderboard's default. Given the text the
cache still shows and a question, it returns the visible sentence that answers it, or
"I don't know." when none does. It owns `extractive_answer`, `extractive_reader` (the same over
an episode's visible text), the `Reader` type every reader of an episode has, and the reader's
lexicon. (The chat-model reader is `kv_context_env.llm.chat_reader.ChatReader`, the Hugging Face
block-mask reader `hf_reader.HfReader`.)

Method (the lexicon is `lexicon.json`, the same vocabulary the conversations are written from;
a reader that understands the language of the conversation, not a parser of its answer key):
1. The subject: the longest subject head the question names ("piano teacher", "rental car").
   A question naming none gets no answer.
2. The property: the value classes whose cue words (each class's own cues, every noun used for
   it, the words of its question forms) the question shares most; a paraphrase ("How do I get
   hold of ...?") maps to a class ("phone") without repeating the statement's words.
3. The candidates: visible declarative sentences (split at `.`, `!`, `?` + space, at such a
   mark closed by a bracket ("(sorry!) Next ...") and at line breaks; questions skipped) that
   name the subject's head and hold a value of one of those classes, in the shape the
   generator writes it (`VALUE_PATTERNS`; a value that opens the sentence is matched without
   its capital as well: "Noon is ...", "The 3rd of May is ...").
4. The best: most other question words shared (a qualifier such as "Maya's"), then the latest
   in time: messages are labelled `role #index:` in the episode's visible text, and a recalled
   copy (`[recalled turn from message N]`) stands at message N, so an update that is still in
   view beats a recalled stale value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from kv_context_env.generator.lexicon import lexicon
from kv_context_env.generator.valuegen import AIRLINES, MONTHS, PLACE_SUFFIXES, WEEKDAYS

if TYPE_CHECKING:
    from kv_context_env.sim.episode import ContextEpisode

__all__ = [
    "NO_ANSWER",
    "VALUE_PATTERNS",
    "Reader",
    "extractive_answer",
    "extractive_reader",
    "question_parts",
    "split_sentences",
    "uncapitalised",
]

NO_ANSWER = "I don't know."

_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    """a an the is are was were be been of for to at in on and or with by from it its this
    that these those i me my we our us you your he she they them his her their what s t ll ve
    re d do does did can could would should will shall may might must again please quick one
    okay ok right hmm hang sorry back something before forget more thing help out find remind
    tell just so about there here as if exactly get got have has had need""".split()  # noqa: SIM905
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stems(text: str) -> frozenset[str]:
    """The distinct stems of `text`'s content words (lower-cased, stop-words dropped)."""
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS)


_NTH = r"\d{1,2}(?:st|nd|rd|th)"
_MONTH = "|".join(MONTHS)
_WD = "|".join(WEEKDAYS)
_HOUR = r"(?:\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|\b\d{1,2}:\d{2}\b|\bnoon\b)"
_DATE = rf"(?:\b(?:{_MONTH}) \d{{1,2}}\b|\b(?:{_WD}) the {_NTH}\b|\bthe {_NTH} of (?:{_MONTH})\b)"


@cache
def value_patterns() -> dict[str, re.Pattern[str]]:
    """Per value class, the shapes its values are written in."""
    lex = lexicon()
    names = lex.raw["names"]
    choices = sorted(
        (c for pool in lex.raw["choices"].values() for c in pool), key=len, reverse=True
    )
    patterns = {
        "phone": r"(?:\+\d{2} \d{2} \d{4} \d{4}|\b0\d{3} \d{3} \d{4}\b|\b07\d{3} \d{6}\b)",
        "money": r"(?:[£$€]\d{1,3}(?:,\d{3})*|\b\d{1,3}(?:,\d{3})* euros\b)",
        "when": rf"(?:(?:\b(?:{_WD})|{_DATE}) at {_HOUR})",
        "date": _DATE,
        "day": rf"(?:\b(?:{_WD})s\b|\b(?:{_WD}) (?:evenings|mornings)\b|every other (?:{_WD}))",
        "hour": _HOUR,
        "address": r"(?:(?:Flat \d+, )?\b\d+ [A-Z][a-z]+ (?:"
        + "|".join(names["street_types"])
        + r")\b|Unit \d+, [A-Z][a-z]+ Business Park)",
        "email": r"[\w.]+@\w+\.\w+",
        "ref": r"(?:\b[A-Z]{2}\d-\d{2}[A-Z]\b|\b[A-Z]{3}\d{3}\b|#\d{6}\b|\b[A-Z]\d{7}\b)",
        "code": r"(?:\b\d{4}\b|\b\d{6}\b)",
        "unit": r"(?:\b[A-Z]\d{1,2}\b|\b\d{1,2}[A-Z]\b|\b\d{3}\b)",
        "person": r"\b(?:"
        + "|".join(names["first"])
        + r") (?:"
        + "|".join(names["surnames"])
        + r")\b",
        "place": r"(?:(?:The )?\b[A-Z][a-z]+ (?:" + "|".join(PLACE_SUFFIXES) + r"|Park)\b)",
        "count": r"\b\d+ (?:people|guests|of us)\b",
        "plate": r"\b[A-Z]{2}\d{2} [A-Z]{3}\b",
        "flightno": r"\b(?:" + "|".join(AIRLINES) + r") \d{3,4}\b",
        "choice": "(?:" + "|".join(re.escape(c) for c in choices) + ")",
    }
    return {name: re.compile(p) for name, p in patterns.items()}


VALUE_PATTERNS = value_patterns


@cache
def _lexicon_cues() -> tuple[dict[str, frozenset[str]], frozenset[str], re.Pattern[str]]:
    lex = lexicon()
    cues: dict[str, set[str]] = {name: set(c.cues) for name, c in lex.classes.items()}
    for kind in lex.subjects:
        for prop in kind.props:
            for noun in prop.nouns:  # the noun's head word: "day rate" is a rate
                cues[prop.value_class].update(_WORD.findall(noun.lower())[-1:])
    for name, c in lex.classes.items():
        for form in c.ask:
            cues[name].update(_WORD.findall(re.sub(r"\{\w+\}", " ", form).lower()))
    stemmed = {n: frozenset(_stem(w) for w in ws if w not in STOP_WORDS) for n, ws in cues.items()}
    every = frozenset().union(*stemmed.values())
    heads = sorted({k.head.lower() for k in lex.subjects}, key=len, reverse=True)
    head = re.compile(r"\b(" + "|".join(re.escape(h) for h in heads) + r")\b", re.IGNORECASE)
    return stemmed, every, head


@lru_cache(maxsize=1 << 14)
def question_parts(question: str) -> tuple[tuple[str, ...], str | None, frozenset[str]]:
    """(value classes asked, subject head or None, the other content stems of the question)."""
    cues, every, head_re = _lexicon_cues()
    match = head_re.search(question)
    head = match.group(1).lower() if match else None
    rest = question[: match.start()] + " " + question[match.end() :] if match else question
    words = stems(rest)
    scores = {name: len(words & c) for name, c in cues.items()}
    top = max(scores.values())
    classes = tuple(n for n, s in scores.items() if s == top and top > 0) or tuple(cues)
    return classes, head, frozenset(words - every)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][)\]])\s+(?![a-z])|\n+")
"""A sentence ends at `.`, `!` or `?` and a space, at a closing bracket right after one and a
space before anything but a lower-case word ("... tonight (sorry!) Next, ..."), and at a line
break."""
_HEAD = re.compile(r"(?:^|\n)(?:system|user|assistant|tool) #(\d+): ")
_RECALLED = re.compile(r"\[recalled turn from message (\d+)\]")


def uncapitalised(sentence: str) -> str:
    """`sentence` with its first letter lower-cased: a value that opens a sentence ("Noon is
    ...", "The 3rd of May is ...") carries a capital its shape (`VALUE_PATTERNS`) does not."""
    return sentence[:1].lower() + sentence[1:]


def split_sentences(text: str) -> list[str]:
    """Non-empty, stripped sentences of `text`, in order."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _segments(visible_text: str) -> list[tuple[int, list[str]]]:
    """(position in time, sentences) per message: its index, or a recalled copy's origin."""
    parts = _HEAD.split(visible_text)
    out = [(-1, split_sentences(parts[0]))] if parts[0].strip() else []
    for i in range(1, len(parts) - 1, 2):
        text = parts[i + 1]
        origin = _RECALLED.search(text)
        out.append((int(origin.group(1)) if origin else int(parts[i]), split_sentences(text)))
    return out


def extractive_answer(visible_text: str, question: str) -> str:
    """The visible sentence that answers `question` (see the module docstring), or
    `NO_ANSWER`."""
    classes, head, others = question_parts(question)
    if head is None:
        return NO_ANSWER
    patterns = value_patterns()
    best, best_key = NO_ANSWER, None
    for position, sentences in _segments(visible_text):
        for order, sentence in enumerate(sentences):
            if sentence.endswith("?") or head not in sentence.lower():
                continue
            opening = uncapitalised(sentence)
            if not any(
                patterns[c].search(sentence) or patterns[c].search(opening) for c in classes
            ):
                continue
            key = (len(stems(sentence) & others), position, order)
            if best_key is None or key >= best_key:
                best, best_key = sentence, key
    return best


Reader = Callable[["ContextEpisode", str], str]
"""(episode at the question, question text) -> answer."""


def extractive_reader(episode: ContextEpisode, question: str) -> str:
    return extractive_answer(episode.visible_text(), question)
