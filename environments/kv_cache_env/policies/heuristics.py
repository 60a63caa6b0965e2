"""The observation-based baselines: engine-only, random, the design's eviction orders (FIFO,
LRU, priority) and TensorRT-LLM (prioritized LRU), compress-first, and the single-action
strategies used to check that the benchmark rewards judgment, the session rules, and a rule the
rule grid found."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from kv_cache_env.rl.features import compress_gain, growth_blocks
from kv_cache_env.sim import (
    ACTIONS,
    EVICTION_VALUE,
    RETENTION_PRIORITY,
    Action,
    BlockType,
    EntryView,
    Observation,
    Quantization,
    compress,
    evict,
    noop,
    swap,
)
from kv_cache_env.sim.observation import candidate_score

from .base import (
    DEFAULT_TARGET_USAGE,
    OrderedEvictionPolicy,
    Policy,
    blocks_to_free,
    compress_then,
)


def arrival_order(seq_id: str) -> int:
    """Requests are numbered in arrival order (r0, r1, ...)."""
    digits = seq_id.lstrip("r")
    return int(digits) if digits.isdigit() else 1 << 62


class NoopPolicy(Policy):
    """Never acts: every paused session's KV stays pinned on the GPU until it returns
    (InferCept's "preserve"), and the engine's own fallback preemption of running requests is
    all that manages memory. `vllm-default` is what vLLM itself would do."""

    name = "noop"
    reads_sessions = False

    def act(self, obs: Observation) -> list[Action]:
        return []


class RandomPolicy(Policy):
    """0-2 uniformly random actions on random resident sequences each turn (seeded)."""

    name = "random"

    keeps_state = True  # its random draws

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def act(self, obs: Observation) -> list[Action]:
        resident = [e for e in obs.entries if not e.swapped]
        actions: list[Action] = []
        tools = tuple(ACTIONS)
        for _ in range(int(self._rng.integers(0, 3))):
            tool = tools[int(self._rng.integers(0, len(tools)))]
            if not tool.targets or not resident:
                actions.append(noop())
                continue
            target = resident[int(self._rng.integers(0, len(resident)))].seq_id
            actions.append(Action(tool.name, target))
        return actions


class FifoPolicy(OrderedEvictionPolicy):
    """Under pressure, evict the oldest request first (first in, first out)."""

    name = "fifo"

    def priority(self, entry: EntryView) -> tuple[Any, ...]:
        return (arrival_order(entry.seq_id),)


class LruPolicy(OrderedEvictionPolicy):
    """Under pressure, evict the least recently accessed first (least recently used); ties go
    to the one touched earliest within the step, i.e. the oldest."""

    name = "lru"

    def priority(self, entry: EntryView) -> tuple[Any, ...]:
        return (entry.last_access, arrival_order(entry.seq_id))


class PriorityPolicy(OrderedEvictionPolicy):
    """Priority eviction: lowest-value block type first (ephemeral, reasoning,
    generation, context; system never), then lowest request priority, then oldest."""

    name = "priority"

    def eligible(self, entry: EntryView) -> bool:
        return super().eligible(entry) and entry.block_type is not BlockType.SYSTEM

    def priority(self, entry: EntryView) -> tuple[Any, ...]:
        return (-EVICTION_VALUE[entry.block_type], entry.priority, arrival_order(entry.seq_id))


class TrtllmPolicy(OrderedEvictionPolicy):
    """TensorRT-LLM prioritized LRU: retention priority (system 100, rest 35) first, least
    recently used within a level, newest on a tie."""

    name = "trtllm"

    def priority(self, entry: EntryView) -> tuple[Any, ...]:
        return (
            RETENTION_PRIORITY[entry.block_type],
            entry.last_access,
            -arrival_order(entry.seq_id),
        )


class CompressFirstPolicy(Policy):
    """Under pressure, compress the largest sequences first (one level each, then a second
    pass); evict in `priority` order only when compression cannot free enough."""

    name = "compress-first"
    target_usage: ClassVar[float] = DEFAULT_TARGET_USAGE
    evict_when_short: ClassVar[bool] = True

    def act(self, obs: Observation) -> list[Action]:
        need = blocks_to_free(obs, self.target_usage)
        if need <= 0:
            return []
        resident = [e for e in obs.entries if not e.swapped]  # already largest first
        actions, need = compress_then(need, resident)
        if need > 0 and self.evict_when_short:
            fallback = PriorityPolicy()
            for entry in sorted(filter(fallback.eligible, resident), key=fallback.priority):
                actions.append(evict(entry.seq_id))
                need -= entry.frees
                if need <= 0:
                    break
        return actions


# Order in which compression hurts least (mirrors the default quantization sensitivities).
COMPRESS_ORDER: dict[BlockType, int] = {
    BlockType.EPHEMERAL: 0,
    BlockType.GENERATION: 1,
    BlockType.CONTEXT: 1,
    BlockType.SYSTEM: 2,
    BlockType.REASONING: 3,
}


class HeadroomPolicy(Policy):
    """Keep usage, queue included, under the 0.8 headroom line by compressing the sequences
    least hurt by quantization first (ephemeral, then generation/context, then system, then
    reasoning; largest first); evict ephemeral/reasoning sequences only to save a request that
    is about to time out."""

    name = "headroom"
    target_usage = 0.8

    def act(self, obs: Observation) -> list[Action]:
        need = blocks_to_free(obs, self.target_usage) + obs.queue.demand_blocks
        if obs.queue.oldest_wait >= obs.max_wait - 1:
            need -= obs.queue.head_blocks  # counted twice: urgent head and demand
        if need <= 0:
            return []
        resident = [e for e in obs.entries if not e.swapped]
        order = sorted(resident, key=lambda e: (COMPRESS_ORDER[e.block_type], -e.private_blocks))
        actions, _ = compress_then(need, order)
        urgent = blocks_to_free(obs) if obs.queue.oldest_wait >= obs.max_wait - 1 else 0
        urgent -= sum(compress_gain(e) for e in resident)  # rough: what compression can give
        if urgent > 0:
            for entry in sorted(resident, key=PriorityPolicy().priority):
                if EVICTION_VALUE[entry.block_type] < 0.9 or entry.frees <= 0:
                    continue
                actions.append(evict(entry.seq_id))
                urgent -= entry.frees
                if urgent <= 0:
                    break
        return actions


# --- single-action strategies: the benchmark is only meaningful if these lose to judgment ----
class EvictAllPolicy(Policy):
    """Evict every GPU-resident sequence, every turn."""

    name = "evict-all"
    reads_sessions = False

    def act(self, obs: Observation) -> list[Action]:
        return [evict(e.seq_id) for e in obs.entries if not e.swapped]


class SwapAllPolicy(Policy):
    """Swap every GPU-resident sequence to CPU, every turn."""

    name = "swap-all"
    reads_sessions = False

    def act(self, obs: Observation) -> list[Action]:
        return [swap(e.seq_id) for e in obs.entries if not e.swapped]


class CompressAllPolicy(Policy):
    """Compress every GPU-resident sequence one level, every turn."""

    name = "compress-all"
    reads_sessions = False

    def act(self, obs: Observation) -> list[Action]:
        return [
            compress(e.seq_id)
            for e in obs.entries
            if not e.swapped and e.quantization.next_level is not None
        ]


class VllmDefaultPolicy(Policy):
    """What vLLM v1's prefix cache does with idle sessions' KV: a finished call's blocks stay
    cached and are reclaimed least recently used first when an allocation needs them, before
    any running request is preempted.

    vLLM v1 (`vllm/v1/core/`): when a request finishes, `KVCacheManager.free` returns its
    blocks to the `BlockPool`'s free-block queue (tail blocks of a chain first), still hashed,
    so the session's next call, whose prompt extends the same tokens, hits them
    (`find_longest_cache_hit`); `BlockPool.get_new_blocks` pops the queue's head and evicts the
    cached block found there (`_maybe_evict_cached_block`), so blocks are reclaimed least
    recently freed first; and `Scheduler.schedule` preempts a running request
    (`self.running.pop()`) only when `allocate_slots` fails with the whole free queue, cached
    blocks included, exhausted. Here a paused session's KV is pinned until someone frees it, so
    this policy does the reclaiming: each turn, when next step's decode growth plus what the
    waiting queue needs to be admitted exceeds the blocks available (free + cached), it
    discards paused sessions' KV, least recently used first, until it fits; it never touches a
    running sequence (the engine's own fallback preempts, as vLLM's does). One departure: vLLM
    evicts block by block from a chain's tail, so a partly reclaimed session recomputes only
    its tail; here a session's KV goes whole."""

    name = "vllm-default"

    def act(self, obs: Observation) -> list[Action]:
        need = growth_blocks(obs) + obs.queue.demand_blocks - obs.available
        actions: list[Action] = []
        if need <= 0:
            return actions
        idle = sorted(
            (e for e in obs.entries if e.paused and not e.swapped and e.frees > 0),
            key=lambda e: (e.last_access, arrival_order(e.seq_id)),
        )
        for entry in idle:
            actions.append(evict(entry.seq_id))
            need -= entry.frees
            if need <= 0:
                break
        return actions


HEURISTICS: tuple[type[Policy], ...] = (
    NoopPolicy,
    VllmDefaultPolicy,
    RandomPolicy,
    FifoPolicy,
    LruPolicy,
    PriorityPolicy,
    TrtllmPolicy,
    CompressFirstPolicy,
    HeadroomPolicy,
)
SINGLE_ACTION: tuple[type[Policy], ...] = (EvictAllPolicy, SwapAllPolicy, CompressAllPolicy)


# --- session-aware rules (suite v2: paused sessions) ------------------------------------------
class Int8EverythingPolicy(Policy):
    """Compress every GPU-resident sequence still at fp16 to int8, every turn (never to int4)."""

    name = "int8-everything"
    reads_sessions = False

    def act(self, obs: Observation) -> list[Action]:
        return [
            compress(e.seq_id)
            for e in obs.entries
            if not e.swapped and e.quantization is Quantization.FP16
        ]


class SwapPausedPolicy(Policy):
    """Offload every session paused on the GPU to CPU (largest first, while CPU room lasts)."""

    name = "swap-paused"

    def act(self, obs: Observation) -> list[Action]:
        return swap_paused(obs)


class DiscardPausedPolicy(Policy):
    """Discard the KV of every session paused on the GPU (it recomputes when it returns)."""

    name = "discard-paused"

    def act(self, obs: Observation) -> list[Action]:
        return [evict(e.seq_id) for e in obs.entries if e.paused and not e.swapped]


class SwapPausedCompressPolicy(Policy):
    """Two tools: offload paused sessions, compress every running sequence one level."""

    name = "swap-paused+compress-all"

    def act(self, obs: Observation) -> list[Action]:
        return swap_paused(obs) + compress_running(obs)


class DiscardPausedCompressPolicy(Policy):
    """Two tools: discard paused sessions' KV, compress every running sequence one level."""

    name = "discard-paused+compress-all"

    def act(self, obs: Observation) -> list[Action]:
        discard = [evict(e.seq_id) for e in obs.entries if e.paused and not e.swapped]
        return discard + compress_running(obs)


def swap_paused(obs: Observation) -> list[Action]:
    """Swap GPU-paused sessions, largest first, while they fit in the free CPU blocks."""
    room = obs.cpu_capacity - obs.cpu_used
    actions: list[Action] = []
    for e in obs.entries:  # largest GPU footprint first
        if e.paused and not e.swapped and e.private_blocks <= room:
            actions.append(swap(e.seq_id))
            room -= e.private_blocks
    return actions


def compress_running(obs: Observation) -> list[Action]:
    return [
        compress(e.seq_id)
        for e in obs.entries
        if not e.paused and not e.swapped and e.quantization.next_level is not None
    ]


SESSION_RULES: tuple[type[Policy], ...] = (
    Int8EverythingPolicy,
    SwapPausedPolicy,
    DiscardPausedPolicy,
    SwapPausedCompressPolicy,
    DiscardPausedCompressPolicy,
)


class OffloadOrDiscardPolicy(Policy):
    """Three tools: offload paused sessions largest first while CPU room lasts, discard the KV
    of the paused sessions left (the smaller contexts, cheapest to recompute), and compress
    every running sequence one level."""

    name = "offload-or-discard"

    def act(self, obs: Observation) -> list[Action]:
        swaps = swap_paused(obs)
        swapped = {a.seq_id for a in swaps}
        discard = [
            evict(e.seq_id)
            for e in obs.entries
            if e.paused and not e.swapped and e.seq_id not in swapped
        ]
        return swaps + discard + compress_running(obs)


SESSION_RULES = (*SESSION_RULES, OffloadOrDiscardPolicy)


# --- a rule the rule grid found (suite v3) ------------------------------------------------------
class PurgeWhenFullPolicy(Policy):
    """Two lines of the rule grid (`evict where usage >= 0.95; then compress where
    eviction_score <= 0.39`): every turn, compress one level the sequences worth keeping
    (eviction score <= 0.39, the median on the grid's tuning episodes: system and context KV,
    high priority or far along); once the GPU is 95% full, discard every sequence holding
    blocks instead, running ones included (they are recomputed), so the queue moves again.
    On the agent regimes' small GPUs this scored above the bound (whose pool and macros never
    discarded running requests wholesale), so the bound and the expert hold it in their pools;
    it is registered for checks, not in the default eval set."""

    name = "purge-when-full"
    FULL = 0.95
    KEEP_SCORE = 0.39

    def act(self, obs: Observation) -> list[Action]:
        movable = [e for e in obs.entries if not e.swapped and not e.moving]
        discard = [e for e in movable if e.frees > 0] if obs.usage >= self.FULL else []
        gone = {e.seq_id for e in discard}
        keep = [
            compress(e.seq_id)
            for e in movable
            if e.seq_id not in gone
            and candidate_score(e) <= self.KEEP_SCORE
            and e.quantization.next_level is not None
        ]
        return [evict(e.seq_id) for e in discard] + keep


GRID_RULES: tuple[type[Policy], ...] = (PurgeWhenFullPolicy,)
