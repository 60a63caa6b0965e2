"""The KV-cache manager: what each sequence holds on the GPU, over an exact `BlockPool`.

It models vLLM v1's `KVCacheManager` (`vllm/v1/core/kv_cache_manager.py`): the blocks a request
needs for the tokens it has (`allocate_slots`), its shared prefix found by hash and referenced
(`find_longest_cache_hit`), and what letting a request go frees (`free`: private blocks back to
the pool, prefix references released, a prefix block whose count falls to 0 cached for reuse).
One difference is this simulator's: a sequence's KV has a precision (fp16, int8, int4), and a
block holds `block_size x packing` tokens of it (`Quantization.packing`).

`KVCacheManager` alone writes the pool and, on each sequence, what it holds on the GPU
(`Sequence.gpu_blocks`, `prefix_held`, `quantization_level`). Its one exception is the
scheduler's compute loop, which writes a decoding sequence's `gpu_blocks` itself after taking
the blocks from the pool (`allocate_slots` written out: the hot path of every step; see
`Scheduler._compute`). It emits nothing: the scheduler, which owns the clock, publishes the
events (as vLLM's scheduler takes the block pool's events and publishes them).
"""

from __future__ import annotations

from typing import ClassVar

from .admission import first_chunk_blocks, prefill_left
from .block_pool import BlockPool
from .clone_groups import shared_copy
from .scenario import Scenario
from .sequence import Sequence
from .vocabulary import Quantization


class KVCacheManager:
    """The GPU blocks of every sequence, and the block geometry of one scenario."""

    def __init__(self, scenario: Scenario, capacity: int, *, reclaims: bool = True) -> None:
        self.pool = BlockPool(capacity, scenario.prefix_hash_blocks, reclaims=reclaims)
        self.block_size = scenario.block_size
        self.base_level = scenario.base_quantization
        self.unit = scenario.prefix_hash_blocks
        """Blocks per prefix hash (`Scenario.prefix_hash_blocks`)."""
        self.hash_tokens = self.block_size * self.unit
        self.prefill_budget = scenario.prefill_tokens_per_step
        self.tokens_per_block = {level: self.block_size * level.packing for level in Quantization}
        """Tokens one physical block holds at each precision (read-only)."""

    # --- geometry ----------------------------------------------------------------------------
    def blocks_for(self, seq: Sequence, level: Quantization | None = None) -> int:
        """Private physical blocks `seq`'s existing KV needs at `level` (default: its own)."""
        per_block = self.block_size * (level or seq.quantization_level).packing
        return -(-seq.kv_private // per_block)

    def freeable_blocks(self, seq: Sequence) -> int:
        """GPU blocks that become available if `seq` is evicted now: its private blocks plus the
        prefix blocks it alone references (shared ones stay pinned by the others)."""
        return seq.gpu_blocks + self.sole_prefix_blocks(seq)

    def sole_prefix_blocks(self, seq: Sequence) -> int:
        """Prefix blocks `seq` holds that no other sequence references."""
        if not seq.prefix_held:
            return 0
        return self.pool.sole_held(seq.request.prefix_hashes[: seq.prefix_held]) * self.unit

    def admission(self, seq: Sequence, hits: int) -> tuple[int, Quantization, int]:
        """Admitting `seq` with `hits` prefix blocks cached: the tokens it has left to prefill,
        the precision its KV starts at, and the private blocks of its first prefill chunk
        (`admission`). Offloaded KV comes back as it left (its precision, its own prefill)."""
        private = seq.private_prompt + seq.generated
        if seq.cpu_blocks:
            remaining, level = seq.prefill_remaining, seq.quantization_level
        else:
            remaining = prefill_left(private, seq.prefix_tokens, hits * self.hash_tokens)
            level = self.base_level
        per_block = self.tokens_per_block[level]
        return (
            remaining,
            level,
            first_chunk_blocks(private, remaining, self.prefill_budget, per_block),
        )

    def admission_need(self, seq: Sequence) -> int:
        """Fresh blocks admitting `seq` now takes, net of prefix hits: prefix misses, its
        offloaded KV (loaded back) and the private blocks of its first prefill chunk."""
        hashes = seq.request.prefix_hashes
        hits, _ = self.pool.cached_hit_length(hashes)
        chunk = self.admission(seq, hits)[2]
        loaded = seq.cpu_blocks
        return (len(hashes) - hits) * self.unit + (chunk if chunk > loaded else loaded)

    # --- changes -----------------------------------------------------------------------------
    def admit(self, seq: Sequence, hits: int, level: Quantization) -> tuple[list[int], list[int]]:
        """Reference `seq`'s whole prefix chain (its first `hits` hashes cached, reused; the rest
        stored); its KV starts at `level`, holding no private block yet. Returns (the hashes
        stored, the cached hashes reclaimed to make room)."""
        stored: list[int] = []
        reclaimed: list[int] = []
        hashes = seq.request.prefix_hashes
        if hashes:
            _, stored, reclaimed = self.pool.acquire_prefix(hashes, hits)
        seq.prefix_held = len(hashes)
        seq.quantization_level = level
        seq.gpu_blocks = 0
        return stored, reclaimed

    def load(self, seq: Sequence, blocks: int) -> list[int]:
        """Allocate the `blocks` private blocks `seq`'s offloaded KV comes back into; returns
        the cached hashes reclaimed to make room."""
        reclaimed = self.pool.allocate(blocks)
        seq.gpu_blocks = blocks
        return reclaimed

    def allocate(self, blocks: int) -> list[int]:
        """Take `blocks` private blocks from the pool for a sequence's growth (reclaiming cached
        prefix blocks if the free ones do not suffice; the caller has made room and counts them
        on the sequence); returns the reclaimed hashes."""
        return self.pool.allocate(blocks)

    def free(self, seq: Sequence) -> tuple[int, int]:
        """Let go of everything `seq` holds on the GPU: its private blocks and its prefix
        references. Returns (private blocks freed, prefix blocks whose count fell to 0)."""
        private = seq.gpu_blocks
        if private:
            self.pool.free(private)
        seq.gpu_blocks = 0
        return private, self.release_prefix(seq)

    def release_prefix(self, seq: Sequence) -> int:
        """Drop `seq`'s prefix references; returns how many blocks fell to count 0."""
        if not seq.prefix_held:
            return 0
        # The release itself counts the blocks falling to 0 (a second pass over the chain to
        # count its sole-held blocks first is saved).
        released = self.pool.release_prefix(seq.request.prefix_hashes[: seq.prefix_held])
        seq.prefix_held = 0
        return released * self.unit

    def copied_out(self, seq: Sequence, blocks: int) -> None:
        """`blocks` of `seq`'s private blocks reached the CPU: free them."""
        seq.gpu_blocks -= blocks
        self.pool.free(blocks)

    def compress(self, seq: Sequence) -> int:
        """Move one quantization level down and repack the private blocks; returns blocks freed."""
        level = seq.quantization_level.next_level
        assert level is not None, "compress past int4"
        seq.quantization_level = level
        new_blocks = self.blocks_for(seq)
        freed = seq.gpu_blocks - new_blocks
        self.pool.free(freed)
        seq.gpu_blocks = new_blocks
        return freed

    def reset_precision(self, seq: Sequence) -> None:
        """`seq`'s KV was discarded: whatever it computes next is at the base precision."""
        seq.quantization_level = self.base_level

    # --- checks ------------------------------------------------------------------------------
    def check(self, on_gpu: list[Sequence], moving_out: list[Sequence]) -> None:
        """Assert the pool's accounting against its holders: the sequences computing or paused
        on the GPU (`on_gpu`: their blocks fit their KV) and those whose KV is still being
        copied out (`moving_out`); messages name the likely bug."""
        pool = self.pool
        pool.check()
        private = sum(s.gpu_blocks for s in (*on_gpu, *moving_out))
        assert private == pool.num_private, f"private blocks {private} != pool {pool.num_private}"
        for seq in on_gpu:
            assert seq.gpu_blocks == self.blocks_for(seq), f"{seq.seq_id}: blocks != ceil(kv)"
        refs: dict[int, int] = {}
        for seq in (*on_gpu, *moving_out):
            assert seq.prefix_held == len(seq.request.prefix_hashes), "partial prefix reference"
            for h in seq.request.prefix_hashes:
                refs[h] = refs.get(h, 0) + 1
        assert refs == pool.ref_counts, "reference counts disagree with holders"
        assert pool.used <= pool.num_blocks, "usage above physical capacity"

    # --- copying -----------------------------------------------------------------------------
    SHARED_FIELDS: ClassVar[tuple[str, ...]] = (
        "block_size",
        "base_level",
        "unit",
        "hash_tokens",
        "prefill_budget",
        "tokens_per_block",
    )
    """Fields a clone shares: numbers, and the table in `READ_ONLY_FIELDS`."""
    READ_ONLY_FIELDS: ClassVar[frozenset[str]] = frozenset({"tokens_per_block"})
    OWN_FIELDS: ClassVar[tuple[str, ...]] = ("pool",)
    """Fields a clone gets its own of: the pool."""

    def clone(self) -> KVCacheManager:
        """An independent copy: its own pool, the geometry shared."""
        clone = shared_copy(self)
        clone.pool = self.pool.copy()
        return clone
