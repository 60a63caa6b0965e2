"""What the observation shows of each request: derived from the renderer, not kept by hand.

A request the engine knows is in one of three *roles* by what the observation shows of it:
- **listed**: a row of the table (RUNNING, PAUSED, SWAPPED);
- **queued**: WAITING, shown only as `id:need` on the `waiting:` line and through the header's
  aggregates (how many wait, the oldest wait, the head's need, the preempted count);
- **unlisted**: DISCARDED, FINISHED, FAILED: not in the observation at all.
A fourth, **unarrived**, holds the schedule's requests still to come.

Which fields of the engine's records (`Request`, `FollowUp`, `Sequence`) each role shows is
found by *running the renderer*: `build_observation` and `render` over a few real engine states
(several scenarios, with offloads over a host link, preemptions, discards, failures), on copies
whose records note every attribute read (a tracing subclass swapped in through `__class__`; a
property's reads are reads of the fields it uses). `read_fields(role)` is what the renderer read
for that role; `hidden_fields(role)` the rest. Both are computed once per process
(`functools.cache`).

A call's fields (the first call's `prompt_tokens`, `output_tokens` and `reasoning_tokens` on
`Request`; a further call's pause, prompt and output on its `FollowUp`) are named by the call's
place relative to the call the session is on: `past` (calls before it), `current` (it: its pause
has ended and its prompt arrived; its output is still coming unless the call has completed),
`next` (the call after it: the pause a paused session is in) and `later`. So `Call.pause@next` is
what a paused row waits on, `Call.output_tokens@current` what its `max` and `out` columns come
from.

*Read* is a superset of *determined*: the renderer reads the current call's output but shows only
its `max_tokens` bucket and how much of it is done; it reads a queued request's prompt and prefix
but shows only the blocks they make it need. A field that is read is treated as shown through
what it produces; whoever keeps or redraws it (the expert's worlds, `policies.worlds`) says which
it keeps as it is and which it redraws within what the text shows of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, replace
from functools import cache
from typing import Any, Literal

from .actions import Action, compress, evict, swap
from .observation import build_observation
from .scenario import get_scenario
from .scheduler import Scheduler
from .sequence import Sequence
from .simulator import Simulator
from .text import render
from .vocabulary import Status
from .workload import FollowUp, Request

Role = Literal["listed", "queued", "unlisted", "unarrived"]
ROLES: tuple[Role, ...] = ("listed", "queued", "unlisted", "unarrived")
ROLE_OF: dict[Status, Role] = {
    Status.RUNNING: "listed",
    Status.PAUSED: "listed",
    Status.SWAPPED: "listed",
    Status.WAITING: "queued",
    Status.DISCARDED: "unlisted",
    Status.FINISHED: "unlisted",
    Status.FAILED: "unlisted",
}
"""Each status's role (every status has one: tested)."""

Place = Literal["past", "current", "next", "later"]
PLACES: tuple[Place, ...] = ("past", "current", "next", "later")

FIRST_CALL: tuple[str, ...] = ("prompt_tokens", "output_tokens", "reasoning_tokens")
"""`Request` fields that describe its first call (call 0), named `Call.<field>@<place>`."""
_REQUEST = tuple(f.name for f in fields(Request) if f.name not in FIRST_CALL)
_FOLLOWUP = tuple(f.name for f in fields(FollowUp))
_SEQUENCE = tuple(f.name for f in fields(Sequence))
_CALL = tuple(dict.fromkeys((*_FOLLOWUP, *FIRST_CALL)))


@cache
def record_fields() -> frozenset[str]:
    """Every field of the engine's records: `Request.<f>` (but the first call's), `Call.<f>@<place>`
    (a call's, by its place), `Sequence.<f>`."""
    return frozenset(
        {
            *(f"Request.{n}" for n in _REQUEST),
            *(f"Call.{n}@{p}" for n in _CALL for p in PLACES),
            *(f"Sequence.{n}" for n in _SEQUENCE),
        }
    )


def read_fields(role: Role) -> frozenset[str]:
    """The fields the renderer reads of a request in `role` (module doc)."""
    return _derived()[0][role]


def hidden_fields(role: Role) -> frozenset[str]:
    """The fields the renderer never reads of a request in `role`."""
    return record_fields() - read_fields(role)


def coverage() -> frozenset[str]:
    """The situations the derivation's engine states held (`SITUATIONS` lists those it must)."""
    return _derived()[1]


SITUATIONS: frozenset[str] = frozenset(
    {
        *(f"status:{s}" for s in Status),
        "running:prefill",
        "running:reasoning",
        "running:decode",
        "running:later-call",
        "running:loading",
        "paused:first-call",
        "paused:later-call",
        "listed:history",
        "swapped:moving-out",
        "waiting:fresh",
        "waiting:preempted",
        "waiting:offloaded",
        "waiting:moving-out",
        "waiting:returned",
    }
)
"""What the engine states the derivation runs over must show between them: every status, and
the branches of the renderer (a row in prefill, reasoning, decoding; a resumed call; a session
whose pauses have shown its pace; a load over the link; an offload still moving out; queued
requests fresh, preempted, offloaded, returning)."""


# --- the derivation ----------------------------------------------------------------------------
EPISODES: tuple[tuple[str, int], ...] = (
    ("agent-remote", 5),
    ("chat-human", 3),
    ("hard", 0),
    ("big-cpu", 2),
    ("easy", 4),
)
"""The episodes whose states the renderer is traced on (scenario, seed), `TURNS` turns each,
stirred by `_stir` so that every situation occurs."""
TURNS = 10


@cache
def _derived() -> tuple[dict[Role, frozenset[str]], frozenset[str]]:
    reads: dict[Role, set[str]] = {role: set() for role in ROLES}
    seen: set[str] = set()
    for sim in _states():
        seen |= _situations(sim.engine)
        for hints in (False, True):
            _trace(sim, hints, reads)
    return {role: frozenset(names) for role, names in reads.items()}, frozenset(seen)


def _states() -> Iterator[Simulator]:
    for name, seed in EPISODES:
        sim = Simulator(get_scenario(name), seed)
        for turn in range(TURNS):
            yield sim
            sim.play_turn(_stir(sim, turn))


def _stir(sim: Simulator, turn: int) -> list[Action]:
    """A turn's actions that leave every situation behind: offload the largest paused session,
    discard the next, and offload, preempt or compress a running one in turn. (Some may be
    refused, which changes nothing.)"""
    engine = sim.engine
    paused = [s for s in engine.paused if s.status is Status.PAUSED]
    paused.sort(key=lambda s: (-s.gpu_blocks, s.seq_id))
    running = [s for s in engine.running if not s.inbound]
    actions = [swap(s.seq_id) for s in paused[:1]]
    actions += [evict(s.seq_id) for s in paused[1:2]]
    if running:
        target = (running[-1], running[-1], running[0])[turn % 3]
        actions.append((swap, evict, compress)[turn % 3](target.seq_id))
    return actions


def _situations(engine: Scheduler) -> set[str]:
    out = {f"status:{s.status}" for s in engine.sequences.values()}
    for s in engine.running:
        out.add("running:loading" if s.inbound else f"running:{s.phase}")
        if s.call:
            out.add("running:later-call")
    for s in (*engine.running, *engine.paused):
        if s.pauses_done and s.status is not Status.DISCARDED:
            out.add("listed:history")
    for s in engine.paused:
        if s.status is Status.PAUSED:
            out.add("paused:later-call" if s.call else "paused:first-call")
        elif s.status is Status.SWAPPED and s.outbound:
            out.add("swapped:moving-out")
    for s in engine.waiting:
        if s.outbound:
            out.add("waiting:moving-out")
        elif s.cpu_blocks:
            out.add("waiting:offloaded")
        elif s.preemptions:
            out.add("waiting:preempted")
        if s.call:
            out.add("waiting:returned")
        elif not s.preemptions:
            out.add("waiting:fresh")
    return out


class _Trace:
    """Who owns each traced record (its role and, for a call's fields, the call's place), and
    what was read; `_ACTIVE` while a trace runs."""

    def __init__(self, reads: dict[Role, set[str]]) -> None:
        self.reads = reads
        self.owners: dict[int, tuple[Role, Place | None]] = {}

    def note(self, record: object, kind: str, name: str) -> None:
        owner = self.owners.get(id(record))
        if owner is None:
            return
        role, place = owner
        if kind == "Sequence":
            if name in _SEQUENCE:
                self.reads[role].add(f"Sequence.{name}")
        elif name in (FIRST_CALL if kind == "Request" else _FOLLOWUP):
            self.reads[role].add(f"Call.{name}@{place}")
        elif kind == "Request" and name in _REQUEST:
            self.reads[role].add(f"Request.{name}")


_ACTIVE: list[_Trace] = []


def _traced(cls: type, kind: str) -> type:
    """`cls` whose attribute reads the active trace notes (same slots: a record becomes one by
    `__class__` assignment)."""

    def __getattribute__(self: Any, name: str) -> Any:
        if _ACTIVE:
            _ACTIVE[0].note(self, kind, name)
        return object.__getattribute__(self, name)

    return type(f"_Traced{kind}", (cls,), {"__slots__": (), "__getattribute__": __getattribute__})


_TracedSequence = _traced(Sequence, "Sequence")
_TracedRequest = _traced(Request, "Request")
_TracedFollowUp = _traced(FollowUp, "FollowUp")


def _place(index: int, call: int) -> Place:
    """The place of call `index` relative to the call a session is on."""
    if index < call:
        return "past"
    return "current" if index == call else "next" if index == call + 1 else "later"


def _traced_request(request: Request, role: Role, call: int, trace: _Trace) -> Request:
    """A copy of `request` (and of its follow-ups) whose reads `trace` notes."""
    followups = []
    for i, followup in enumerate(request.followups):
        copy = replace(followup)
        object.__setattr__(copy, "__class__", _TracedFollowUp)
        trace.owners[id(copy)] = (role, _place(i + 1, call))
        followups.append(copy)
    traced = replace(request, followups=tuple(followups))
    object.__setattr__(traced, "__class__", _TracedRequest)
    trace.owners[id(traced)] = (role, _place(0, call))
    return traced


def _trace(sim: Simulator, hints: bool, reads: dict[Role, set[str]]) -> None:
    """Render `sim`'s observation from a copy of its engine whose records note their reads."""
    engine = sim.engine.clone()
    trace = _Trace(reads)
    arrived: dict[str, Request] = {}
    live = {id(s) for s in (*engine.running, *engine.paused, *engine.waiting)}
    for seq_id, seq in list(engine.sequences.items()):
        # (finished and failed records are shared by clones: the clone gets its own copy)
        copy = seq if id(seq) in live else seq.copy()
        engine.sequences[seq_id] = copy
        role = ROLE_OF[copy.status]
        copy.request = arrived[seq_id] = _traced_request(copy.request, role, copy.call, trace)
        copy.__class__ = _TracedSequence
        trace.owners[id(copy)] = (role, None)
    engine._arrivals = [
        [arrived.get(r.seq_id) or _traced_request(r, "unarrived", 0, trace) for r in step]
        for step in engine._arrivals
    ]
    scenario = sim.scenario
    _ACTIVE.append(trace)
    try:
        render(
            build_observation(
                engine,
                turn=sim.turn,
                turns=scenario.steps,
                warmup=scenario.warmup_steps,
                hints=hints,
            )
        )
    finally:
        _ACTIVE.clear()


__all__ = [
    "FIRST_CALL",
    "PLACES",
    "ROLES",
    "ROLE_OF",
    "SITUATIONS",
    "Place",
    "Role",
    "coverage",
    "hidden_fields",
    "read_fields",
    "record_fields",
]
