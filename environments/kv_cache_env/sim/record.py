"""The episode record: everything the rubric and the metrics need, and nothing else.

A record is plain data (JSON round-trips exactly through `to_dict`/`from_dict`), so an episode
can be re-scored later from a results file or a verifiers trace without re-running it. Steps in
it are turns (0 = the agent's first turn); warm-up steps are not part of it; the agent-free drain
that ends the episode is summed in the `drain_*` fields.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .vocabulary import BlockType

# Per-turn tuple fields (lists in JSON).
_SERIES = (
    "used_blocks",
    "queue",
    "failures",
    "tokens",
    "effective_tokens",
    "forced_preemptions",
    "calls_per_turn",
)


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """One discard of KV, by the agent (`forced=False`) or by the engine, logged by the engine
    and kept in the episode record as it is (`turn` < 0: during the unscored warm-up)."""

    turn: int
    seq_id: str
    block_type: BlockType
    priority: float
    progress: float
    """Generated / target output tokens when it was evicted."""
    forced: bool
    """True when the engine preempted it because growth did not fit."""
    freed_blocks: int
    paused: bool = False
    """True when it was a session paused between calls (its KV discarded until it returns)."""


@dataclass(frozen=True, slots=True)
class ResidentRecord:
    """A sequence holding GPU blocks (computing or paused) at the last agent turn."""

    seq_id: str
    block_type: BlockType
    blocks: float
    """GPU blocks attributed to it: private blocks + each shared block / its reference count,
    so the attributions of all residents sum to the blocks in use."""


@dataclass(frozen=True, slots=True)
class ServingRecord:
    """What the episode's clients saw, as serving systems are measured (the metrics in
    `rubrics.metrics` read it; the rubric does not). Its requests are those the episode serves:
    every request in the engine at the first turn or arriving during the turns (their
    warm-up history included); those finished or failed in the warm-up are not part of it.
    Times are in engine steps (`step_seconds` each): see `Sequence.first_token_wait`."""

    step_seconds: float
    requests: int
    """How many requests the episode serves (SLO attainment's denominator)."""
    first_token_steps: tuple[float, ...]
    """Each request's wait from its arrival to its first token (those whose first token
    came), in arrival order."""
    resumed_first_token_steps: tuple[float, ...]
    """Each resumed call's wait from its return to its first token (calls whose first token
    came), request by request."""
    token_gaps: tuple[tuple[float, int], ...]
    """The gaps between consecutive tokens of one call (time between tokens) as (gap, how
    many), by gap: each request's decode pace (1 / its tokens per step), and its stalls."""
    completed: tuple[tuple[float, float], ...]
    """For each request that completed every call: (its slowest first token, its mean time per
    output token after each call's first: the per-token latency of DistServe's SLO)."""
    offloaded_bytes: int
    """Bytes copied from GPU to CPU over the host link in the turns and the drain."""
    loaded_bytes: int
    """Bytes loaded back from CPU over the host link in the turns and the drain."""
    recompute_tokens: int
    """Prefill tokens computed again, in the turns and the drain, because their KV had been
    discarded (an eviction, a forced preemption, a discarded paused session)."""

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("first_token_steps", "resumed_first_token_steps"):
            data[key] = list(data[key])
        for key in ("token_gaps", "completed"):
            data[key] = [list(pair) for pair in data[key]]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServingRecord:
        values = dict(data)
        for key in ("first_token_steps", "resumed_first_token_steps"):
            values[key] = tuple(values[key])
        values["token_gaps"] = tuple((gap, count) for gap, count in values["token_gaps"])
        values["completed"] = tuple((wait, tpot) for wait, tpot in values["completed"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    scenario: str
    seed: int
    turns: int
    block_size: int
    capacity_blocks: int
    reference_tokens: int
    """Tokens an unconstrained engine generates over the same turns (the throughput ceiling)."""
    reference_block_steps: int
    """Sum over the same turns of the blocks that engine holds."""
    reference_peak_blocks: int
    used_blocks: tuple[int, ...]
    queue: tuple[int, ...]
    failures: tuple[int, ...]
    tokens: tuple[int, ...]
    effective_tokens: tuple[float, ...]
    """Per turn, tokens weighted by the quality factor of their precision."""
    forced_preemptions: tuple[int, ...]
    prefix_hit_blocks: int
    prefix_lookup_blocks: int
    swap_latency_s: float
    evictions: tuple[EvictionRecord, ...]
    residents: tuple[ResidentRecord, ...]
    calls_per_turn: tuple[int, ...]
    """Actions the agent submitted each turn, valid or not."""
    evict_calls: int
    compress_calls: int
    swap_calls: int
    noop_calls: int
    invalid_calls: int
    drain_steps: int = 0
    """Agent-free steps run after the last turn."""
    drain_tokens: int = 0
    drain_effective_tokens: float = 0.0
    drain_failures: int = 0
    """Requests that failed in the drain (by their own deadlines), or at its safety cap."""
    reference_drain_tokens: int = 0
    """Tokens the unconstrained engine generates in its own drain."""
    reference_ideal_block_steps: float = 0.0
    """Blocks an ideal server holds over the turns (only KV read that step, int4): see
    `Reference.ideal_block_steps`."""
    paused_evictions: int = 0
    """Evictions (by the agent) of sessions paused between calls."""
    drain_capped: bool = False
    """The drain reached its safety cap (`Scenario.drain_cap`): whatever was left failed. Never
    true on the suite (tested); true means a runaway engine, not a policy's doing."""
    serving: ServingRecord | None = None
    """What its clients saw (latencies, link traffic, recompute); None in a record written
    before these were kept (its serving metrics are then blank)."""

    @property
    def usage(self) -> tuple[float, ...]:
        return tuple(u / self.capacity_blocks for u in self.used_blocks)

    @property
    def total_failures(self) -> int:
        return sum(self.failures) + self.drain_failures

    @property
    def tokens_generated(self) -> int:
        return sum(self.tokens)

    def to_dict(self) -> dict[str, Any]:
        # Field by field rather than `dataclasses.asdict`, which recurses into (and deep-copies)
        # every element of every series: ~0.1 s for a full trace replay's record. Every field is
        # a scalar, a tuple of scalars or a tuple of flat records, so this is the same dict.
        data = {name: getattr(self, name) for name in _FIELDS}
        for key in _SERIES:
            data[key] = list(data[key])
        data["evictions"] = [_flat(e) for e in self.evictions]
        data["residents"] = [_flat(r) for r in self.residents]
        data["serving"] = self.serving.to_dict() if self.serving is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeRecord:
        known = {f.name for f in fields(cls)}
        missing = known - data.keys() - _LATER_FIELDS
        if missing:
            raise ValueError(f"episode record lacks fields: {', '.join(sorted(missing))}")
        values = {k: data[k] for k in known if k in data}
        for key in _SERIES:
            values[key] = tuple(values[key])
        values["evictions"] = tuple(
            EvictionRecord(**{**e, "block_type": BlockType(e["block_type"])})
            for e in data["evictions"]
        )
        values["residents"] = tuple(
            ResidentRecord(**{**r, "block_type": BlockType(r["block_type"])})
            for r in data["residents"]
        )
        serving = data.get("serving")
        values["serving"] = ServingRecord.from_dict(serving) if serving is not None else None
        return cls(**values)


_FIELDS = tuple(f.name for f in fields(EpisodeRecord))
_LATER_FIELDS = frozenset({"serving"})
"""Fields records written before them lack (read as their defaults)."""
RECORD_FIELDS = frozenset(_FIELDS)
"""The record's field names (each tool's counter is one: `actions.Tool.counter`)."""


def _flat(item: EvictionRecord | ResidentRecord) -> dict[str, Any]:
    """One eviction or resident as plain JSON data (its block type as its string)."""
    data = {f.name: getattr(item, f.name) for f in fields(item)}
    data["block_type"] = str(data["block_type"])
    return data
