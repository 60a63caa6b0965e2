"""The signal-reading reference: a policy that reads only what arrives (never the answer key)
and the documented signal rules, to show the judgment the family asks for can be exercised.
It holds no list of the generator's sentences: times are parsed, subjects are matched by the
words of the facts already read, and cue classes are the docs' word lists.

The rules (also in the docs' context page):
1. Days. A day opens with a user message whose first sentence (after a short greeting) is
   short (at most six words) and names today's weekday (the day after the last one named;
   "Day 4" sets the count: days are numbered from the first day of the chat). A day is
   counted in turns as the conversation goes (8 until one has been seen whole); it has three
   parts: morning, afternoon, evening.
2. Facts. A statement names a subject and holds a value (found with the template parser of
   `extraction`); the latest statement of a (subject, property) is the one that counts. A
   subject is known by its words: the head noun phrase and the names before it ("Maya Demir's
   piano teacher": head "piano teacher", owner words "maya", "demir"). A sentence mentions the
   known subject whose words it shares most (its head, or an owner word just before the
   head's last word; an owner word elsewhere adds to the head), when no other ties with it;
   a subject whose statements named no owner is mentioned by any name just before its head's
   last word ("Ken's van" for "the removal van"), and the name becomes its owner word. A
   question whose words fit two properties of its subject asks the one a fact was read for.
3. Signals. A sentence that is not a statement and mentions a known subject ("Maya's
   teacher", "the piano teacher") is a signal about it; about one of
   its properties when it names one of the property's nouns. With a time ("in a bit",
   "tonight", "tomorrow after lunch", "on Thursday", "in 3 days", "next Monday morning", "on
   day 12", "in a fortnight") it says the subject will be needed then: any cue or none (a
   plan, a reminder, a to-do, a calendar line). Without a time, a closure word ("sorted",
   "cancelled", "called off", "no longer", "finished", ...) says it will not be. A sentence
   with a time in a question's message says the asked fact will be needed again then. A
   sentence with neither says only that the subject was talked about. A signal (or such a
   sentence) said before its subject's first statement waits `PENDING_TURNS` turns for it.
4. Keeping. The asked fact first; then facts by expected turns until need (over what is left
   of the named window; "in a bit" = the rest of the current part of the day) times the blocks
   they take over the price of recalling them, while the budget lasts; a named day and part
   are read again as the days run (days and their parts vary in length, so the turns first
   expected for "Thursday evening" say little a few days on), and a named time more than a
   day past is forgotten. A fact with no signal yet counts `unheard_turns` in the turn it
   was said and `unheard_step` more per turn after, up to `unheard_age` turns after it (a
   first signal may come up to three turns after its statement), unless its subject was
   talked about with no time named from three turns before the statement on (an aside
   mostly is); room left over goes to the newest facts with no named time.
   Everything else is evicted; a question whose fact is not in view recalls the fact's latest
   statement by its own words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from kv_context_env.generator.lexicon import lexicon
from kv_context_env.readers.extractive import STOP_WORDS, question_parts, split_sentences
from kv_context_env.sim.episode import ContextEpisode, recall_latency_s
from kv_context_env.vocabulary import Message
from rubrics.context import RECALL_SLO_S

from .baselines import ContextPolicy
from .extraction import Found, Key, _kind_classes, parse_message
from .keeping import evict_except, fill, locate, span_blocks

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
PARTS = ("morning", "afternoon", "evening")
NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
CLOSE_WORDS = (
    "sorted", "cancelled", "canceled", "called off", "done", "scrap", "off the list",
    "no longer", "no need", "forget about", "forget that", "finished", "settled",
    "fell through", "won't need", "not doing",
)  # fmt: skip
"""The closure cue class (docs): words that say a subject will not be needed."""
DEFAULT_DAY_TURNS = 8
PENDING_TURNS = 4
OPENING_WORDS = 6
MIN_MENTION = 3.0
"""The least `Subject.score` that counts as a mention."""
_WEEKDAY = "|".join(WEEKDAYS)
_NUMBER = r"(\d+|" + "|".join(NUMBERS) + r")"
_SOON = re.compile(
    r"\b(?:in a bit|shortly|later today|later on|in an hour|before long|a bit later)\b"
)


class Window(tuple[int, int]):
    """The turns (first, last) a signal's time names, as expected when it was read, with the
    day and part of the day it named (part -1: the whole day), so the expectation can be read
    again as the days run."""

    day: int
    part: int

    def __new__(cls, first: int, last: int, day: int, part: int) -> Window:
        window = super().__new__(cls, (first, last))
        window.day, window.part = day, part
        return window


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS.index(word)


def day_part(low: str) -> int:
    """The part of a day a lower-cased phrase names (0 morning, 1 afternoon, 2 evening), or
    -1."""
    if re.search(r"\b(?:evening|tonight|night|after work)\b", low):
        return 2
    if re.search(r"\b(?:afternoon|after lunch)\b", low):
        return 1
    if re.search(r"\b(?:morning|first thing|before lunch)\b", low):
        return 0
    return -1


def parse_time(text: str, today: int, weekday: int) -> tuple[int, int] | None:
    """(day, part or -1) a time expression in `text` names, days counted like `today` (whose
    weekday index is `weekday`); part -1 on `today` means "any moment now"; None when no time
    is named."""
    low = text.lower()
    part = day_part(low)
    if _SOON.search(low):
        return today, -1
    if "day after tomorrow" in low:
        return today + 2, part
    if "tomorrow" in low:
        return today + 1, part
    match = re.search(rf"\bin (?:about )?{_NUMBER} days\b|\b{_NUMBER} days from now\b", low)
    if match:
        return today + _number(match.group(1) or match.group(2)), part
    if re.search(r"\b(?:fortnight|couple of weeks|two weeks)\b", low):
        return today + 14, -1
    match = re.search(r"\bday (\d+)\b", low)
    if match:
        return int(match.group(1)) - 1, part
    match = re.search(rf"\b(?:next|a week on) ({_WEEKDAY})\b|\b({_WEEKDAY}) week\b", low)
    if match:
        name = match.group(1) or match.group(2)
        return today + 7 + (WEEKDAYS.index(name) - weekday) % 7, part
    match = re.search(rf"\b({_WEEKDAY})\b", low)
    if match:
        return today + ((WEEKDAYS.index(match.group(1)) - weekday) % 7 or 7), part
    if re.search(r"\b(?:this (?:morning|afternoon|evening)|tonight|after lunch)\b", low):
        return today, part
    return None


def named_properties(sentence: str, head: str) -> list[str]:
    """The value classes of `head`'s properties whose nouns `sentence` names (a noun inside a
    longer named noun, "number" in "job number", does not count on its own)."""
    low = sentence.lower().replace(head, " ")
    kind = next(k for k in lexicon().subjects if k.head.lower() == head)
    nouns = sorted(
        ((n.lower(), p.value_class) for p in kind.props for n in p.nouns), key=lambda x: -len(x[0])
    )
    named = []
    for noun, cls in nouns:
        pattern = rf"\b{re.escape(noun)}\b"
        if re.search(pattern, low):
            named.append(cls)
            low = re.sub(pattern, " ", low)
    return list(dict.fromkeys(named))


@dataclass
class Subject:
    """A subject as the reader knows it: the head and the owner words seen before it."""

    head: str
    owners: set[str] = field(default_factory=set)

    @property
    def last(self) -> str:
        return self.head.split()[-1]

    def score(self, sentence: str) -> float:
        """How surely `sentence` mentions it: 3 for the head, +2 when an owner word is also
        there; 3.5 for an owner word right before the head's last word ("Maya's teacher",
        "the Lisbon car"); when no owner word is known (its statements named none), 3 for a
        name right before the head's last word ("Ken's van" for "the removal van"); else 0."""
        low = sentence.lower()
        owner = any(re.search(rf"\b{re.escape(o)}\b", low) for o in self.owners)
        if re.search(rf"\b{re.escape(self.head)}\b", low):
            return 5.0 if owner else 3.0
        for o in self.owners:
            if re.search(rf"\b{re.escape(o)}(?:'s|')? {re.escape(self.last)}\b", low):
                return 3.5
        if not self.owners and self.named_owner(sentence) is not None:
            return 3.0
        return 0.0

    def named_owner(self, sentence: str) -> str | None:
        """The name right before the head's last word in `sentence` ("Ken's van" -> "ken";
        "the Leeds talk" -> "leeds"), or None: a capitalised word that is no function word
        and no weekday."""
        pattern = rf"\b([A-Z][a-z]+)(?:'s|')? {re.escape(self.last)}\b"
        for match in re.finditer(pattern, sentence, re.IGNORECASE):
            name = match.group(1)
            low = name.lower()
            if name[0].isupper() and low not in STOP_WORDS and low not in WEEKDAYS:
                return low
        return None


def owner_words(sentence: str, head: str) -> set[str]:
    """The capitalised words just before `head` in `sentence` ("Maya Demir's piano teacher"
    -> {"maya", "demir"}; "the Lisbon hotel" -> {"lisbon"}), up to a clause mark ("Also,
    Maya's") or a function word that is no possessive ("For Maya's")."""
    at = sentence.lower().find(head)
    if at < 0:
        return set()
    before = sentence[:at].split()[-3:]
    out = set()
    for word in reversed(before):
        if word[-1:] in ",:;":
            break
        possessive = word.endswith(("'s", "'"))
        clean = word.removesuffix("'s").removesuffix("'")
        if not clean[:1].isupper() or (not possessive and clean.lower() in STOP_WORDS):
            break
        out.add(clean.lower())
    return out


@dataclass
class SignalReader:
    """See the module docstring. One instance per episode."""

    fresh_turns: int = 0
    """Turns a just-said fact is kept whatever the signals say (0: it ranks by its signals)."""
    grace_days: int = 1
    """Days after a named window before the estimate is forgotten."""
    overdue_turns: float = 3.0
    """Expected turns until need of a fact whose named window has just passed unasked."""
    unheard_turns: float = 12.0
    """Expected turns until need of a fact said this turn with no signal yet (a reply or a
    tool output later in the turn may still name its time), unless its subject was talked
    about with no time named (`talk_turns`)."""
    unheard_age: int = 2
    """Turns after its statement that a fact with no signal yet still counts as unheard: a
    first signal comes up to three turns after its statement (`cue_turns`), the chance that
    it still comes shrinking each turn."""
    unheard_step: float = 6.0
    """Turns added to `unheard_turns` per turn since the statement."""
    turn: int = 0
    day: int = -1
    weekday: int = 0
    day_started: int = 0
    day_lengths: list[int] = field(default_factory=list)
    part: int = 0
    """The part of today the conversation is in (a day opens in the morning; a line such as
    "Later that afternoon." moves it on)."""
    part_started: int = 0
    part_lengths: list[list[int]] = field(default_factory=lambda: [[], [], []])
    """Turns each part of a day lasted, as seen so far (morning, afternoon, evening)."""
    opened: int = 0
    """How many leading sentences of the message read last opened a day or a part of one."""
    seen: int = 0
    facts: dict[Key, Found] = field(default_factory=dict)
    said_turn: dict[Key, int] = field(default_factory=dict)
    subjects: dict[str, Subject] = field(default_factory=dict)
    need: dict[Key, tuple[int, int]] = field(default_factory=dict)
    """(head, class) → the turns (first, last) it is expected to be needed in; class "*" for
    the whole subject."""
    closed: set[str] = field(default_factory=set)
    pending: list[tuple[int, str, tuple[int, int] | None]] = field(default_factory=list)
    """Signals about no known subject yet: (turn, sentence, window or None for a closure)."""
    cost_aware: bool = True
    """Rank by turns until need over the recall cost of the fact's turn (else by turns)."""
    size_aware: bool = True
    """Rank by turns until need times the blocks the fact takes (with `cost_aware`)."""
    turn_tokens: dict[int, int] = field(default_factory=dict)
    talk_turns: int = 3
    """A fact with no signal yet is not held as unheard once its subject was talked about
    with no time named from this many turns before its statement on (-1: never)."""
    talked: dict[str, int] = field(default_factory=dict)
    """Subject head → the last turn it was talked about with no time and no closure."""
    pending_talk: list[tuple[int, str]] = field(default_factory=list)
    """Such sentences about no known subject yet: (turn, sentence)."""

    # --- days and times ---------------------------------------------------------------

    def day_turns(self) -> float:
        return (
            sum(self.day_lengths) / len(self.day_lengths) if self.day_lengths else DEFAULT_DAY_TURNS
        )

    def opens_day(self, sentence: str) -> int | None:
        """The weekday a user message's first sentence opens a day with, or None: a short
        sentence (at most `OPENING_WORDS` words) naming the weekday after the current one (any
        on the first day) and no other time. (A statement such as "The delivery is Thursday
        the 24th." opens nothing.)"""
        low = sentence.lower()
        if len(low.split()) > OPENING_WORDS:
            return None
        names = re.findall(rf"\b({_WEEKDAY})\b", low)
        if len(names) != 1 or re.search(
            r"\b(?:next|week|in|on|this|come|by|from|tomorrow|until)\b", low
        ):
            return None
        weekday = WEEKDAYS.index(names[0])
        if self.day >= 0 and weekday != (self.weekday + 1) % 7:
            return None
        return weekday

    def opening(self, sentences: list[str]) -> tuple[int, int]:
        """(how many of a user message's first sentences open a day: the first, or a short
        greeting and the next, "Morning! It's Monday."; the weekday opened); (0, -1) when no
        day opens."""
        if sentences:
            weekday = self.opens_day(sentences[0])
            if weekday is not None:
                return 1, weekday
        if len(sentences) > 1 and len(sentences[0].split()) <= 3:
            weekday = self.opens_day(sentences[1])
            if weekday is not None:
                return 2, weekday
        return 0, -1

    def part_turns(self, part: int) -> float:
        """Turns a part of a day lasts on average, as seen so far."""
        seen = self.part_lengths[part]
        return sum(seen) / len(seen) if seen else DEFAULT_DAY_TURNS / len(PARTS)

    def opens_part(self, sentence: str) -> int | None:
        """The part of today a user message's first sentence says has come ("Later that
        afternoon.", "Evening now."), or None: a short sentence (at most `OPENING_WORDS`
        words) naming a later part than the current one, no day and no known subject."""
        low = sentence.lower()
        if len(low.split()) > OPENING_WORDS:
            return None
        part = day_part(low)
        if part <= self.part or self.mentioned(sentence) is not None:
            return None
        named = parse_time(sentence, 0, self.weekday)
        return part if named is None or named[0] == 0 else None

    def open_part(self, part: int) -> None:
        self.part_lengths[self.part].append(self.turn - self.part_started)
        self.part = part
        self.part_started = self.turn

    def part_window(self, day: int, part: int) -> tuple[int, int]:
        """The turns (first, last) the named `part` of `day` (-1: the whole day) is expected
        to span, from the parts' average lengths so far."""
        lengths = [self.part_turns(p) for p in range(len(PARTS))]
        if day <= self.day and (part < 0 or part <= self.part):
            end = self.part_started + (
                sum(lengths[self.part :]) if part < 0 else lengths[self.part]
            )
            return self.turn, max(self.turn, round(end) - 1)
        if day <= self.day:
            base = max(self.part_started + sum(lengths[self.part : part]), self.turn + 1)
            return round(base), round(base + lengths[part]) - 1
        base = max(self.part_started + sum(lengths[self.part :]), self.turn + 1)
        base += (day - self.day - 1) * sum(lengths)
        if part < 0:
            return round(base), round(base + sum(lengths)) - 1
        first = base + sum(lengths[:part])
        return round(first), round(first + lengths[part]) - 1

    def named_time(self, text: str, today: int) -> tuple[int, int] | None:
        """(day, part) the time expression in `text` names (`parse_time`), or None."""
        return parse_time(text, today, self.weekday)

    def window(self, text: str) -> tuple[int, int] | None:
        """The turns (first, last) of need a time in `text` names, or None."""
        today = max(self.day, 0)
        named = self.named_time(text, today)
        if named is None:
            return None
        day, part = named
        if day == today and part < 0:
            part = self.part
        first, last = self.part_window(day, part)
        return Window(max(first, self.turn + 1), max(last, self.turn + 1), day, part)

    def _slots(self, window: Window) -> tuple[int, int, int]:
        """(first, last) part-of-day slot `window` names (a day counts `len(PARTS)` slots; a
        whole day spans all of its parts), and the slot the conversation is in now."""
        base = window.day * len(PARTS)
        first, last = (
            (base, base + len(PARTS) - 1) if window.part < 0 else (base + window.part,) * 2
        )
        return first, last, max(self.day, 0) * len(PARTS) + self.part

    def slot_window(self, window: Window) -> tuple[int, int] | None:
        """The turns of `window`'s named day and part as the conversation stands now (days and
        parts run longer or shorter than they were expected to when it was named); None once
        they are past (then `overdue` counts the turns since)."""
        first_slot, last_slot, now = self._slots(window)
        if first_slot > now:
            first, last = self.part_window(window.day, window.part)
            return max(first, self.turn + 1), max(last, self.turn + 1)
        if last_slot >= now:  # the named part (or day) is under way
            return self.part_window(window.day, window.part)
        return None

    def overdue(self, window: Window) -> float:
        """Turns since the named day and part ended, counted in parts of a day seen so far."""
        _, last_slot, now = self._slots(window)
        past = now - last_slot - 1  # whole parts between the named one and the current one
        return (
            self.turn
            - self.part_started
            + sum(self.part_turns((self.part - 1 - i) % len(PARTS)) for i in range(past))
        )

    def open_day(self, weekday: int, day: int | None = None) -> None:
        """A day opens this turn on `weekday` (`day`: its number, where the opening names it)."""
        if self.day >= 0:
            self.day_lengths.append(self.turn - self.day_started)
            self.part_lengths[self.part].append(self.turn - self.part_started)
        self.day = self.day + 1 if day is None else day
        self.weekday = weekday
        self.day_started = self.turn
        self.part = 0
        self.part_started = self.turn

    # --- reading ----------------------------------------------------------------------

    def unread(self, episode: ContextEpisode) -> Iterator[Message]:
        """The messages up to the current one not read yet, system prompts skipped; each counts
        as read once it is handed out."""
        messages = episode.conversation.messages
        while self.seen <= episode.current_message.index:
            message = messages[self.seen]
            self.seen += 1
            if message.role != "system":
                yield message

    def read(self, episode: ContextEpisode) -> None:
        now = episode.current_message.index
        for message in self.unread(episode):
            sentences = split_sentences(message.text)
            if message.role == "user":
                self.turn += 1
                opening, opened = self.opening(sentences)
                if opening:
                    counted = re.search(r"\bday (\d+)\b", sentences[opening - 1].lower())
                    self.open_day(opened, int(counted.group(1)) - 1 if counted else None)
                    sentences = sentences[opening:]
                elif sentences and (part := self.opens_part(sentences[0])) is not None:
                    self.open_part(part)
                    sentences = sentences[1:]
                    opening = 1
                self.opened = opening
            found = parse_message(message.index, message.text)
            stated = {message.text[f.start : f.end] for f in found}
            for f in found:
                self.facts[f.key] = f
                self.said_turn[f.key] = self.turn
                sentence = message.text[f.start : f.end]
                subject = self.subjects.setdefault(f.key[0], Subject(f.key[0]))
                subject.owners |= owner_words(sentence, f.key[0])
            if found:
                self.retry_pending()
                self.retry_pending_talk()
            if message.index == now and episode.pending_question is not None:
                continue  # a question's message is read by `again_window`
            for sentence in sentences:
                if sentence not in stated:
                    self.signal(sentence)

    def mentioned(self, sentence: str) -> str | None:
        """The known subject `sentence` mentions (the surest one, if one is surest)."""
        low = sentence.lower()
        scored = sorted(
            ((s.score(sentence), h) for h, s in self.subjects.items() if s.last in low),
            reverse=True,
        )  # every way of mentioning a subject names its head's last word
        if not scored or scored[0][0] < MIN_MENTION:
            return None
        if len(scored) > 1 and scored[1][0] == scored[0][0]:
            return None
        return scored[0][1]

    def signal(self, sentence: str) -> None:
        window = self.window(sentence)
        low = sentence.lower()
        if window is None and not any(re.search(rf"\b{w}\b", low) for w in CLOSE_WORDS):
            if self.talk_turns >= 0:
                self.talk(sentence)
            return
        if not self.apply(sentence, window):
            self.pending.append((self.turn, sentence, window))

    def talk(self, sentence: str) -> None:
        """A sentence with no time and no closure: when it mentions a known subject, the
        subject was talked about with no time of need named; else it waits `PENDING_TURNS`
        turns for its subject."""
        head = self.mentioned(sentence)
        if head is None:
            self.pending_talk.append((self.turn, sentence))
        else:
            self.talked[head] = self.turn

    def retry_pending_talk(self) -> None:
        keep = []
        for turn, sentence in self.pending_talk:
            if self.turn - turn > PENDING_TURNS:
                continue
            head = self.mentioned(sentence)
            if head is None:
                keep.append((turn, sentence))
            else:
                self.talked[head] = max(self.talked.get(head, turn), turn)
        self.pending_talk = keep

    def apply(self, sentence: str, window: tuple[int, int] | None) -> bool:
        """Record a signal about the subject `sentence` mentions; False when none is known."""
        head = self.mentioned(sentence)
        if head is None:
            return False
        subject = self.subjects[head]
        if not subject.owners and (name := subject.named_owner(sentence)) is not None:
            subject.owners.add(name)  # "Ken's van": the van is Ken's from now on
        if window is None:
            self.closed.add(head)
            return True
        for cls in named_properties(sentence, head) or ["*"]:
            self.need[(head, cls)] = window
        self.closed.discard(head)
        return True

    def retry_pending(self) -> None:
        keep = []
        for turn, sentence, window in self.pending:
            if self.turn - turn > PENDING_TURNS:
                continue
            if not self.apply(sentence, window):
                keep.append((turn, sentence, window))
        self.pending = keep

    def recall_cost(self, episode: ContextEpisode, found: Found) -> float:
        """What recalling `found`'s turn would cost, in answer budgets (the rubric's price)."""
        tokens = self.turn_tokens.get(found.message_index)
        if tokens is None:
            messages = episode.conversation.messages
            first = found.message_index
            while first > 1 and messages[first].role != "user":
                first -= 1
            last = found.message_index + 1
            now = episode.current_message.index
            while last <= now and messages[last].role != "user":
                last += 1
            tokens = sum(m.n_tokens for m in messages[first:last])
            if last <= now:  # the turn is complete: remember it
                self.turn_tokens[found.message_index] = tokens
        return recall_latency_s(tokens) / RECALL_SLO_S

    def asked(self, text: str) -> Key | None:
        classes, head, _ = question_parts(text)
        if head is None:
            return None
        allowed = [c for c in classes if c in _kind_classes()[head]]
        known = [c for c in allowed if (head, c) in self.facts]  # a tie: the one read of
        return (head, (known or allowed)[0]) if allowed else None

    def again_window(self, text: str, question: str) -> tuple[int, int] | None:
        """When a question's message says the asked fact will be needed again: a sentence
        other than the question (and the opening of a day or a part of one) that names a
        time."""
        sentences = split_sentences(text)[self.opened :]
        for sentence in sentences:
            if sentence not in question:
                window = self.window(sentence)
                if window is not None:
                    return window
        return None

    # --- acting -----------------------------------------------------------------------

    def estimate(self, key: Key) -> float:
        """Expected turns until the fact is needed, or inf: asked at a turn drawn evenly from
        what is left of its window; once the window has passed, `overdue_turns` plus the turns
        since, and forgotten `grace_days` days after it."""
        head = key[0]
        if head in self.closed:
            return float("inf")
        window = self.need.get(key, self.need.get((head, "*")))
        if window is None:
            return float("inf")
        if isinstance(window, Window):  # a named day and part: read against the day now
            now = self.slot_window(window)
            if now is None:
                since = self.overdue(window)
                if since > self.grace_days * self.day_turns():
                    return float("inf")
                return self.overdue_turns + since
            window = now
        first, last = window
        if self.turn > last + self.grace_days * self.day_turns():
            return float("inf")
        if self.turn < first:
            return (first + last) / 2 - self.turn
        if self.turn < last:
            return (self.turn + 1 + last) / 2 - self.turn
        return self.overdue_turns + self.turn - last

    def __call__(self, episode: ContextEpisode) -> None:
        self.read(episode)
        question = episode.pending_question
        key = self.asked(question.text) if question is not None else None
        if key is not None:
            message = episode.cache.message(episode.cache.n_messages - 1)
            self.need.pop(key, None)
            named = self.again_window(message.text, question.text)
            if named is not None:
                self.need[key] = named
            found = self.facts.get(key)
            if (
                found is not None
                and locate(episode, found.message_index, found.start, found.end) is None
            ):
                text = episode.conversation.messages[found.message_index].text
                episode.recall(text[found.start : found.end])

        def rank(k: Key, f: Found, blocks: int) -> tuple[float, int]:
            if k == key:
                return (-2.0, 0)
            if self.turn - self.said_turn[k] < self.fresh_turns:
                return (-1.0, -f.message_index)
            estimate = self.estimate(k)
            age = self.turn - self.said_turn[k]
            talked = self.talked.get(k[0], -1_000_000) >= self.said_turn[k] - self.talk_turns
            if (
                estimate == float("inf")
                and age <= self.unheard_age
                and k[0] not in self.closed
                and not (self.talk_turns >= 0 and talked)
            ):
                # its signal may still come later in this turn or the next few
                estimate = self.unheard_turns + age * self.unheard_step
            if estimate == float("inf"):  # no named time: after every named one, newest first
                return (float("inf") if k[0] in self.closed else 1e9, -f.message_index)
            if not self.cost_aware:
                return (estimate, -f.message_index)
            # Belady weighed by what a miss costs (the recall of a longer turn costs more) and
            # by the room the fact takes (a sentence over three blocks crowds out three)
            size = blocks if self.size_aware else 1
            return ((estimate + 1) * size / self.recall_cost(episode, f), -f.message_index)

        active = episode.cache.active_flags()
        candidates = []
        for k, f in self.facts.items():
            where = locate(episode, f.message_index, f.start, f.end, active)
            if where is None:
                continue
            blocks = span_blocks(episode, where)
            order = rank(k, f, len(blocks))
            if order[0] != float("inf"):
                candidates.append((order, blocks))
        candidates.sort(key=lambda c: c[0])
        evict_except(episode, fill(episode, [blocks for _, blocks in candidates]))


def signal_reader() -> ContextPolicy:
    return SignalReader()
