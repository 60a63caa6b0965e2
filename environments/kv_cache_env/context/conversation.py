"""The deterministic long-conversation generator and its answer key (seeds 000 + 001, v2 of
issue 16). It owns `generate_conversation(seed, level)`, which plans (`plan.py`: facts,
distractors, updates, decoys, turn shapes) and then writes the text (here, from the pools of
`pools.py`), and the turn structure (`turns`); the difficulty levels are in `levels.py`
(re-exported here as `LEVELS`). Everything is drawn from `numpy.random.default_rng(seed)`: the
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

import numpy as np

from kv_cache_env.context.levels import LEVELS, QUESTION_LEVELS, LevelSpec, QuestionLevel
from kv_cache_env.context.plan import (
    Events,
    Host,
    QuestionPlan,
    Stmt,
    TurnShape,
    place_events,
    plan_decoys,
    plan_questions,
    shape_turns,
)
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
    plans = plan_questions(rng, spec)
    decoys = plan_decoys(rng, spec, plans)
    events = place_events(rng, spec, plans, decoys)
    shapes = shape_turns(rng, spec, events)
    return _Builder(rng, seed, level).build(spec, plans, events, shapes)


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


Part = tuple[str, "Stmt | None"]
"""A piece of a message's text, and the statement it is (None for filler)."""


def _join(parts: Sequence[Part], sep: str) -> tuple[str, list[tuple[Stmt, int, int]]]:
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
        self.spans: list[tuple[Stmt, FactSpan]] = []
        self.pools = _entity_pools()
        self.asked_keys: set[str] = set()
        """Keys of asked facts: attribute filler never names them (it would tie the fact)."""

    def deck(self, key: str, items: Sequence[str]) -> _Deck:
        if key not in self.decks:
            self.decks[key] = _Deck(self.rng, items)
        return self.decks[key]

    def add(
        self, role: Role, kind: Kind, text: str, spans: Sequence[tuple[Stmt, int, int]] = ()
    ) -> int:
        index = len(self.messages)
        keys = tuple(dict.fromkeys(s.key for s, _, _ in spans))
        self.messages.append(Message(index, role, kind, text, max(1, count_tokens(text)), keys))
        self.spans.extend((s, FactSpan(index, a, b)) for s, a, b in spans)
        return index

    def say(self, stmt: Stmt, where: Host) -> str:
        return statement(self.rng, where, stmt.owner, stmt.template.attr, stmt.value)

    def build(
        self,
        spec: LevelSpec,
        plans: Sequence[QuestionPlan],
        events: Events,
        shapes: Sequence[TurnShape],
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
        self, plans: Sequence[QuestionPlan], asked: Mapping[int, tuple[int, str]]
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
        shape: TurnShape,
        tools: Sequence[ToolKind],
        said: Sequence[Stmt],
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

    def question_sentence(self, plan: QuestionPlan) -> str:
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

    def reasoning(self, topic: Topic, question: bool, said: Sequence[Stmt]) -> None:
        rng = self.rng
        if question and not said:
            self.add("assistant", "reasoning", self.deck("reason_q", REASONING_QUESTION).draw())
            return
        draw = self.deck(f"{topic.key}_reason", topic.reasoning).fresh()
        parts: list[Part] = [(p, None) for p in _fill_parts([], draw, 20, 100, rng, " ")]
        _insert(rng, parts, [(self.say(s, "reasoning"), s) for s in said], 0)
        text, spans = _join(parts, " ")
        self.add("assistant", "reasoning", text, spans)

    def reply(self, topic: Topic, shape: TurnShape, question: bool) -> tuple[Kind, str]:
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

    def notes(self, said: Sequence[Stmt]) -> None:
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
