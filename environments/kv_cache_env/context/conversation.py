"""The deterministic long-conversation generator and its answer key (seeds 000 + 001, v2 of
issue 16). It owns the difficulty levels (`LEVELS`), `generate_conversation(seed, level)` and
the turn structure (`turns`). Everything is drawn from `numpy.random.default_rng(seed)`: the
same seed and level give the identical conversation.

Shape of a conversation. Message 0 is the system prompt. Then `n_turns` turns, each

    user  →  [assistant reasoning span]  →  [tool output, up to two]  →  assistant reply

so every user message is answered by the first later assistant message that is not a
reasoning span (`turns`). User messages are topic chat, small talk and questions (kind
`question`) about facts stated at least `min_gap_turns` turns earlier.

Facts are not lexically special (issue 16). A fact statement ("Maria's flight number is LH
418", in one of many wordings, `wording.py`) is said in passing: a sentence inside a user's
chat message (kind `fact`), a line of a notes file a tool prints, or a remark in the
assistant's reasoning. Most statements are never asked about: besides each question's fact
there are distractors (the same attribute of someone else), the stale value of an updated fact
(the update reads like any statement, no announcing phrase) and `n_decoys` details nobody asks
about. Filler carries the same entity types (names, numbers, codes, dates, places; the values
come from the facts' pools) and sometimes names an attribute without a value. Replies never
restate a value and never acknowledge a fact ("Noted!" would mark it).

Answer key. Each `Question` names its key value(s), the candidate values (every value its
templates could take), the answer-bearing statements' spans (`facts`; the current value only)
and its level: `direct`, `distractor` (someone else's value of the same attribute is stated
before the question), `tool` (the fact is a line of a tool output), `updated` (the value was
stated again later; the answer is the latest) or `two_fact` (one question asks two facts).
`Conversation.statements` spans every statement, asked or not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np

from kv_cache_env.context.pools import (
    CHITCHAT_ASSISTANT,
    CHITCHAT_USER,
    FILE_NAMES,
    FOLDERS,
    GREETINGS,
    LOG_EVENTS,
    LOG_SERVICES,
    LOOK_BACK_REPLIES,
    MONTHS,
    NOTE_LINES,
    NOTES_FILES,
    NOTES_REPLIES,
    OWNER_NAMES,
    QUESTION_FORMS,
    QUESTION_LEADS,
    REASONING_QUESTION,
    SYSTEM_PROMPT,
    TEMPLATES,
    TOOL_REPLIES,
    TOOL_REQUESTS,
    TOPIC_SWITCHES,
    TOPICS,
    TWO_FACT_FORMS,
    Template,
    ToolKind,
    Topic,
)
from kv_cache_env.context.tokenizer import count_tokens, tokenize
from kv_cache_env.context.types import (
    BLOCK_SIZE,
    Conversation,
    FactSpan,
    Kind,
    Message,
    Question,
    Role,
)
from kv_cache_env.context.wording import attribute_sentence, entity_sentence, statement

__all__ = [
    "LEVELS",
    "QUESTION_LEVELS",
    "LevelSpec",
    "QuestionLevel",
    "generate_conversation",
    "statement_blocks",
    "total_blocks",
    "turns",
]

QuestionLevel = Literal["direct", "distractor", "tool", "updated", "two_fact"]
QUESTION_LEVELS: tuple[QuestionLevel, ...] = (
    "direct",
    "distractor",
    "tool",
    "updated",
    "two_fact",
)


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """The knobs of one difficulty level. Probabilities are per question; a level whose
    probability for a kind is positive always has at least one question of that kind."""

    n_messages: int
    """Exact number of messages, the system message included."""
    n_turns: int
    """User→assistant turns; the other `n_messages - 1 - 2 * n_turns` messages are reasoning
    spans and tool outputs inside turns."""
    n_questions: int
    """Planted questions, each about distinct fact templates."""
    p_distractor: float
    """Chance that a same-template fact about another owner is stated before the question."""
    p_update: float
    """Chance that the fact is stated again later with a new value (the answer is the latest)."""
    p_tool_fact: float
    """Chance that the fact is a line inside a tool output rather than said in chat."""
    min_gap_turns: int
    """Fact→question distance: at least this many turns from the answer-bearing statement's turn
    to the question's turn (unless the question is a near one, `p_near`)."""
    max_blocks: int
    """Cache budget of an episode, in `BLOCK_SIZE`-token blocks: all statements (asked or not)
    take at least 1.5x of it on hard, more than it on medium, so keeping every fact-shaped
    sentence is not possible; the answer-bearing ones fit with room to spare."""
    n_decoys: int = 0
    """Statements of details nobody asks about (the user's and other people's)."""
    p_near: float = 0.0
    """Chance that a question is asked soon after its fact: within `near_turns` turns instead
    of at least `min_gap_turns` (what any recent window still holds)."""
    near_turns: int = 1
    p_two_fact: float = 0.0
    """Chance that a question asks two facts at once."""
    p_chitchat: float = 0.25
    """Chance that a turn carrying no planted item is small talk rather than topic chat."""
    p_entity: float = 0.6
    """Chance that a chat message carries a sentence with names, numbers, codes or dates."""
    p_attribute: float = 0.15
    """Chance that a chat message names some fact attribute without a value."""
    n_extra: int = field(init=False)
    """Derived: reasoning spans + tool outputs (`n_messages - 1 - 2 * n_turns`)."""

    def __post_init__(self) -> None:
        extra = self.n_messages - 1 - 2 * self.n_turns
        object.__setattr__(self, "n_extra", extra)
        if extra < self.n_questions:
            raise ValueError(f"n_messages={self.n_messages} leaves {extra} extra messages")
        for name in (
            "p_distractor",
            "p_update",
            "p_tool_fact",
            "p_chitchat",
            "p_two_fact",
            "p_entity",
            "p_attribute",
            "p_near",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1]")
        if self.n_questions < 1:
            raise ValueError("n_questions must be positive (and at most the template count)")
        if self.n_turns < 2 * self.n_questions + self.min_gap_turns + 2:
            raise ValueError(f"n_turns={self.n_turns} is too few for the questions and gap")
        if self.max_blocks < 1:
            raise ValueError("max_blocks must be positive")
        if self.n_decoys < 0:
            raise ValueError("n_decoys must not be negative")


LEVELS: Mapping[str, LevelSpec] = MappingProxyType(
    {
        # 40 messages, three direct questions, a few details nobody asks about.
        "easy": LevelSpec(
            n_messages=40,
            n_turns=16,
            n_questions=3,
            p_distractor=0.0,
            p_update=0.0,
            p_tool_fact=0.0,
            min_gap_turns=3,
            max_blocks=40,
            n_decoys=6,
            p_near=0.6,
        ),
        # 60 messages: distractors, an update, a fact in a tool output, a two-fact question;
        # statements take more blocks than the budget.
        "medium": LevelSpec(
            n_messages=60,
            n_turns=23,
            n_questions=4,
            p_distractor=0.5,
            p_update=0.25,
            p_tool_fact=0.25,
            min_gap_turns=4,
            max_blocks=46,
            n_decoys=30,
            p_two_fact=0.2,
            p_near=0.65,
        ),
        # 90 messages: everything, long distances; statements take >= 1.5x the budget.
        "hard": LevelSpec(
            n_messages=90,
            n_turns=33,
            n_questions=6,
            p_distractor=0.6,
            p_update=0.35,
            p_tool_fact=0.35,
            min_gap_turns=5,
            max_blocks=48,
            n_decoys=36,
            p_two_fact=0.25,
            p_near=0.6,
        ),
    }
)
"""The difficulty levels by name: easy | medium | hard."""


def total_blocks(conversation: Conversation, block_size: int = BLOCK_SIZE) -> int:
    """Blocks the whole conversation fills (absolute coordinates: messages back to back)."""
    tokens = sum(m.n_tokens for m in conversation.messages)
    return -(-tokens // block_size)


def statement_blocks(
    conversation: Conversation,
    spans: Sequence[FactSpan] | None = None,
    block_size: int = BLOCK_SIZE,
) -> int:
    """Distinct blocks (absolute coordinates, no recall) that hold `spans` (default: every
    statement): what keeping all of them would cost."""
    starts, total = [], 0
    for m in conversation.messages:
        starts.append(total)
        total += m.n_tokens
    blocks: set[int] = set()
    for span in conversation.statements if spans is None else spans:
        message = conversation.messages[span.message_index]
        pos, first, last = 0, None, None
        for i, piece in enumerate(tokenize(message.text)):
            if pos + len(piece) > span.start and pos < span.end:
                first = i if first is None else first
                last = i
            pos += len(piece)
        if first is None or last is None:
            continue
        base = starts[span.message_index]
        blocks.update(range((base + first) // block_size, (base + last) // block_size + 1))
    return len(blocks)


def turns(conversation: Conversation) -> list[tuple[int, int]]:
    """The user→assistant turns as `(user index, assistant index)`, in order: each user message
    is paired with the first later assistant message that is not a reasoning span. Messages
    between the two (reasoning, tool outputs) belong to the turn. Recalled messages (kind
    `recalled`) are not turns. A user message with no reply is a bug of the generator."""
    messages = conversation.messages
    pairs: list[tuple[int, int]] = []
    for i, message in enumerate(messages):
        if message.role != "user" or message.kind == "recalled":
            continue
        reply = next(
            (j for j in range(i + 1, len(messages)) if _is_reply(messages[j])),
            None,
        )
        assert reply is not None, f"user message {i} has no assistant reply"
        pairs.append((i, reply))
    return pairs


def _is_reply(message: Message) -> bool:
    return message.role == "assistant" and message.kind not in ("reasoning", "recalled")


def generate_conversation(seed: int, level: str) -> Conversation:
    """The conversation and answer key of `seed` at `level` (a key of `LEVELS`)."""
    if level not in LEVELS:
        raise ValueError(f"{level!r} is not a level; choose one of {sorted(LEVELS)}")
    spec = LEVELS[level]
    if spec.n_questions * 2 > len(TEMPLATES):
        raise ValueError(f"{level}: at most {len(TEMPLATES) // 2} questions")
    rng = np.random.default_rng(seed)
    plans = _plan_questions(rng, spec)
    decoys = _plan_decoys(rng, spec, plans)
    events = _place_events(rng, spec, plans, decoys)
    shapes = _shape_turns(rng, spec, events)
    return _Builder(rng, seed, level).build(spec, plans, events, shapes)


# --- planning ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Fact:
    """One fact a question asks about."""

    template: Template
    owner: str
    """"" for the user, else a first name."""
    value: str
    """The first value stated; the answer unless `update` is set."""
    update: str | None = None
    distractor: tuple[str, str] | None = None
    """(owner, value) of a same-template fact about someone else."""
    in_tool: bool = False

    @property
    def answer_value(self) -> str:
        return self.update if self.update is not None else self.value


@dataclass(slots=True)
class _QuestionPlan:
    facts: list[_Fact]

    @property
    def level(self) -> QuestionLevel:
        if len(self.facts) > 1:
            return "two_fact"
        fact = self.facts[0]
        if fact.update is not None:
            return "updated"
        if fact.in_tool:
            return "tool"
        return "distractor" if fact.distractor is not None else "direct"


StmtKind = Literal["fact", "update", "distractor", "decoy"]
Host = Literal["chat", "notes", "reasoning"]


@dataclass(slots=True)
class _Stmt:
    """One statement to say at some turn."""

    kind: StmtKind
    owner: str
    template: Template
    value: str
    question: int = -1
    """Index of the question plan (fact / update / distractor), -1 for a decoy."""
    sub: int = 0
    """Which fact of a two-fact question."""
    host: Host = "chat"

    @property
    def key(self) -> str:
        return f"{self.owner or 'my'}|{self.template.attr}"


@dataclass(slots=True)
class _Events:
    questions: dict[int, int] = field(default_factory=dict)
    """Turn → question plan index."""
    stmts: dict[int, list[_Stmt]] = field(default_factory=dict)
    """Turn → statements said at that turn."""


_MAX_STMTS_PER_TURN = 3


def _plan_questions(rng: np.random.Generator, spec: LevelSpec) -> list[_QuestionPlan]:
    order = [int(t) for t in rng.permutation(len(TEMPLATES))]
    names = [str(n) for n in rng.permutation(OWNER_NAMES)]
    plans: list[_QuestionPlan] = []
    twos = [bool(x) for x in rng.random(spec.n_questions) < spec.p_two_fact]
    if spec.p_two_fact > 0 and not any(twos):  # a level with two-fact questions has one
        twos[int(rng.integers(spec.n_questions))] = True
    while sum(twos) > max(1, spec.n_questions - 3):  # room for an update, a tool fact, ...
        twos[[i for i, t in enumerate(twos) if t][int(rng.integers(sum(twos)))]] = False
    for two in twos:
        facts = []
        for sub in range(2 if two else 1):
            template = TEMPLATES[order.pop()]
            values = [str(v) for v in rng.permutation(template.values)]
            owner = "" if rng.random() < 0.5 else names.pop()
            fact = _Fact(template, owner, values[0])
            if sub == 0 and not two:
                fact.update = values[1] if rng.random() < spec.p_update else None
                if rng.random() < spec.p_distractor:
                    other = names.pop() if owner == "" or rng.random() < 0.5 else ""
                    fact.distractor = (other, values[2])
                fact.in_tool = fact.update is None and rng.random() < spec.p_tool_fact
            facts.append(fact)
        plans.append(_QuestionPlan(facts))
    _promise(rng, plans, spec, names)
    return plans


def _promise(
    rng: np.random.Generator, plans: list[_QuestionPlan], spec: LevelSpec, names: list[str]
) -> None:
    # (two-fact questions are promised in `_plan_questions`)
    """A level with a positive probability of a question kind has at least one of it."""
    singles = [p for p in plans if len(p.facts) == 1]
    facts = [p.facts[0] for p in singles]
    if not facts:
        return
    if spec.p_update > 0 and not any(f.update is not None for f in facts):
        plain = [f for f in facts if not f.in_tool] or facts
        target = plain[int(rng.integers(len(plain)))]
        target.in_tool = False
        taken = {target.value, target.distractor[1] if target.distractor else ""}
        target.update = next(v for v in target.template.values if v not in taken)
    if spec.p_tool_fact > 0 and not any(f.in_tool for f in facts):
        plain = [f for f in facts if f.update is None] or facts
        target = plain[int(rng.integers(len(plain)))]
        target.update = None  # only when every question was updated: the others still are
        target.in_tool = True
    if spec.p_distractor > 0 and not any(f.distractor is not None for f in facts):
        target = facts[int(rng.integers(len(facts)))]
        other = names.pop() if target.owner == "" else ""
        taken = {target.value, target.update}
        target.distractor = (other, next(v for v in target.template.values if v not in taken))


def _plan_decoys(
    rng: np.random.Generator, spec: LevelSpec, plans: Sequence[_QuestionPlan]
) -> list[_Stmt]:
    """`spec.n_decoys` statements nobody asks about: distinct keys, never an asked key, and
    never a value an asked question could accept."""
    keys = {f"{f.owner or 'my'}|{f.template.attr}" for p in plans for f in p.facts}
    keys |= {
        f"{f.distractor[0] or 'my'}|{f.template.attr}"
        for p in plans
        for f in p.facts
        if f.distractor is not None
    }
    accepted = {f.answer_value for p in plans for f in p.facts}
    decoys: list[_Stmt] = []
    while len(decoys) < spec.n_decoys:
        template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        owner = "" if rng.random() < 0.4 else OWNER_NAMES[int(rng.integers(len(OWNER_NAMES)))]
        key = f"{owner or 'my'}|{template.attr}"
        values = [v for v in template.values if v not in accepted]
        if key in keys or not values:
            continue
        keys.add(key)
        value = values[int(rng.integers(len(values)))]
        decoys.append(_Stmt("decoy", owner, template, value))
    return decoys


def _place_events(
    rng: np.random.Generator,
    spec: LevelSpec,
    plans: list[_QuestionPlan],
    decoys: list[_Stmt],
) -> _Events:
    """Which turn asks which question and which statements each turn says (turn 0 greets)."""
    gap = spec.min_gap_turns
    for _attempt in range(200):
        ev = _Events()

        def room(lo: int, hi: int, ev: _Events = ev) -> list[int]:
            return [
                t
                for t in range(max(lo, 1), hi + 1)
                if t not in ev.questions and len(ev.stmts.get(t, [])) < _MAX_STMTS_PER_TURN
            ]

        def put(t: int, stmt: _Stmt, ev: _Events = ev) -> None:
            ev.stmts.setdefault(t, []).append(stmt)

        ok = True
        for q in rng.permutation(len(plans)):
            plan = plans[int(q)]
            need_before = 2 if any(f.update is not None for f in plan.facts) else 1
            q_turns = [t for t in room(gap + need_before, spec.n_turns - 1) if t not in ev.stmts]
            if not q_turns:
                ok = False
                break
            q_turn = q_turns[int(rng.integers(len(q_turns)))]
            ev.questions[q_turn] = int(q)
            near = rng.random() < spec.p_near
            for sub, fact in enumerate(plan.facts):
                if near:
                    anchors = room(max(need_before, q_turn - spec.near_turns), q_turn - 1)
                else:
                    anchors = room(need_before, q_turn - gap)
                if not anchors:
                    ok = False
                    break
                anchor = anchors[int(rng.integers(len(anchors)))]
                host: Host = "notes" if fact.in_tool else "chat"
                if fact.update is not None:
                    firsts = room(1, anchor - 1)
                    if not firsts:
                        ok = False
                        break
                    put(anchor, _Stmt("update", fact.owner, fact.template, fact.update, int(q)))
                    fact_turn = firsts[int(rng.integers(len(firsts)))]
                else:
                    fact_turn = anchor
                put(
                    fact_turn,
                    _Stmt("fact", fact.owner, fact.template, fact.value, int(q), sub, host),
                )
                if fact.distractor is not None:
                    spots = room(1, q_turn - 1)
                    if not spots:
                        ok = False
                        break
                    owner, value = fact.distractor
                    put(
                        spots[int(rng.integers(len(spots)))],
                        _Stmt("distractor", owner, fact.template, value, int(q), sub),
                    )
            if not ok:
                break
        if not ok:
            continue
        for decoy in decoys:
            spots = room(1, spec.n_turns - 1)
            if not spots:
                ok = False
                break
            put(
                spots[int(rng.integers(len(spots)))],
                _Stmt(decoy.kind, decoy.owner, decoy.template, decoy.value),
            )
        if ok:
            return ev
    raise AssertionError(f"could not place {len(plans)} questions in {spec.n_turns} turns")


@dataclass(slots=True)
class _TurnShape:
    """The skeleton of one turn: user message, optional reasoning, tool outputs, reply."""

    chitchat: bool = False
    reasoning: bool = False
    tools: int = 0
    """Tool outputs between the user message and the reply (0–2)."""
    notes: bool = False
    """The first tool output is a notes file (it holds the turn's `notes` statements)."""


_P_TOOL_EXTRA = 0.55
"""Share of the free extra messages that are tool outputs rather than reasoning spans."""
_MAX_TOOLS_PER_TURN = 2
_P_HOST_NOTES = 0.3
"""Chance that a statement not bound to a host is a line of a notes file (if a tool is free)."""
_P_HOST_REASONING = 0.2
"""Chance that such a statement is said in the assistant's reasoning instead."""


def _shape_turns(rng: np.random.Generator, spec: LevelSpec, events: _Events) -> list[_TurnShape]:
    """Which turns are small talk, where the reasoning spans and tool outputs go (exactly
    `spec.n_extra` of them), and which host says each statement."""
    shapes = [_TurnShape() for _ in range(spec.n_turns)]
    extra = spec.n_extra
    for t in range(1, spec.n_turns):
        if t not in events.questions and t not in events.stmts and rng.random() < spec.p_chitchat:
            shapes[t].chitchat = True
    for t, stmts in sorted(events.stmts.items()):
        if any(s.host == "notes" for s in stmts):
            shapes[t].notes, shapes[t].tools = True, 1
            extra -= 1
    for t, stmts in sorted(events.stmts.items()):
        for s in stmts:
            if s.host != "chat":
                continue
            draw = rng.random()
            asked = s.kind in ("fact", "update")  # an asked fact in a notes file is a `tool` one
            if (
                draw < _P_HOST_NOTES
                and not asked
                and (shapes[t].notes or (extra > 0 and shapes[t].tools == 0))
            ):
                if not shapes[t].notes:
                    shapes[t].notes, shapes[t].tools = True, 1
                    extra -= 1
                s.host = "notes"
            elif draw < _P_HOST_NOTES + _P_HOST_REASONING and (shapes[t].reasoning or extra > 0):
                if not shapes[t].reasoning:
                    shapes[t].reasoning = True
                    extra -= 1
                s.host = "reasoning"
    assert extra >= 0, "more statement hosts than extra messages"
    for _ in range(extra):
        tool_turns = [
            t
            for t in range(1, spec.n_turns)
            if t not in events.questions
            and not shapes[t].chitchat
            and shapes[t].tools < _MAX_TOOLS_PER_TURN
        ]
        reasoning_turns = [t for t in range(1, spec.n_turns) if not shapes[t].reasoning]
        if tool_turns and (not reasoning_turns or rng.random() < _P_TOOL_EXTRA):
            shapes[tool_turns[int(rng.integers(len(tool_turns)))]].tools += 1
        else:
            assert reasoning_turns, "no room left for extra messages: n_messages too large"
            shapes[reasoning_turns[int(rng.integers(len(reasoning_turns)))]].reasoning = True
    return shapes


# --- building ------------------------------------------------------------------------------


class _Deck:
    """Draws items without repeats until all have been used, then reshuffles."""

    def __init__(self, rng: np.random.Generator, items: Sequence[str]) -> None:
        assert items, "an empty pool"
        self._rng = rng
        self._items = tuple(items)
        self._order: list[int] = []

    def draw(self) -> str:
        if not self._order:
            self._order = [int(i) for i in self._rng.permutation(len(self._items))]
        return self._items[self._order.pop()]

    def fresh(self) -> Callable[[], str | None]:
        """A drawer for one message: no item twice; None once every item has been used."""
        used: set[str] = set()

        def draw() -> str | None:
            for _ in range(2 * len(self._items)):
                item = self.draw()
                if item not in used:
                    used.add(item)
                    return item
            return None

        return draw


def _fill(deck: _Deck, lo: int, hi: int, rng: np.random.Generator, sep: str = " ") -> str:
    """Distinct items from `deck` joined by `sep` until a target in [lo, hi] tokens is
    reached; see `_fill_parts`."""
    return sep.join(_fill_parts([], deck.fresh(), lo, hi, rng, sep))


def _fill_parts(
    head: list[str],
    draw: Callable[[], str | None],
    lo: int,
    hi: int,
    rng: np.random.Generator,
    sep: str,
) -> list[str]:
    """`head` plus drawn items until the joined text reaches a target drawn in [lo, hi]
    tokens; never above `hi` unless the head (or the first item) is; shorter when `draw` runs
    out (returns None). Counts add up piecewise: a single whitespace `sep` before an item
    starts a fresh token, so the running sum is the count of the joined text."""
    target = int(rng.integers(lo, hi + 1))
    first = None if head else draw()
    parts = [*head] if first is None else [first]
    total = count_tokens(sep.join(parts))
    while total < target:
        item = draw()
        if item is None:
            break
        more = count_tokens(sep + item)
        if total + more > hi:
            break
        parts.append(item)
        total += more
    return parts


def _owner_question(owner: str) -> str:
    return "my" if owner == "" else f"{owner}'s"


def _owner_answer(owner: str) -> str:
    return "your" if owner == "" else f"{owner}'s"


Part = tuple[str, "_Stmt | None"]
"""A piece of a message's text, and the statement it is (None for filler)."""


def _join(parts: Sequence[Part], sep: str) -> tuple[str, list[tuple[_Stmt, int, int]]]:
    """The joined text and each statement's character span in it."""
    text, spans = "", []
    for i, (piece, stmt) in enumerate(parts):
        if i:
            text += sep
        if stmt is not None:
            spans.append((stmt, len(text), len(text) + len(piece)))
        text += piece
    return text, spans


def _insert(rng: np.random.Generator, parts: list[Part], items: Sequence[Part], lo: int) -> None:
    """Insert `items` at random positions of `parts`, none before index `lo`."""
    for item in items:
        parts.insert(int(rng.integers(lo, len(parts) + 1)), item)


class _Builder:
    """Writes the messages of one conversation, turn by turn, from the plan."""

    def __init__(self, rng: np.random.Generator, seed: int, level: str) -> None:
        self.rng = rng
        self.seed = seed
        self.level = level
        self.messages: list[Message] = []
        self.decks: dict[str, _Deck] = {}
        self.introduced: set[str] = set()
        """Topics the user has brought up so far."""
        self.spans: list[tuple[_Stmt, FactSpan]] = []
        self.pools = _entity_pools()
        self.asked_keys: set[str] = set()
        """Keys of asked facts: attribute filler never names them (it would tie the fact)."""

    def deck(self, key: str, items: Sequence[str]) -> _Deck:
        if key not in self.decks:
            self.decks[key] = _Deck(self.rng, items)
        return self.decks[key]

    def add(
        self, role: Role, kind: Kind, text: str, spans: Sequence[tuple[_Stmt, int, int]] = ()
    ) -> int:
        index = len(self.messages)
        keys = tuple(dict.fromkeys(s.key for s, _, _ in spans))
        self.messages.append(Message(index, role, kind, text, max(1, count_tokens(text)), keys))
        self.spans.extend((s, FactSpan(index, a, b)) for s, a, b in spans)
        return index

    def say(self, stmt: _Stmt, where: Host) -> str:
        return statement(self.rng, where, stmt.owner, stmt.template.attr, stmt.value)

    def build(
        self,
        spec: LevelSpec,
        plans: Sequence[_QuestionPlan],
        events: _Events,
        shapes: Sequence[_TurnShape],
    ) -> Conversation:
        rng = self.rng
        self.asked_keys = {f"{f.owner or 'my'}|{f.template.attr}" for p in plans for f in p.facts}
        n_topics = 2 if spec.n_turns < 30 else 3
        topics = [TOPICS[int(i)] for i in rng.choice(len(TOPICS), size=n_topics, replace=False)]
        self.add("system", "system", SYSTEM_PROMPT)
        asked: dict[int, tuple[int, str]] = {}
        for t, shape in enumerate(shapes):
            topic = topics[t * n_topics // spec.n_turns]
            stmts = events.stmts.get(t, [])
            q = events.questions.get(t)
            tools = [ToolKind.NOTES] if shape.notes else []
            tools += [ToolKind(int(rng.integers(3))) for _ in range(shape.tools - len(tools))]
            if t == 0:
                user = f"{self.deck('greet', GREETINGS).draw()} {topic.intro}"
                self.introduced.add(topic.key)
                self.add("user", "chat", user)
            elif q is not None:
                sentence = self.question_sentence(plans[q])
                lead = self.deck("qlead", QUESTION_LEADS).draw()
                index = self.add("user", "question", f"{lead} {sentence}")
                asked[q] = (index, sentence)
            else:
                said = [s for s in stmts if s.host == "chat"]
                self.user_chat(topic, spec, shape, tools, said)
            if shape.reasoning:
                said = [s for s in stmts if s.host == "reasoning"]
                self.reasoning(topic, q is not None, said)
            for tool in tools:
                if tool is ToolKind.NOTES:
                    self.notes([s for s in stmts if s.host == "notes"])
                else:
                    self.add("tool", "tool_output", self.tool_output(topic, tool))
            self.add("assistant", *self.reply(topic, shape, q is not None))
        assert len(self.messages) == spec.n_messages, "turn shapes disagree with n_messages"
        return Conversation(
            self.seed,
            self.level,
            tuple(self.messages),
            self.questions(plans, asked),
            tuple(span for _, span in self.spans),
        )

    def questions(
        self, plans: Sequence[_QuestionPlan], asked: Mapping[int, tuple[int, str]]
    ) -> tuple[Question, ...]:
        out = []
        for q, plan in sorted(enumerate(plans), key=lambda qp: asked[qp[0]][0]):
            facts = []
            for sub, fact in enumerate(plan.facts):
                kind = "update" if fact.update is not None else "fact"
                (span,) = [
                    sp
                    for s, sp in self.spans
                    if s.question == q and s.sub == sub and s.kind == kind
                ]
                facts.append(span)
            answer = " and ".join(
                f"{_owner_answer(f.owner)} {f.template.attr} is {f.answer_value}"
                for f in plan.facts
            )
            out.append(
                Question(
                    message_index=asked[q][0],
                    fact_index=facts[0].message_index,
                    text=asked[q][1],
                    answer=answer,
                    level=plan.level,
                    values=tuple(f.answer_value for f in plan.facts),
                    candidates=tuple(
                        dict.fromkeys(v for f in plan.facts for v in f.template.values)
                    ),
                    facts=tuple(facts),
                )
            )
        return tuple(out)

    # -- user messages

    def user_chat(
        self,
        topic: Topic,
        spec: LevelSpec,
        shape: _TurnShape,
        tools: Sequence[ToolKind],
        said: Sequence[_Stmt],
    ) -> None:
        rng = self.rng
        if shape.chitchat and not said:
            text = _fill(self.deck("chit_user", CHITCHAT_USER), 10, 40, rng)
            self.add("user", "chitchat", text)
            return
        draw = self.deck(f"{topic.key}_user", topic.user).fresh()
        parts: list[Part] = [(p, None) for p in _fill_parts([], draw, 10, 50, rng, " ")]
        extra: list[Part] = []
        if rng.random() < spec.p_entity:
            extra.append((entity_sentence(rng, self.pools), None))
        if rng.random() < spec.p_attribute:
            template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
            owner = "" if rng.random() < 0.5 else OWNER_NAMES[int(rng.integers(len(OWNER_NAMES)))]
            name = OWNER_NAMES[int(rng.integers(len(OWNER_NAMES)))]
            if f"{owner or 'my'}|{template.attr}" not in self.asked_keys:
                extra.append((attribute_sentence(rng, owner, template.attr, name), None))
        extra += [(self.say(s, "chat"), s) for s in said]
        order = [int(i) for i in rng.permutation(len(extra))]
        _insert(rng, parts, [extra[i] for i in order], 0)
        if topic.key not in self.introduced:
            self.introduced.add(topic.key)
            switch = self.deck("switch", TOPIC_SWITCHES).draw()
            parts.insert(0, (f"{switch} {topic.intro}", None))
        if tools:
            request = self.deck(f"ask_{tools[0].name}", TOOL_REQUESTS[tools[0]]).draw()
            parts.append((request, None))
        text, spans = _join(parts, " ")
        self.add("user", "fact" if said else "chat", text, spans)

    def question_sentence(self, plan: _QuestionPlan) -> str:
        if len(plan.facts) == 2:
            a, b = plan.facts
            form = self.deck("qform2", TWO_FACT_FORMS).draw()
            return form.format(
                o1=_owner_question(a.owner),
                a1=a.template.attr,
                o2=_owner_question(b.owner),
                a2=b.template.attr,
            )
        form = self.deck("qform", QUESTION_FORMS).draw()
        fact = plan.facts[0]
        return form.format(owner=_owner_question(fact.owner), attr=fact.template.attr)

    # -- assistant and tool messages

    def reasoning(self, topic: Topic, question: bool, said: Sequence[_Stmt]) -> None:
        rng = self.rng
        if question and not said:
            self.add("assistant", "reasoning", self.deck("reason_q", REASONING_QUESTION).draw())
            return
        draw = self.deck(f"{topic.key}_reason", topic.reasoning).fresh()
        parts: list[Part] = [(p, None) for p in _fill_parts([], draw, 20, 100, rng, " ")]
        _insert(rng, parts, [(self.say(s, "reasoning"), s) for s in said], 0)
        text, spans = _join(parts, " ")
        self.add("assistant", "reasoning", text, spans)

    def reply(self, topic: Topic, shape: _TurnShape, question: bool) -> tuple[Kind, str]:
        rng = self.rng
        if question:
            return "chat", self.deck("lookback", LOOK_BACK_REPLIES).draw()
        if shape.chitchat:
            return "chitchat", _fill(self.deck("chit_asst", CHITCHAT_ASSISTANT), 10, 50, rng)
        prefix = ""
        if shape.notes:
            prefix = self.deck("notes_done", NOTES_REPLIES).draw()
        elif shape.tools:
            prefix = self.deck("tool_done", TOOL_REPLIES).draw()
        room = _CHAT_TOKENS[1] - count_tokens(prefix) - 1
        body = _fill(self.deck(f"{topic.key}_asst", topic.assistant), 20, room, rng)
        return "chat", f"{prefix} {body}".strip()

    def notes(self, said: Sequence[_Stmt]) -> None:
        """A notes file; the turn's `notes` statements are lines of it, among to-do lines."""
        rng = self.rng
        path, title = NOTES_FILES[int(rng.integers(len(NOTES_FILES)))]
        fresh = self.deck("note_line", NOTE_LINES).fresh()

        def line() -> str | None:
            note = fresh()
            return None if note is None else f"- {note}"

        head = [f"$ cat {path}", f"# {title}"]
        parts: list[Part] = [(p, None) for p in _fill_parts(head, line, 40, 150, rng, "\n")]
        _insert(rng, parts, [(self.say(s, "notes"), s) for s in said], 2)
        text, spans = _join(parts, "\n")
        self.add("tool", "tool_output", text, spans)

    def tool_output(self, topic: Topic, kind: ToolKind) -> str:
        if kind is ToolKind.SEARCH:
            return self.search(topic)
        if kind is ToolKind.LISTING:
            return self.listing()
        return self.logs()

    def search(self, topic: Topic) -> str:
        query = self.deck(f"{topic.key}_query", topic.queries).draw()
        fresh = self.deck(f"{topic.key}_result", topic.results).fresh()
        counter = iter(range(1, len(topic.results) + 1))

        def result() -> str | None:
            found = fresh()
            if found is None:
                return None
            title = found.split(" - ", 1)[0]
            slug = "-".join(w for w in "".join(c if c.isalnum() else " " for c in title).split())
            return f"{next(counter)}. {found}\n   https://www.example.org/{slug.lower()}"

        head = [f'search("{query}")']
        return "\n".join(_fill_parts(head, result, *_TOOL_TOKENS, self.rng, "\n"))

    def listing(self) -> str:
        rng = self.rng
        folder = FOLDERS[int(rng.integers(len(FOLDERS)))]
        names = self.deck("file", FILE_NAMES).fresh()

        def line() -> str | None:
            size = int(rng.integers(120, 90000))
            month = MONTHS[int(rng.integers(12))]
            day = int(rng.integers(1, 29))
            name = names()
            return (
                None
                if name is None
                else f"-rw-r--r--  1 dev  staff  {size:>6} {month} {day:>2} {name}"
            )

        return "\n".join(_fill_parts([f"$ ls -l {folder}"], line, *_TOOL_TOKENS, rng, "\n"))

    def logs(self) -> str:
        rng = self.rng
        service = LOG_SERVICES[int(rng.integers(len(LOG_SERVICES)))]
        events = self.deck("log", LOG_EVENTS)  # repeats are fine in a log
        clock = [int(rng.integers(60)), int(rng.integers(60))]  # minute, second

        def line() -> str:
            clock[1] += int(rng.integers(1, 40))
            clock[0], clock[1] = (clock[0] + clock[1] // 60) % 60, clock[1] % 60
            level = ("INFO", "INFO", "INFO", "WARN", "DEBUG")[int(rng.integers(5))]
            stamp = f"2024-05-14 10:{clock[0]:02d}:{clock[1]:02d}"
            return f"{stamp} {level} {service}: {events.draw()}"

        head = [f"$ tail -n 20 /var/log/{service}.log"]
        return "\n".join(_fill_parts(head, line, *_TOOL_TOKENS, rng, "\n"))


def _entity_pools() -> dict[str, tuple[str, ...]]:
    """Slot values of `wording.ENTITY_FILLER`, from the same pools as facts' values."""
    by_attr = {t.attr: t.values for t in TEMPLATES}
    codes = (
        by_attr["locker code"]
        + by_attr["hotel room number"]
        + by_attr["library card number"]
        + by_attr["gym membership number"]
        + by_attr["parking spot"]
        + by_attr["trip budget"]
    )
    return {
        "n": OWNER_NAMES,
        "m": by_attr["manager's name"] + by_attr["emergency contact"],
        "d": by_attr["birthday"] + by_attr["wedding anniversary"],
        "t": ("9:30", "noon", "4:15 pm", "11 am", "half past three"),
        "x": codes,
        "r": by_attr["favourite restaurant"],
        "c": by_attr["hometown"],
        "k": by_attr["project codename"] + by_attr["favourite band"],
    }


_TOOL_TOKENS = (60, 250)
"""Length range of a tool output, in tokens."""
_CHAT_TOKENS = (10, 120)
"""Length range of a chat message, in tokens."""
