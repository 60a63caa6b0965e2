"""The shape reader: an attack on the generator's structure. A keyless policy that reads no
time expression and no cue word — only where things sit: turn counts, roles, which sentences
mention which known subject and in what order, whether a subject recurs, whether a fact's
value is said again, and the level's documented distributions (`LevelSpec`). It is what an
outsider would write from the generator's source to see whether position alone tells which
facts will be needed; `validate` requires it to stay well below the reference.

It finds statements with the template parser (`extraction.parse_message`) and matches subject
mentions by the words of the facts read (`signal_reader.Subject`), then applies shape rules,
each one switchable (`rules`) so an ablation shows what each structural regularity is worth:

- `soon`: a fact just said is kept while its `soon` ask may still come (the level's
  `soon_turns`; the next turn on an earlier generator);
- `order`: a non-statement mention of a subject within the level's `cue_turns` of a fact's
  first statement announces it as needed (on an earlier generator: up to three turns before
  it, or with it); a mention only after that marks an aside; without the rule, any mention
  within three turns either side announces and none marks an aside;
- `again`: in a question's message, a sentence after the question says the fact will be asked
  again (with the rule off, any other sentence of that message does);
- `update`: a second value for a known fact says another ask is coming;
- `close`: a mention of a subject after one of its facts was asked, with nothing of it still
  announced, drops the subject's facts.

An announced fact is expected at a turn drawn from the level's lead distribution
(`LevelSpec.lead_turns`, not before `asks_from`); a repeated ask from `reask_turns`; the
ranking is the reference's (expected turns until need, weighed by blocks and recall price).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kv_context_env.generator.levels import LEVELS, LevelSpec
from kv_context_env.readers.extractive import split_sentences
from kv_context_env.sim.episode import ContextEpisode
from kv_context_env.vocabulary import Message

from .extraction import Key, parse_message
from .signal_reader import PENDING_TURNS, SignalReader, Subject, named_properties, owner_words

RULES = ("soon", "order", "again", "update", "close")
"""The shape rules the reader can use (see the module docstring)."""
ANNOUNCE_TURNS = 3
"""How many turns before a fact's first statement a mention announces it."""


@dataclass
class ShapeReader(SignalReader):
    """See the module docstring. One instance per episode."""

    rules: frozenset[str] = frozenset(RULES)
    spec: LevelSpec | None = None
    mentions: dict[str, list[tuple[int, tuple[str, ...]]]] = field(default_factory=dict)
    """Subject head → (turn, property classes named or ("*",)) of each non-statement mention."""
    first_said: dict[Key, int] = field(default_factory=dict)
    announced: set[Key] = field(default_factory=set)
    aside: set[Key] = field(default_factory=set)
    asked_keys: set[Key] = field(default_factory=set)
    shape_pending: list[tuple[int, str]] = field(default_factory=list)
    unheard_age: int = 0
    """Only a fact said this turn counts as unheard (its own rules place what comes later)."""
    talk_turns: int = -1
    """No timeless-mention rule: telling a time from none is reading a time expression."""

    # --- the level's documented distributions -------------------------------------------

    def lead_window(self, said: int) -> tuple[int, int]:
        """Turns a `later` fact said at `said` is first asked in (the level's lead range)."""
        assert self.spec is not None
        lo = max(said + self.spec.lead_turns[0], int(self.spec.asks_from * self.spec.n_turns))
        return max(lo, self.turn + 1), max(lo + self.spec.lead_turns[1], self.turn + 1)

    def cue_range(self) -> tuple[int, int]:
        """Turns from a fact's first statement to its first signal (the level's
        `cue_turns`; an earlier generator always signalled at or before the statement)."""
        return getattr(self.spec, "cue_turns", (-ANNOUNCE_TURNS, 0))

    def soon_range(self) -> tuple[int, int]:
        """Turns from a `soon` fact's statement to its ask (an earlier generator: the next)."""
        return getattr(self.spec, "soon_turns", (1, 1))

    def reask_window(self) -> tuple[int, int]:
        assert self.spec is not None
        lo, span = self.spec.reask_turns
        return self.turn + lo, self.turn + lo + span

    # --- reading ------------------------------------------------------------------------

    def unread(self, episode: ContextEpisode) -> Iterator[Message]:
        if self.spec is None:
            self.spec = LEVELS[episode.conversation.level]
            if "soon" not in self.rules:  # the reference's wait for a signal later this turn
                self.unheard_turns = float(self.spec.n_turns)
        return super().unread(episode)

    def read(self, episode: ContextEpisode) -> None:
        now = episode.current_message.index
        for message in self.unread(episode):
            if message.role == "user":
                self.turn += 1
            found = parse_message(message.index, message.text)
            stated = {message.text[f.start : f.end] for f in found}
            new_heads = False
            for f in found:
                head = f.key[0]
                new_heads |= head not in self.subjects
                subject = self.subjects.setdefault(head, Subject(head))
                subject.owners |= owner_words(message.text[f.start : f.end], head)
                changed = f.key in self.facts and f.value != self.facts[f.key].value
                if changed and "update" in self.rules:
                    self.need[f.key] = (self.turn + 1, self.reask_window()[1])
                    self.aside.discard(f.key)
                self.facts[f.key] = f
                self.said_turn[f.key] = self.turn
                if f.key not in self.first_said:
                    self.first_said[f.key] = self.turn
                    self.first_statement(f.key)
            if new_heads:
                self.retry_shape_pending()
            if message.index == now and episode.pending_question is not None:
                continue  # a question's message is read by `again_window`
            for sentence in split_sentences(message.text):
                if sentence not in stated:
                    self.mention(sentence)

    def mention(self, sentence: str) -> None:
        head = self.mentioned(sentence)
        if head is None:
            self.shape_pending.append((self.turn, sentence))
            return
        classes = tuple(named_properties(sentence, head)) or ("*",)
        self.mentions.setdefault(head, []).append((self.turn, classes))
        self.after_mention(head, classes)

    def retry_shape_pending(self) -> None:
        keep = []
        for turn, sentence in self.shape_pending:
            if self.turn - turn > PENDING_TURNS:
                continue
            head = self.mentioned(sentence)
            if head is None:
                keep.append((turn, sentence))
                continue
            classes = tuple(named_properties(sentence, head)) or ("*",)
            self.mentions.setdefault(head, []).append((turn, classes))
            for key in [k for k in self.first_said if k[0] == head]:
                if self.first_said[key] == self.turn and (classes == ("*",) or key[1] in classes):
                    self.announce(key)
        self.shape_pending = keep

    def matches(self, key: Key, classes: tuple[str, ...]) -> bool:
        return classes == ("*",) or key[1] in classes

    def first_statement(self, key: Key) -> None:
        """A fact's first statement: announced when a mention sat at most `ANNOUNCE_TURNS`
        turns before it."""
        said = self.first_said[key]
        lo, hi = self.announce_range()
        for turn, classes in self.mentions.get(key[0], []):
            if said + lo <= turn <= said + hi and self.matches(key, classes):
                self.announce(key)
                return

    def announce_range(self) -> tuple[int, int]:
        """Turns around a first statement where a mention announces the fact: the level's
        cue range with the `order` rule, three turns either side without it."""
        if "order" in self.rules:
            return self.cue_range()
        return -ANNOUNCE_TURNS, ANNOUNCE_TURNS

    def announce(self, key: Key) -> None:
        if key in self.asked_keys:
            return
        self.announced.add(key)
        self.aside.discard(key)
        self.need[key] = self.lead_window(self.first_said[key])

    def after_mention(self, head: str, classes: tuple[str, ...]) -> None:
        """A mention of a known subject: what it says about the subject's facts by where it
        sits."""
        keys = [k for k in self.first_said if k[0] == head and self.matches(k, classes)]
        hi = self.announce_range()[1]
        for key in keys:
            if key in self.announced:
                continue
            if self.turn <= self.first_said[key] + hi:
                self.announce(key)
            elif "order" in self.rules:  # after any real first signal: an aside's
                self.aside.add(key)
        if "close" in self.rules:
            facts = [k for k in self.first_said if k[0] == head]
            if any(k in self.asked_keys for k in facts) and not any(k in self.need for k in facts):
                self.aside.update(facts)

    def again_window(self, text: str, question: str) -> tuple[int, int] | None:
        """A sentence after the question (with the `again` rule; any other sentence without
        it) says the fact will be asked again."""
        sentences = split_sentences(text)
        at = next((i for i, s in enumerate(sentences) if s in question), None)
        if at is None:
            return None
        rest = (
            sentences[at + 1 :] if "again" in self.rules else sentences[:at] + sentences[at + 1 :]
        )
        return self.reask_window() if rest else None

    # --- acting -------------------------------------------------------------------------

    def estimate(self, key: Key) -> float:
        if key in self.aside:
            return float("inf")
        lo, hi = self.soon_range()
        since = self.turn - self.said_turn[key]
        if "soon" in self.rules and since < hi:  # a `soon` ask may still come
            return max(1.0, (lo + hi) / 2 - since)
        window = self.need.get(key)
        if window is None:
            return float("inf")
        first, last = window
        if self.turn > last:
            return float("inf")
        if self.turn < first:
            return (first + last) / 2 - self.turn
        return (self.turn + 1 + last) / 2 - self.turn

    def __call__(self, episode: ContextEpisode) -> None:
        question = episode.pending_question
        if question is not None:
            self.read(episode)
            key = self.asked(question.text)
            if key is not None:
                self.asked_keys.add(key)
                self.announced.discard(key)
        super().__call__(episode)


def shape_reader(rules: frozenset[str] = frozenset(RULES)) -> ShapeReader:
    return ShapeReader(rules=rules)
