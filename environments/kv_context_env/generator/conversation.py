"""The deterministic long-conversation generator and its answer key. It owns
`generate_conversation(seed, level)`: it plans (`plan.py`: subjects, facts, asks, updates,
signals), then writes every message (here, with `wording.py` and the lexicon's filler), and the
turn structure (`turns`). Everything comes from `numpy.random.default_rng(seed)`: the same seed
and level give the identical conversation.

Shape. Message 0 is the system prompt; then `n_turns` turns, each

    user  →  [assistant reasoning]  →  [tool outputs]  →  assistant reply

Days vary in length and their parts in turns (`calendar`); a day's first user message names the
weekday, a part's first one says it has come ("Later that afternoon."). A question turn holds a
user question (sometimes with "remember that, it comes up again on Friday" or small talk, before
or after it) and a short reply. Other turns carry the plan's statements and signals among filler:
statements in the user's chat, in a notes file or an e-mail the assistant opens, or in its
reasoning; plans and reminders in chat, an e-mail or the assistant's reply, composed by
`signal_text`; to-dos in notes; calendar lines in a calendar listing; recurring mentions and
closures in chat. A user message that asks for a tool says which one. On medium and hard a
plan whose live load peaks under the level's floor is redrawn (`MAX_DRAWS`).

Answer key. Each `Question` names the current value when it is asked, the answer-bearing
statement (`facts`), the fact's key, its level (`soon`: asked within a few turns; `later`: asked
days later; `again`: a later ask of the same fact; `updated`: asked after the value changed),
and the candidates: every value of the same class said anywhere in the conversation (other
facts', stale ones, filler's), so naming any of them is a wrong answer.
`Conversation.facts` is the ground-truth statement list; `Conversation.signals` lists every
signal with its normalized form (for the phrasing-novelty figure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kv_context_env.tokenizer import count_tokens
from kv_context_env.vocabulary import (
    Conversation,
    FactSpan,
    Kind,
    Message,
    Question,
    Role,
    SignalSpan,
    Statement,
)

from .blocks import statement_blocks, total_blocks
from .levels import LEVELS, LevelSpec
from .lexicon import Lexicon, lexicon
from .load import live_load
from .plan import FIRST_SIGNAL_KINDS, Fact, Signal, World, plan_world
from .signal_text import SignalText, Worded
from .valuegen import ValueDraw
from .wording import Wording

__all__ = [
    "LEVELS",
    "LevelSpec",
    "generate_conversation",
    "statement_blocks",
    "total_blocks",
    "turns",
]

SYSTEM_PROMPT = (
    "You are a helpful assistant in a long-running chat with one user who is juggling errands, "
    "bookings and projects over several days. Use the tools when asked, and when the user "
    "asks about something from earlier, answer from the conversation itself."
)
HOSTS = ("chat",) * 10 + ("notes",) * 4 + ("email",) * 4 + ("reasoning",)
"""Where a statement is said, by weight."""
TOOL_REQUESTS = {
    "notes": "Can you pull up my notes?",
    "email": "Could you check my inbox?",
    "calendar": "Can you look at my calendar?",
    "search": "Can you search for that?",
    "logs": "Can you check the sync log?",
}


def turns(conversation: Conversation) -> list[tuple[int, int]]:
    """The user→assistant turns as `(user index, assistant index)`, in order: each user message
    is paired with the first later assistant message that is not a reasoning span."""
    messages = conversation.messages
    pairs: list[tuple[int, int]] = []
    for i, message in enumerate(messages):
        if message.role != "user" or message.kind == "recalled":
            continue
        reply = next(
            (
                j
                for j in range(i + 1, len(messages))
                if messages[j].role == "assistant"
                and messages[j].kind not in ("reasoning", "recalled")
            ),
            None,
        )
        assert reply is not None, f"user message {i} has no assistant reply"
        pairs.append((i, reply))
    return pairs


def generate_conversation(seed: int, level: str) -> Conversation:
    """The conversation and answer key of `seed` at `level` (a key of `LEVELS`)."""
    if level not in LEVELS:
        raise ValueError(f"{level!r} is not a level; choose one of {sorted(LEVELS)}")
    spec = LEVELS[level]
    rng = np.random.default_rng(seed)
    lex = lexicon()
    best: tuple[float, Conversation] | None = None
    for _ in range(MAX_DRAWS):  # redraw (same rng, so still one conversation per seed)
        planner_world = plan_world(rng, spec, lex)
        conversation = _Builder(rng, seed, level, spec, lex, planner_world).build()
        if spec.min_peak_load <= 0:
            return conversation
        peak = live_load(conversation).peak_tokens
        if peak >= spec.min_peak_load:
            return conversation
        if best is None or peak > best[0]:
            best = (peak, conversation)
    assert best is not None
    return best[1]


@dataclass(frozen=True, slots=True)
class _SignalTag:
    cue: str
    key: str
    form: str


MAX_DRAWS = 20
"""Plans drawn at most for a seed whose live load stays under the level's floor (the one with
the highest peak is kept then; none of the seeds tried needed more than a few)."""
Part = tuple[str, "tuple[Fact, int] | _SignalTag | None"]
"""A piece of a message and the statement it is (fact, value index), the signal it is, or
None."""
HOST_WEIGHTS = {"chat": 0.55, "assistant": 0.25, "email": 0.2}
"""Where a plan or reminder is said (to-dos go to notes, calendar lines to the calendar)."""


class _Builder:
    def __init__(
        self,
        rng: np.random.Generator,
        seed: int,
        level: str,
        spec: LevelSpec,
        lex: Lexicon,
        world: World,
    ) -> None:
        self.rng = rng
        self.seed = seed
        self.level = level
        self.spec = spec
        self.lex = lex
        self.world = world
        self.first_weekday = int(rng.integers(7))
        self.say = Wording(rng, lex, self.first_weekday)
        self.signal_text = SignalText(rng, lex, world.calendar, self.first_weekday)
        self.signal_spans: list[SignalSpan] = []
        self.values = ValueDraw(rng, lex)
        self.messages: list[Message] = []
        self.located: dict[tuple[int, int], FactSpan] = {}
        """(fact id, value index) → where it was said."""
        self.filler_values: dict[str, set[str]] = {}
        """Values of filler sentences by class (wrong answers for that class)."""
        self.recent: dict[str, list[str]] = {}

    def pick(self, items: Sequence[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def fresh(self, key: str, items: Sequence[str]) -> str:
        """An item not among the last few drawn for `key` (no sentence twice in a row)."""
        recent = self.recent.setdefault(key, [])
        choices = [x for x in items if x not in recent] or list(items)
        item = self.pick(choices)
        recent.append(item)
        del recent[: max(0, len(recent) - min(4, len(items) - 1))]
        return item

    def add(self, role: Role, kind: Kind, parts: Sequence[Part], sep: str = " ") -> int:
        index = len(self.messages)
        text = ""
        keys: list[str] = []
        for i, (piece, stated) in enumerate(parts):
            if i:
                text += sep
            if isinstance(stated, _SignalTag):
                span = FactSpan(index, len(text), len(text) + len(piece))
                self.signal_spans.append(SignalSpan(span, stated.cue, stated.key, stated.form))
            elif stated is not None:
                fact, value = stated
                self.located[(fact.id, value)] = FactSpan(index, len(text), len(text) + len(piece))
                keys.append(fact.key)
            text += piece
        tokens = max(1, count_tokens(text))
        self.messages.append(Message(index, role, kind, text, tokens, tuple(dict.fromkeys(keys))))
        return index

    # ------------------------------------------------------------------------------ build

    def build(self) -> Conversation:
        spec, world = self.spec, self.world
        facts = {f.id: f for f in world.facts}
        statements: dict[int, list[tuple[Fact, int]]] = {}
        signals: dict[int, list[tuple[Fact, Signal]]] = {}
        again: dict[int, tuple[Fact, Signal]] = {}
        for fact in world.facts:
            for i, turn in enumerate(fact.said):
                statements.setdefault(turn, []).append((fact, i))
            for signal in fact.signals:
                if signal.kind == "again":
                    again[signal.turn] = (fact, signal)
                    continue
                signals.setdefault(signal.turn, []).append((fact, signal))
        threads = sorted({f.subject.kind.thread for f in world.facts})
        self.add("system", "system", [(SYSTEM_PROMPT, None)])
        asked: list[tuple[int, int, str, Fact]] = []
        for turn in range(spec.n_turns):
            thread = threads[min(len(threads) - 1, turn * len(threads) // spec.n_turns)]
            opening = self.opening(turn)
            if turn in world.questions:
                fact = facts[world.questions[turn]]
                index, text = self.question_turn(turn, fact, opening, again.get(turn))
                asked.append((index, turn, text, fact))
            else:
                self.turn(turn, thread, opening, statements.get(turn, []), signals.get(turn, []))
        return Conversation(
            self.seed,
            self.level,
            tuple(self.messages),
            self.questions(asked),
            tuple(self.located[(f.id, i)] for f in world.facts for i in range(len(f.values))),
            tuple(
                Statement(self.located[(f.id, i)], f.key, f.values[i], f.prop.value_class, i)
                for f in world.facts
                for i in range(len(f.values))
            ),
            tuple(self.signal_spans),
        )

    def opening(self, turn: int) -> str | None:
        """What a user message opens with when a day or a part of one begins at `turn`."""
        calendar = self.world.calendar
        if calendar.opens_day(turn):
            return self.say.day_start(calendar.day(turn))
        if calendar.opens_part(turn):
            return self.say.part_start(calendar.part(turn))
        return None

    def question_turn(
        self, turn: int, fact: Fact, opening: str | None, again: tuple[Fact, Signal] | None
    ) -> tuple[int, str]:
        """The question turn's messages; (the question's message index, its question)."""
        spec, rng = self.spec, self.rng
        question = self.say.question(fact)
        body: list[Part] = [(question, None)]
        if again is not None:  # before or after the question (`p_again_first`)
            worded = self.signal_text.again(again[1], turn)
            tagged: Part = (worded.text, _SignalTag("again", fact.key, worded.form))
            body.insert(0 if rng.random() < spec.p_again_first else len(body), tagged)
        if rng.random() < spec.p_question_filler:  # small talk on either side
            aside = (self.fresh("question-aside", self.lex.text("speech", "question_asides")), None)
            body.insert(0 if rng.random() < 0.5 else len(body), aside)
        parts: list[Part] = [(opening, None), *body] if opening else body
        index = self.add("user", "question", parts)
        self.add(
            "assistant",
            "chat",
            [(self.fresh("lookback", self.lex.text("speech", "lookback")), None)],
        )
        return index, question

    def turn(
        self,
        turn: int,
        thread: str,
        opening: str | None,
        said: list[tuple[Fact, int]],
        signals: list[tuple[Fact, Signal]],
    ) -> None:
        rng, lex = self.rng, self.lex
        topic = lex.raw["threads"][thread]
        hosted: dict[str, list[Part]] = {
            h: [] for h in ("chat", "notes", "email", "reasoning", "calendar")
        }
        for fact, index in said:
            host = self.pick(HOSTS)
            hosted[host].append((self.say.statement(fact, index, host), (fact, index)))
        hosted["assistant"] = []
        for fact, signal in signals:
            host, worded, cue = self.signal(fact, signal, turn, topic)
            hosted[host].append((worded.text, _SignalTag(cue, fact.key, worded.form)))
        tools = [h for h in ("notes", "email", "calendar") if hosted[h]]
        if not tools and rng.random() < 0.2:
            tools = ["search" if rng.random() < 0.5 else "logs"]
        # the user's message
        filler: list[Part] = []
        lo, hi = self.spec.filler
        for _ in range(int(rng.integers(lo, hi + 1))):
            pool = topic["user"] if rng.random() < 0.8 else lex.raw["small_talk"]["user"]
            filler.append((self.fresh(f"user-{thread}", pool), None))
        if rng.random() < 0.3:
            text, values = self.say.entity_filler(self.values)
            for cls, value in values.items():
                self.filler_values.setdefault(cls, set()).add(value)
            filler.append((text, None))
        items = filler + hosted["chat"]
        parts: list[Part] = [items[int(i)] for i in rng.permutation(len(items))]
        if turn == 0:
            parts.insert(0, (f"Hi! {topic['intro']}", None))
        if opening:
            parts.insert(0, (opening, None))
        if not parts:
            parts.append((self.fresh(f"user-{thread}", topic["user"]), None))
        if tools:
            parts.append(
                (
                    TOOL_REQUESTS[tools[0]]
                    if len(tools) == 1
                    else "Can you check a couple of things?",
                    None,
                )
            )
        self.add("user", "chat", parts)
        if hosted["reasoning"] or rng.random() < 0.15:
            self.add(
                "assistant",
                "reasoning",
                [(self.fresh(f"reason-{thread}", topic["reasoning"]), None), *hosted["reasoning"]],
            )
        for tool in tools:
            self.tool(tool, thread, hosted.get(tool, []))
        reply: list[Part] = (
            [(self.fresh("tool-reply", lex.text("tools", "replies")), None)] if tools else []
        )
        for _ in range(int(rng.integers(1, 3))):
            pool = topic["assistant"] if rng.random() < 0.8 else lex.raw["small_talk"]["assistant"]
            reply.append((self.fresh(f"assistant-{thread}", pool), None))
        for said_back in hosted["assistant"]:
            reply.insert(int(rng.integers(len(reply) + 1)), said_back)
        self.add("assistant", "chat", reply)

    def signal(
        self, fact: Fact, signal: Signal, turn: int, topic: dict[str, list[str]]
    ) -> tuple[str, Worded, str]:
        """(host, wording, cue class) of a planned signal: to-dos in notes, calendar lines in
        the calendar, plans and reminders in chat, an e-mail or the assistant's reply."""
        text = self.signal_text
        if signal.kind == "mention":
            return "chat", text.plain(fact, "recur", self.fresh("join", topic["user"])), "recur"
        if signal.kind == "close":
            return "chat", text.plain(fact, "close", self.fresh("join", topic["user"])), "close"
        if signal.kind == "aside":  # hosted as a first signal is, naming no time
            kind = self.pick(FIRST_SIGNAL_KINDS)
            host = {"todo": "notes", "calendar": "calendar"}.get(kind) or self.signal_host()
            filler = self.fresh("join", topic["user"]) if host == "chat" else None
            return host, text.aside(fact, host, filler), "recur"
        if signal.kind in ("todo", "calendar"):
            host = "notes" if signal.kind == "todo" else "calendar"
            return host, text.need(fact, signal, turn, host, None), "need"
        host = self.signal_host()
        filler = self.fresh("join", topic["user"]) if host == "chat" else None
        return host, text.need(fact, signal, turn, host, filler), "need"

    def signal_host(self) -> str:
        """Where a plan or reminder is said, by `HOST_WEIGHTS`."""
        hosts = list(HOST_WEIGHTS)
        return hosts[int(self.rng.choice(len(hosts), p=list(HOST_WEIGHTS.values())))]

    def tool(self, tool: str, thread: str, lines: list[Part]) -> None:
        rng, lex = self.rng, self.lex
        names = lex.raw["names"]
        if tool == "notes":
            body = lines + [
                (f"- {self.fresh('log', lex.text('tools', 'log_lines'))}", None)
                for _ in range(int(rng.integers(1, 3)))
            ]
            order = [body[int(i)] for i in rng.permutation(len(body))]
            self.add(
                "tool",
                "tool_output",
                [(f"$ cat ~/notes/{thread}.md", None), (f"# {thread} notes", None), *order],
                "\n",
            )
        elif tool == "email":
            sender = f"{self.pick(names['first'])} {self.pick(names['surnames'])}"
            head = [
                ("$ mail --show latest", None),
                (f"From: {sender}", None),
                ("Subject: a few details", None),
            ]
            greeting = (self.pick(["Hi,", "Hello,", "Hi there,"]), None)
            sign = (f"{self.pick(['Best,', 'Thanks,', 'Cheers,'])} {sender.split()[0]}", None)
            self.add("tool", "tool_output", [*head, greeting, *lines, sign], "\n")
        elif tool == "calendar":
            self.add("tool", "tool_output", [("$ cal --week", None), *lines], "\n")
        elif tool == "search":
            query = self.pick(lex.text("tools", "search_queries"))
            results = [
                (f"{i + 1}. {self.fresh('result', lex.text('tools', 'search_results'))}", None)
                for i in range(int(rng.integers(2, 5)))
            ]
            self.add("tool", "tool_output", [(f'search("{query}")', None), *results], "\n")
        else:
            stamps = [
                (
                    f"10:{int(rng.integers(60)):02d} INFO "
                    f"{self.pick(lex.text('tools', 'log_lines'))}",
                    None,
                )
                for _ in range(int(rng.integers(2, 6)))
            ]
            self.add("tool", "tool_output", [("$ tail -n 5 sync.log", None), *stamps], "\n")

    def questions(self, asked: list[tuple[int, int, str, Fact]]) -> tuple[Question, ...]:
        out = []
        seen: dict[int, int] = {}
        for index, turn, text, fact in asked:
            current = fact.value_at(turn)
            span = self.located[(fact.id, current)]
            n = seen.get(fact.id, 0)
            seen[fact.id] = n + 1
            level = (
                "soon"
                if fact.role == "soon"
                else "updated"
                if current > 0
                else "again"
                if n
                else "later"
            )
            cls = fact.prop.value_class
            candidates = {
                v for f in self.world.facts if f.prop.value_class == cls for v in f.values
            }
            candidates |= self.filler_values.get(cls, set())
            out.append(
                Question(
                    message_index=index,
                    fact_index=span.message_index,
                    text=text,
                    answer=f"{fact.subject.full} {fact.prop.nouns[0]}: {fact.values[current]}",
                    level=level,
                    values=(fact.values[current],),
                    candidates=tuple(sorted(candidates)),
                    facts=(span,),
                    key=fact.key,
                )
            )
        return tuple(out)
