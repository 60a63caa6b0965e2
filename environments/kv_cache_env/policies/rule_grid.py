"""The grid of fixed rules that `validate` holds the suite against, built from the observation.

A *one-liner* applies one tool, every turn, to every sequence a single condition selects (or to
all): `swap where pause = tts`, `evict where expected_left >= 9.3`, `compress where usage >=
0.91` (a condition on the header gates the tool for every sequence). A *two-liner* is two
one-liners with different tools, the first's calls first (a sequence the first acts on is left
to it). Conditions come from the rendered fields themselves (`FIELDS`, checked against the
observation's text by a test): each numeric field at its 25th, 50th and 75th percentile on
tuning episodes, both ways (>=, <=); one condition per category of each categorical field (each
tool name, block type, phase, precision, location); and the documented conditional means of the
signal table (`expected_left`: a paused session's expected remaining pause; `eviction_score`:
the candidates' score). The tools are the action table's that take a sequence
(`kv_cache_env.sim.ACTIONS`). Rules act on sequences on the GPU whose KV is not in flight, where
the table's rule accepts the call (`AgentTool.valid_on`: compress while a level is left, swap
where the private blocks fit the free CPU blocks, counted down, largest first); a discarding rule
never preempts a sequence that would free nothing.

`screen` plays every one-liner, and every pair of the best one-liners per tool with different
tools in both orders, on tuning seeds; `validate` then plays the best of them on its proof block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from kv_cache_env.rl.features import expected_left
from kv_cache_env.sim import (
    ACTIONS,
    Action,
    BlockType,
    CpuRoom,
    EntryView,
    Observation,
    PauseKind,
    Phase,
    Quantization,
)
from kv_cache_env.sim.observation import candidate_score

from .base import Policy

Op = Literal[">=", "<=", "="]


def grid_tools() -> tuple[str, ...]:
    """The tools a rule applies: the action table's that take a sequence, in its order."""
    return tuple(tool.name for tool in ACTIONS.targeted)


ENTRY_NUMERIC: dict[str, Callable[[Observation, EntryView], float]] = {
    "prio": lambda o, e: e.priority,
    "tokens": lambda o, e: e.tokens,
    "rate": lambda o, e: e.rate,
    "priv": lambda o, e: e.private_blocks,
    "shared": lambda o, e: e.shared_blocks,
    "frees": lambda o, e: e.frees,
    "out": lambda o, e: e.out,
    "max": lambda o, e: e.budget,
    "last": lambda o, e: e.last_access,
    "xfer": lambda o, e: e.moving,
    "paused": lambda o, e: e.paused_for,
    "n": lambda o, e: e.pauses,
    "pace": lambda o, e: e.pace,
    "left": lambda o, e: e.left,
    "expected_left": lambda o, e: expected_left(e, o.step_seconds),
    "eviction_score": lambda o, e: candidate_score(e),
}
"""Numeric columns of the table, and the signal table's conditional means (last two)."""
ENTRY_CATEGORICAL: dict[str, tuple[Callable[[EntryView], object], tuple[object, ...]]] = {
    "type": (lambda e: e.block_type, tuple(BlockType)),
    "phase": (lambda e: e.phase, tuple(Phase)),
    "kv": (lambda e: e.quantization, tuple(Quantization)),
    "loc": (lambda e: "cpu" if e.swapped else "gpu", ("gpu", "cpu")),
    "pause": (lambda e: e.pause or "-", ("-", *PauseKind)),
}
GLOBAL_NUMERIC: dict[str, Callable[[Observation], float]] = {
    "turn": lambda o: o.turn,
    "block": lambda o: o.block_size,
    "step": lambda o: o.step_seconds,
    "prefill": lambda o: o.prefill,
    "gpu used": lambda o: o.used,
    "capacity": lambda o: o.capacity,
    "usage": lambda o: o.usage,
    "cached": lambda o: o.cached,
    "free": lambda o: o.free,
    "cpu used": lambda o: o.cpu_used,
    "cpu capacity": lambda o: o.cpu_capacity,
    "link": lambda o: o.link,
    "backlog": lambda o: o.backlog,
    "arrivals": lambda o: o.arrivals,
    "queue": lambda o: o.queue.waiting,
    "oldest": lambda o: o.queue.oldest_wait,
    "max wait": lambda o: o.max_wait,
    "head": lambda o: o.queue.head_blocks,
    "demand": lambda o: o.queue.demand_blocks,
    "preempted": lambda o: o.queue.preempted,
    "turns": lambda o: o.turns,
}
"""The header's numbers: a condition on one gates a tool for every sequence."""
FIELDS = frozenset({*ENTRY_NUMERIC, *ENTRY_CATEGORICAL, *GLOBAL_NUMERIC})
NOT_CONDITIONS = {
    "scenario": "a name: a rule of the grid is the same in every scenario (`regime-rule` reads it)",
    "seq": "an id names a sequence, it says nothing about it",
    "candidates": "the candidates' scores are `eviction_score` (hints are off for rules)",
    "waiting": "each waiting request's need: their sum is `demand`, the first's `head`",
}
"""Rendered fields no condition uses, and why."""


@dataclass(frozen=True)
class Condition:
    field: str
    op: Op
    value: float | str

    def __str__(self) -> str:
        value = f"{self.value:g}" if isinstance(self.value, float) else self.value
        return f"{self.field} {self.op} {value}"

    def gate(self, obs: Observation) -> bool | None:
        """For a header field: whether it holds this turn (None for a table field)."""
        read = GLOBAL_NUMERIC.get(self.field)
        return None if read is None else _compare(read(obs), self.op, self.value)

    def holds(self, obs: Observation, entry: EntryView) -> bool:
        if self.field in ENTRY_CATEGORICAL:
            read, _ = ENTRY_CATEGORICAL[self.field]
            return str(read(entry)) == self.value
        return _compare(ENTRY_NUMERIC[self.field](obs, entry), self.op, self.value)


def _compare(x: float, op: Op, value: float | str) -> bool:
    assert not isinstance(value, str)
    return x >= value if op == ">=" else x <= value if op == "<=" else x == value


class OneLiner(Policy):
    """One tool on every sequence that `condition` selects (all of them when None)."""

    def __init__(self, tool: str, condition: Condition | None = None) -> None:
        assert tool in grid_tools(), f"{tool!r} is not a tool that takes a sequence"
        self.tool = tool
        self.condition = condition
        self.name = f"{tool} where {condition}" if condition else f"{tool} all"  # type: ignore[misc]
        self.reads_sessions = condition is not None and condition.field not in GLOBAL_NUMERIC  # type: ignore[misc]

    def act(self, obs: Observation) -> list[Action]:
        return self.act_on(obs, set())

    def act_on(self, obs: Observation, taken: set[str]) -> list[Action]:
        """Its calls this turn, leaving alone the sequences in `taken` (and adding its own)."""
        condition = self.condition
        if condition is not None and condition.gate(obs) is False:
            return []
        entry_condition = condition is not None and condition.field not in GLOBAL_NUMERIC
        tool = ACTIONS[self.tool]
        room = CpuRoom(obs.cpu_room)
        actions: list[Action] = []
        for e in obs.entries:
            if e.seq_id in taken or e.swapped or e.moving:
                continue  # on the GPU, nothing in flight
            if entry_condition and not condition.holds(obs, e):  # type: ignore[union-attr]
                continue
            if not tool.valid_on(e, room) or (tool.discards and e.frees <= 0):
                continue  # (a discard that frees nothing only loses work)
            if tool.needs_cpu_room:
                room.cpu_room -= e.private_blocks
            actions.append(Action(self.tool, e.seq_id))
            taken.add(e.seq_id)
        return actions


class TwoLiner(Policy):
    """Two one-liners with different tools: the first's calls, then the second's on the rest."""

    def __init__(self, first: OneLiner, second: OneLiner) -> None:
        assert first.tool != second.tool, "a two-liner combines two tools"
        self.first, self.second = first, second
        self.name = f"{first.name}; then {second.name}"  # type: ignore[misc]
        self.reads_sessions = first.reads_sessions or second.reads_sessions  # type: ignore[misc]

    def act(self, obs: Observation) -> list[Action]:
        taken: set[str] = set()
        return self.first.act_on(obs, taken) + self.second.act_on(obs, taken)


# --- the grid ----------------------------------------------------------------------------------
def field_values(observations: Iterable[Observation]) -> dict[str, list[float]]:
    """Every numeric field's values over `observations` (entries' over their rows)."""
    values: dict[str, list[float]] = {name: [] for name in (*ENTRY_NUMERIC, *GLOBAL_NUMERIC)}
    for obs in observations:
        for name, read in GLOBAL_NUMERIC.items():
            values[name].append(float(read(obs)))
        for e in obs.entries:
            for name, read_entry in ENTRY_NUMERIC.items():
                values[name].append(float(read_entry(obs, e)))
    return values


def conditions(values: dict[str, list[float]]) -> list[Condition]:
    """The grid's conditions: each numeric field at its 25/50/75th percentiles both ways (a
    percentile repeated, or equal to the field's extreme, counts once), each category."""
    out: list[Condition] = []
    for name, seen in values.items():
        if not seen:
            continue
        lo, hi = min(seen), max(seen)
        for q in dict.fromkeys(round(float(x), 2) for x in np.percentile(seen, (25, 50, 75))):
            if q > lo:
                out.append(Condition(name, ">=", q))
            if q < hi:
                out.append(Condition(name, "<=", q))
    for name, (_, categories) in ENTRY_CATEGORICAL.items():
        out.extend(Condition(name, "=", str(c)) for c in categories)
    return out


def one_liners(grid_conditions: Iterable[Condition]) -> list[OneLiner]:
    """Every tool, on all sequences and under every condition."""
    conds = list(grid_conditions)
    return [OneLiner(tool, c) for tool in grid_tools() for c in (None, *conds)]


def two_liners(best: dict[str, list[OneLiner]]) -> list[TwoLiner]:
    """Every pair of the given one-liners (per tool) with different tools, in both orders."""
    out = []
    for a_tool, firsts in best.items():
        for b_tool, seconds in best.items():
            if a_tool == b_tool:
                continue
            out.extend(TwoLiner(a, b) for a in firsts for b in seconds)
    return out


def quoted_rules() -> list[Policy]:
    """The two rules the suite's brief quotes, from outside prototypes of it."""
    swap_paused = OneLiner("swap", Condition("phase", "=", str(Phase.IDLE)))
    compress_running = OneLiner("compress", Condition("pause", "=", "-"))
    discard_away = OneLiner("evict", Condition("expected_left", ">=", 5.0))
    return [TwoLiner(swap_paused, compress_running), TwoLiner(discard_away, compress_running)]


# --- the grid's regime winners -----------------------------------------------------------------
Line = tuple[str, str, Op, float | str]
"""One line of a grid rule: (tool, field, operator, value), as `Condition` reads it."""

REGIME_WINNERS: tuple[tuple[Line, Line], ...] = (
    (("swap", "phase", "=", "idle"), ("compress", "pause", "=", "-")),
    (("evict", "expected_left", ">=", 5.0), ("compress", "pause", "=", "-")),
    (("compress", "free", "<=", 390.75), ("swap", "phase", "=", "idle")),
    (("compress", "free", "<=", 390.75), ("evict", "phase", "=", "idle")),
    (("evict", "oldest", ">=", 5.0), ("swap", "phase", "=", "idle")),
    (("swap", "phase", "=", "idle"), ("compress", "eviction_score", "<=", 0.39)),
    (("evict", "phase", "=", "idle"), ("compress", "max", "<=", 2048.0)),
)
"""Two-liners of the rule grid that won a regime on tuning seeds (validate's screens on
900000+, the maps on 700000+): the brief's two quoted rules (offload the idle, or discard what is
expected away 5 steps or more; compress the running), and the grid's winners on agent-tools,
medium, hard and slow-prefill. The `expert` knows them as it knows the named rules (rules worth
trying, which it plays out on its sampled futures like any other), and `regime-rule` chooses
among them."""


def grid_rule(first: Line, second: Line) -> Callable[[], Policy]:
    """A factory of the two-liner `first; then second`."""

    def make() -> Policy:
        one, two = (OneLiner(tool, Condition(f, op, v)) for tool, f, op, v in (first, second))
        return TwoLiner(one, two)

    return make


__all__ = [
    "FIELDS",
    "NOT_CONDITIONS",
    "REGIME_WINNERS",
    "Condition",
    "Line",
    "OneLiner",
    "TwoLiner",
    "conditions",
    "field_values",
    "grid_rule",
    "grid_tools",
    "one_liners",
    "quoted_rules",
    "two_liners",
]
