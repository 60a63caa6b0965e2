"""Finding facts without judging them: a template parser built in code from the generator's
own statement forms and pools, the generator's ground-truth statement list (perfect
extraction), and the policy both feed — keep the latest statement per (subject, property), drop
what was asked, evict everything else, recall on demand.

`validate` runs them to show that finding every fact is not what the family pays for: a policy
that knows every statement but not which will be needed keeps the newest ones, and pays a
priced recall for most questions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

from kv_context_env.generator.lexicon import lexicon
from kv_context_env.readers.extractive import (
    question_parts,
    split_sentences,
    uncapitalised,
    value_patterns,
)
from kv_context_env.sim.episode import ContextEpisode
from kv_context_env.vocabulary import Conversation

from .baselines import ContextPolicy
from .keeping import evict_except, fill, locate, span_blocks

Key = tuple[str, str]
"""(subject head, value class): what "the same fact" means to the parser."""


@dataclass(frozen=True, slots=True)
class Found:
    """One statement found in a message: where, which fact, which value."""

    message_index: int
    start: int
    end: int
    key: Key
    value: str


# --- the template parser ---------------------------------------------------------------


def _form_regex(form: str, subject: str, noun: str, value: str) -> str:
    """A statement form as a regular expression; an aside may follow the subject."""
    out, last = [], 0
    for match in re.finditer(r"\{(\w+)\}", form):
        out.append(re.escape(form[last : match.start()]))
        slot = match.group(1)
        if slot == "S":
            out.append(rf"(?:{subject})(?:, [^,]{{3,60}},)?")
        elif slot == "Sp":
            out.append(rf"(?:{subject})(?:'s|')")
        elif slot in ("a", "a2"):
            out.append(rf"(?:{noun})")
        elif slot == "v":
            out.append(f"({value})")
        else:
            out.append(r"[^.]{0,40}")
        last = match.end()
    out.append(re.escape(form[last:]).rstrip(r"\."))
    return "".join(out)


@cache
def _templates() -> dict[str, tuple[re.Pattern[str], ...]]:
    """Per value class, its statement forms (and the generic ones) compiled, the value a lazy
    group checked afterwards against the class's value shape."""
    lex = lexicon()
    # a subject phrase; `parse_message` checks that the sentence names a subject head
    subject = r"(?:[A-Z][a-z]+'s |[Tt]he )?[\w' -]{2,60}?"
    generic = [
        *lex.text("generic", "say"),
        *lex.text("generic", "note"),
        *lex.text("generic", "reason"),
        *lex.text("generic", "update"),
    ]
    out = {}
    for name, cls in lex.classes.items():
        nouns = sorted(
            {n for k in lex.subjects for p in k.props if p.value_class == name for n in p.nouns},
            key=len,
            reverse=True,
        )
        noun = "|".join(re.escape(n) for n in nouns) or r"\w+"
        forms = dict.fromkeys([*cls.say, *cls.update, *generic])
        out[name] = tuple(
            re.compile(_form_regex(f.rstrip("."), subject, noun, ".+?"), re.IGNORECASE)
            for f in forms
        )
    return out


@cache
def _head_regex() -> re.Pattern[str]:
    heads = sorted({k.head for k in lexicon().subjects}, key=len, reverse=True)
    return re.compile(r"\b(" + "|".join(re.escape(h) for h in heads) + r")\b", re.IGNORECASE)


@cache
def _kind_classes() -> dict[str, frozenset[str]]:
    return {k.head.lower(): frozenset(p.value_class for p in k.props) for k in lexicon().subjects}


def parse_message(message_index: int, text: str) -> list[Found]:
    """Every statement the templates find in `text`, one per sentence at most."""
    found = []
    position = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, position)
        position = start + len(sentence)
        if sentence.endswith("?"):
            continue  # a question states nothing
        head_match = _head_regex().search(sentence)
        if head_match is None:
            continue
        head = head_match.group(1).lower()
        value = _statement_value(sentence, head)
        if value is not None:
            name, said = value
            found.append(Found(message_index, start, start + len(sentence), (head, name), said))
    return found


def _statement_value(sentence: str, head: str) -> tuple[str, str] | None:
    """(value class, value) of the first form of a class of `head`'s kind that matches. A
    value that opens the sentence is read without its capital as well ("The 3rd of May is
    ...", "Noon is ...": values are written in lower case where a sentence does not start)."""
    patterns = value_patterns()
    for name in sorted(_kind_classes()[head]):
        for form in _templates()[name]:
            match = form.search(sentence)
            if match is None:
                continue
            shape = patterns[name].search(sentence, match.start(1))
            if shape is None and match.start(1) == 0:
                shape = patterns[name].search(uncapitalised(sentence))
            if shape is not None:
                return name, shape.group(0)
    return None


def truth(conversation: Conversation) -> list[Found]:
    """The ground-truth statement list as `Found` records (perfect extraction)."""
    kinds = {k.head.lower() for k in lexicon().subjects}
    out = []
    for stated in conversation.facts:
        head = next(h for h in sorted(kinds, key=len, reverse=True) if h in stated.key.lower())
        span = stated.span
        out.append(
            Found(
                span.message_index, span.start, span.end, (head, stated.value_class), stated.value
            )
        )
    return sorted(out, key=lambda f: (f.message_index, f.start))


def parser_quality(conversation: Conversation) -> tuple[int, int, int]:
    """(statements found right, statements found, statements in the ground truth): a found
    statement is right when its message, fact and value match a true one."""
    truths = {(f.message_index, f.key, f.value) for f in truth(conversation)}
    found = {
        (f.message_index, f.key, f.value)
        for i, m in enumerate(conversation.messages)
        if m.role != "system"
        for f in parse_message(i, m.text)
    }
    return len(found & truths), len(found), len(truths)


# --- the policy --------------------------------------------------------------------------


class LatestPerFact:
    """Keep the latest statement of each fact, newest first, as far as the budget allows;
    drop a fact once it was asked (`drop_asked`); at a question, recall the asked fact's
    latest statement with its own words when it is not in view.

    `statements(episode)` yields the statements arrived so far; `asked(episode)` names the
    fact the pending question asks (or None)."""

    def __init__(
        self,
        statements: Callable[[ContextEpisode], Iterator[Found]],
        asked: Callable[[ContextEpisode], Key | None],
        drop_asked: bool = True,
    ) -> None:
        self.statements = statements
        self.asked = asked
        self.drop_asked = drop_asked
        self.done: set[Key] = set()

    def __call__(self, episode: ContextEpisode) -> None:
        latest: dict[Key, Found] = {}
        for found in self.statements(episode):
            latest[found.key] = found
        key = self.asked(episode) if episode.pending_question is not None else None
        if key is not None and key in latest:
            f = latest[key]
            if locate(episode, f.message_index, f.start, f.end) is None:
                text = episode.conversation.messages[f.message_index].text
                episode.recall(text[f.start : f.end])
        ranked = []
        order = sorted(latest.values(), key=lambda f: (f.key != key, -f.message_index, -f.start))
        active = episode.cache.active_flags()
        for f in order:
            if self.drop_asked and f.key in self.done and f.key != key:
                continue
            where = locate(episode, f.message_index, f.start, f.end, active)
            if where is not None:
                ranked.append(span_blocks(episode, where))
        evict_except(episode, fill(episode, ranked))
        if key is not None:
            self.done.add(key)


def _arrived(episode: ContextEpisode) -> int:
    return episode.current_message.index


def template_parser() -> ContextPolicy:
    """The parser built from the generator's templates and pools, with `LatestPerFact`."""
    seen: list[Found] = []
    parsed = [0]

    def statements(episode: ContextEpisode) -> Iterator[Found]:
        messages = episode.conversation.messages
        while parsed[0] <= _arrived(episode):
            i = parsed[0]
            if messages[i].role != "system":
                seen.extend(parse_message(i, messages[i].text))
            parsed[0] += 1
        return iter(seen)

    def asked(episode: ContextEpisode) -> Key | None:
        question = episode.pending_question
        assert question is not None
        classes, head, _ = question_parts(question.text)
        if head is None:
            return None
        allowed = _kind_classes()[head]
        return next(((head, c) for c in classes if c in allowed), None)

    return LatestPerFact(statements, asked)


def perfect_extraction(drop_asked: bool = True) -> ContextPolicy:
    """The ground-truth statement list (no parsing) and the asked fact's key, with
    `LatestPerFact`."""
    cached: list[list[Found]] = []

    def every(episode: ContextEpisode) -> list[Found]:
        if not cached:
            cached.append(truth(episode.conversation))
        return cached[0]

    def statements(episode: ContextEpisode) -> Iterator[Found]:
        now = _arrived(episode)
        return (f for f in every(episode) if f.message_index <= now)

    def asked(episode: ContextEpisode) -> Key | None:
        question = episode.pending_question
        assert question is not None
        span = question.facts[0]
        return next(
            (
                f.key
                for f in every(episode)
                if (f.message_index, f.start) == (span.message_index, span.start)
            ),
            None,
        )

    return LatestPerFact(statements, asked, drop_asked)
