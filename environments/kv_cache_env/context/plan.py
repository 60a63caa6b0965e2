"""Planning a conversation before any text is written: which facts are asked about (with their
distractors and updates), the decoys nobody asks about, where each statement is said, and the
shape of every turn. `conversation.generate_conversation` plans, then builds the text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .levels import LevelSpec, QuestionLevel
from .pools import OWNER_NAMES, TEMPLATES, Template


@dataclass(slots=True)
class Fact:
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
class QuestionPlan:
    facts: list[Fact]

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
class Stmt:
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
class Events:
    questions: dict[int, int] = field(default_factory=dict)
    """Turn → question plan index."""
    stmts: dict[int, list[Stmt]] = field(default_factory=dict)
    """Turn → statements said at that turn."""


_MAX_STMTS_PER_TURN = 3


def plan_questions(rng: np.random.Generator, spec: LevelSpec) -> list[QuestionPlan]:
    order = [int(t) for t in rng.permutation(len(TEMPLATES))]
    names = [str(n) for n in rng.permutation(OWNER_NAMES)]
    plans: list[QuestionPlan] = []
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
            fact = Fact(template, owner, values[0])
            if sub == 0 and not two:
                fact.update = values[1] if rng.random() < spec.p_update else None
                if rng.random() < spec.p_distractor:
                    other = names.pop() if owner == "" or rng.random() < 0.5 else ""
                    fact.distractor = (other, values[2])
                fact.in_tool = fact.update is None and rng.random() < spec.p_tool_fact
            facts.append(fact)
        plans.append(QuestionPlan(facts))
    _promise(rng, plans, spec, names)
    return plans


def _promise(
    rng: np.random.Generator, plans: list[QuestionPlan], spec: LevelSpec, names: list[str]
) -> None:
    # (two-fact questions are promised in `plan_questions`)
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


def plan_decoys(
    rng: np.random.Generator, spec: LevelSpec, plans: Sequence[QuestionPlan]
) -> list[Stmt]:
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
    decoys: list[Stmt] = []
    while len(decoys) < spec.n_decoys:
        template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        owner = "" if rng.random() < 0.4 else OWNER_NAMES[int(rng.integers(len(OWNER_NAMES)))]
        key = f"{owner or 'my'}|{template.attr}"
        values = [v for v in template.values if v not in accepted]
        if key in keys or not values:
            continue
        keys.add(key)
        value = values[int(rng.integers(len(values)))]
        decoys.append(Stmt("decoy", owner, template, value))
    return decoys


def place_events(
    rng: np.random.Generator,
    spec: LevelSpec,
    plans: list[QuestionPlan],
    decoys: list[Stmt],
) -> Events:
    """Which turn asks which question and which statements each turn says (turn 0 greets)."""
    gap = spec.min_gap_turns
    for _attempt in range(200):
        ev = Events()

        def room(lo: int, hi: int, ev: Events = ev) -> list[int]:
            return [
                t
                for t in range(max(lo, 1), hi + 1)
                if t not in ev.questions and len(ev.stmts.get(t, [])) < _MAX_STMTS_PER_TURN
            ]

        def put(t: int, stmt: Stmt, ev: Events = ev) -> None:
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
                    put(anchor, Stmt("update", fact.owner, fact.template, fact.update, int(q)))
                    fact_turn = firsts[int(rng.integers(len(firsts)))]
                else:
                    fact_turn = anchor
                put(
                    fact_turn,
                    Stmt("fact", fact.owner, fact.template, fact.value, int(q), sub, host),
                )
                if fact.distractor is not None:
                    spots = room(1, q_turn - 1)
                    if not spots:
                        ok = False
                        break
                    owner, value = fact.distractor
                    put(
                        spots[int(rng.integers(len(spots)))],
                        Stmt("distractor", owner, fact.template, value, int(q), sub),
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
                Stmt(decoy.kind, decoy.owner, decoy.template, decoy.value),
            )
        if ok:
            return ev
    raise AssertionError(f"could not place {len(plans)} questions in {spec.n_turns} turns")


@dataclass(slots=True)
class TurnShape:
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


def shape_turns(rng: np.random.Generator, spec: LevelSpec, events: Events) -> list[TurnShape]:
    """Which turns are small talk, where the reasoning spans and tool outputs go (exactly
    `spec.n_extra` of them), and which host says each statement."""
    shapes = [TurnShape() for _ in range(spec.n_turns)]
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
