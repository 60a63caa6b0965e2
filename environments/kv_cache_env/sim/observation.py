"""What the agent sees each turn: a structured `Observation` built from the engine.

Every field is at the precision the text rendering shows (integers, 2-decimal floats), so the
text form (`text.py`) rebuilds it exactly: a policy served over HTTP sees only the text and must
decide the same. Entries are ranked by the GPU memory they cost, largest first.

Without hints, `Simulator.observe` builds the entries table lazily (`Table`): a policy that reads
only usage and the queue (`lru` when nothing needs freeing: 3,475 of 3,541 turns of the Mooncake
replay) never builds it. The table equals the eager one in every use; see `Table` for the one
rule that keeps it so.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple

from .engine import Engine
from .frozen import slot_constructor
from .types import EVICTION_VALUE, BlockType, PauseKind, Phase, Quantization, Status

CANDIDATES_SHOWN = 5


class EntryView(NamedTuple):
    """One sequence holding KV blocks: computing on the GPU, or a session paused between two
    calls with its KV on the GPU or offloaded to CPU."""

    seq_id: str
    block_type: BlockType
    phase: Phase
    priority: float
    quantization: Quantization
    tokens: int
    """Tokens whose KV is held."""
    rate: int
    """Tokens it generates per step while decoding (token_gen_rate)."""
    private_blocks: int
    """Its own physical blocks (on CPU when swapped)."""
    shared_blocks: int
    """Shared prefix blocks it references."""
    frees: int
    """GPU blocks that become available if it is evicted now."""
    progress: float
    """Generated / target output tokens."""
    last_access: int
    """Turn on which its KV was last read (negative = during warm-up)."""
    swapped: bool
    """Its KV is on CPU (a paused session that was offloaded)."""
    pause: PauseKind | None = None
    """What a paused session waits on (None when it is computing). A real scheduler knows this
    (the model emitted a tool call, or answered a human); it never knows when the call returns."""
    paused_for: int = 0
    """Steps it has been paused so far (0 when computing)."""
    moving: int = 0
    """Blocks still to cross the host link for it: out to CPU when `swapped` (its GPU blocks
    stay until then), else loading back before it can compute (0: nothing in flight)."""

    @property
    def paused(self) -> bool:
        return self.pause is not None

    @property
    def gpu_cost(self) -> int:
        """GPU blocks it holds (an offload in flight holds what the link has not moved yet)."""
        if self.swapped:
            return self.moving + (self.shared_blocks if self.moving else 0)
        return self.private_blocks + self.shared_blocks


class QueueView(NamedTuple):
    waiting: int
    oldest_wait: int
    """Steps the longest-waiting request has waited (it fails past `max_wait`)."""
    head_blocks: int
    """Blocks the next admissible request needs, net of prefix hits (0 if none)."""
    demand_blocks: int
    """Blocks all waiting requests need together, net of prefix hits cached now."""
    preempted: int
    """Waiting requests that were preempted and will recompute on readmission."""


class Candidate(NamedTuple):
    seq_id: str
    score: float
    """Eviction desirability in [0, 1]: block-type eviction value discounted by priority and
    progress. Higher = cheaper to evict."""


@dataclass(frozen=True, slots=True)
class Observation:
    turn: int
    turns: int
    block_size: int
    """Tokens per fp16 block (int8 packs 2x, int4 4x as many per block)."""
    capacity: int
    used: int
    """GPU blocks in use (private + shared prefix blocks with references)."""
    cached: int
    """Cached prefix blocks with no reference: reusable on a hit, reclaimable at will."""
    cpu_used: int
    cpu_capacity: int
    link: int
    """Blocks the host link moves per step, offloads and loads together (0: no limit)."""
    backlog: int
    """Blocks queued on the host link, first come first served."""
    max_wait: int
    queue: QueueView | Queue
    """A `QueueView` (or a `Queue` that behaves as one)."""
    entries: tuple[EntryView, ...] | Table
    """Every sequence holding KV (a tuple, or a `Table` that behaves as one)."""
    candidates: tuple[Candidate, ...] | None
    """Pre-scored eviction candidates, best first; None when hints are off."""

    @property
    def usage(self) -> float:
        return self.used / self.capacity

    @property
    def free(self) -> int:
        return self.capacity - self.used - self.cached

    @property
    def available(self) -> int:
        """Blocks an allocation could take now (free + cached)."""
        return self.capacity - self.used

    def entry(self, seq_id: str) -> EntryView | None:
        return next((e for e in self.entries if e.seq_id == seq_id), None)


_make_observation = slot_constructor(Observation)


def candidate_score(entry: EntryView) -> float:
    value = EVICTION_VALUE[entry.block_type]
    return round(value * (1 - entry.priority / 2) * (1 - entry.progress / 2), 2)


class _Deferred:
    """Behaves as the value it builds on first use (`settle` builds it): indexed, iterated,
    compared, hashed and printed as that value. `Table` and `Queue` defer their values."""

    __slots__ = ()

    def settle(self) -> Any:
        """Build it now (its engine is about to change); returns the value."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.settle())

    def __getitem__(self, index: Any) -> Any:
        return self.settle()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.settle())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Deferred):
            other = other.settle()
        return bool(self.settle() == other)

    def __hash__(self) -> int:
        return hash(self.settle())

    def __repr__(self) -> str:
        return repr(self.settle())


class Table(_Deferred, Sequence[EntryView]):
    """`Observation.entries`, built on first use from the engine it was observed on: the same
    tuple `build_observation` builds eagerly (equal, hashed, printed and pickled as that tuple).

    It must be built before that engine changes, or it would show the new state: its owner
    (`Simulator`, which changes its engine only in `apply` and `step`) keeps a weak reference
    and builds every table still alive before any change (`settle`). A table nobody holds any
    more (the observation a policy read and dropped) is never built: that is the saving."""

    __slots__ = ("__weakref__", "_engine", "_rows", "_warmup")

    def __init__(self, engine: Engine, warmup: int) -> None:
        self._engine: Engine | None = engine
        self._warmup = warmup
        self._rows: tuple[EntryView, ...] | None = None

    def rows(self) -> tuple[EntryView, ...]:
        rows = self._rows
        if rows is None:
            assert self._engine is not None
            rows = self._rows = _entries(self._engine, self._warmup)
            self._engine = None  # nothing to keep alive once built
        return rows

    @property
    def built(self) -> bool:
        return self._rows is not None

    def settle(self) -> tuple[EntryView, ...]:
        return self.rows()

    def decode_growth(self) -> int:
        """`features.growth_blocks` of an unbuilt table, read from the engine without building
        it: one block rounding up per running sequence past its prefill (the entries that sum
        counts: not paused, not swapped, not in prefill), the same integer sum."""
        engine = self._engine
        assert engine is not None, "decode_growth of a built table: sum its entries"
        per_block = engine._per_block  # block_size * packing, per level
        return sum(
            -(-s.request.decode_rate // per_block[s.quantization_level])
            for s in engine.running
            if not s.prefill_remaining
        )

    def decode_growth_at_most(self) -> int:
        """An upper bound of `decode_growth` in O(1): one block rounding up of the schedule's
        fastest decode rate at the smallest block (fp16) per sequence in the running set. A
        policy that only asks whether the growth fits under its slack (`blocks_to_free`, every
        turn) needs the exact sum only when this bound does not fit."""
        engine = self._engine
        assert engine is not None, "decode_growth_at_most of a built table"
        return len(engine.running) * engine.max_decode_blocks

    # --- the tuple's behaviour (and `_Deferred`'s) ------------------------------------------
    def __contains__(self, item: object) -> bool:
        return item in self.rows()

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self.rows(),))


class Queue(_Deferred):
    """`Observation.queue` without hints: the `QueueView` whose two block figures (an admission
    need per waiting request, a prefix chain walk each) and count of preempted requests are
    computed on first read, from the engine it was observed on, under `Table`'s rule (built
    before that engine changes). How many wait, and for how long, are read at once: a policy
    that only checks whether anyone waits, or for how long (`lru` on 3,541 turns of the
    Mooncake replay), never computes a need. Equal, hashed, printed and pickled as that
    `QueueView`."""

    __slots__ = ("__weakref__", "_engine", "_view", "oldest_wait", "waiting")

    _fields = QueueView._fields

    def __init__(self, engine: Engine) -> None:
        waiting = engine.waiting
        self.waiting = len(waiting)
        self.oldest_wait = engine.t - min(map(_wait_since, waiting)) if waiting else 0
        self._engine: Engine | None = engine
        self._view: QueueView | None = None

    def view(self) -> QueueView:
        view = self._view
        if view is None:
            assert self._engine is not None
            view = self._view = _queue_view(self._engine)
            self._engine = None  # nothing to keep alive once built
        return view

    @property
    def built(self) -> bool:
        return self._view is not None

    def settle(self) -> QueueView:
        return self.view()

    @property
    def head_blocks(self) -> int:
        return self.view().head_blocks

    @property
    def demand_blocks(self) -> int:
        return self.view().demand_blocks

    @property
    def preempted(self) -> int:
        return self.view().preempted

    # --- the named tuple's behaviour (and `_Deferred`'s) ------------------------------------
    def __reduce__(self) -> tuple[Any, ...]:
        return (QueueView, tuple(self.view()))

    def _asdict(self) -> dict[str, int]:
        return self.view()._asdict()

    def _replace(self, **changes: int) -> QueueView:
        return self.view()._replace(**changes)


def _queue_view(engine: Engine) -> QueueView:
    t = engine.t
    waiting = engine.waiting
    # each waiting request's need once: the head's is one of them (engine.head_need and
    # engine.queue_demand would compute it twice)
    needs = [engine.admission_need(s) for s in waiting]
    return QueueView(
        waiting=len(waiting),
        oldest_wait=max((t - s.wait_since for s in waiting), default=0),
        head_blocks=next((n for s, n in zip(waiting, needs, strict=True) if s.not_before <= t), 0),
        demand_blocks=sum(needs),
        preempted=sum(1 for s in waiting if s.preemptions),
    )


def build_observation(
    engine: Engine, *, turn: int, turns: int, warmup: int, hints: bool = True, lazy: bool = False
) -> Observation:
    """`lazy`: entries as a `Table` and the queue as a `Queue` (without hints only: the
    candidates read every entry); the caller must then `settle()` every table and queue still
    held before `engine` changes."""
    entries: tuple[EntryView, ...] | Table
    queue: QueueView | Queue
    lazy = lazy and not hints
    entries = Table(engine, warmup) if lazy else _entries(engine, warmup)
    queue = Queue(engine) if lazy else _queue_view(engine)
    candidates = None
    if hints:
        scored = [
            Candidate(e.seq_id, score)
            for e in entries
            if e.frees > 0 and not e.swapped and (score := candidate_score(e)) > 0
        ]
        scored.sort(key=lambda c: -c.score)  # stable: ties keep the memory-cost order
        candidates = tuple(scored[:CANDIDATES_SHOWN])
    pool = engine.pool
    return _make_observation(  # Observation(...), built faster (one per turn)
        turn=turn,
        turns=turns,
        block_size=engine.block_size,
        capacity=pool.num_blocks,
        used=pool.used,
        cached=pool.cached_blocks,
        cpu_used=engine.cpu_used,
        cpu_capacity=engine.cpu_capacity,
        link=engine.link_blocks,
        backlog=engine.link_backlog,
        max_wait=engine.scenario.max_wait_steps,
        queue=queue,
        entries=entries,
        candidates=candidates,
    )


def _entries(engine: Engine, warmup: int) -> tuple[EntryView, ...]:
    """Every sequence holding KV, largest GPU cost first, then by id.

    The hottest code outside the engine step (every resident sequence, every turn), so it is
    one inlined loop: entries are built with `tuple.__new__` (the same tuples EntryView's own
    constructor makes, without its Python-level `__new__`), sorted on a decorated key, and the
    sole-held prefix blocks (`frees`) are counted once per prefix chain: sequences sharing a
    chain (the same tuple object) share the count, so a popular prefix is scanned once per
    observation, not once per holder."""
    t = engine.t
    make = tuple.__new__
    sole: dict[int, int] = {}
    sole_held = engine.pool.sole_held
    unit = engine.pool.unit  # blocks per prefix hash
    decorated = []
    for seq in (*engine.running, *engine.paused):
        status = seq.status
        if status is _DISCARDED:
            continue
        request = seq.request
        swapped = status is _SWAPPED
        frees = seq.gpu_blocks
        if seq.prefix_held:
            # a sequence holds its whole chain or none of it (engine.check), so the chain's
            # tuple identifies what it holds (the request keeps it alive during this call)
            chain = request.prefix_hashes
            if seq.prefix_held != len(chain):
                frees = engine.freeable_blocks(seq)
            else:
                count = sole.get(id(chain))
                if count is None:
                    count = sole[id(chain)] = sole_held(chain) * unit  # engine.freeable_blocks
                frees += count
        if status is not _RUNNING:
            phase = _IDLE
            pause = request.followups[seq.call].pause
            paused_for = t - seq.paused_since
        else:
            pause = None
            paused_for = 0
            if seq.prefill_remaining:
                phase = _PREFILL
            elif seq.generated < request.reasoning_tokens:
                phase = _REASONING
            else:
                phase = _DECODE
        private = seq.cpu_blocks if swapped else seq.gpu_blocks
        shared = seq.prefix_held * unit
        moving = seq.outbound + seq.inbound
        entry = make(
            EntryView,
            (
                request.seq_id,
                request.block_type,
                phase,
                request.priority,
                seq.quantization_level,
                seq.prefix_tokens + seq.private_prompt + seq.generated - seq.prefill_remaining,
                request.decode_rate,
                private,
                shared,
                frees,
                round(seq.generated / seq.total_output, 2),
                seq.last_access_step - warmup,
                swapped,
                pause,
                paused_for,
                moving,
            ),
        )
        # (-gpu_cost, seq_id, entry): seq ids are unique, so entries are never compared
        cost = (moving + shared if moving else 0) if swapped else private + shared
        decorated.append((-cost, request.seq_id, entry))
    decorated.sort()
    return tuple([d[2] for d in decorated])


_wait_since = attrgetter("wait_since")
_RUNNING = Status.RUNNING
_SWAPPED = Status.SWAPPED
_DISCARDED = Status.DISCARDED
_IDLE, _PREFILL, _REASONING, _DECODE = Phase.IDLE, Phase.PREFILL, Phase.REASONING, Phase.DECODE
