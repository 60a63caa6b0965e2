"""Vocabulary of the simulator: block types, quantization levels, phases and their constants.

Everything here is a plain value shared by the engine, the observation and the rubric. The
eviction values and retention priorities are the seed-003 and seed-000 constants.
"""

from __future__ import annotations

from enum import StrEnum


class BlockType(StrEnum):
    """What a sequence's KV-cache holds, which decides how likely it is to be read again."""

    SYSTEM = "system"
    CONTEXT = "context"
    GENERATION = "generation"
    REASONING = "reasoning"
    EPHEMERAL = "ephemeral"


# Seed 003: 0.0 = highest reuse (never evict) ... 1.0 = zero reuse (safe to evict).
EVICTION_VALUE: dict[BlockType, float] = {
    BlockType.SYSTEM: 0.0,
    BlockType.CONTEXT: 0.25,
    BlockType.GENERATION: 0.5,
    BlockType.REASONING: 0.9,
    BlockType.EPHEMERAL: 1.0,
}

# Seed 000 / TensorRT-LLM KvCacheRetentionConfig: system 100 (protected), everything else 35.
RETENTION_PRIORITY: dict[BlockType, int] = {
    BlockType.SYSTEM: 100,
    BlockType.CONTEXT: 35,
    BlockType.GENERATION: 35,
    BlockType.REASONING: 35,
    BlockType.EPHEMERAL: 35,
}


class Quantization(StrEnum):
    """Storage precision of a sequence's private KV blocks."""

    FP16 = "fp16"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def packing(self) -> int:
        """How many fp16-sized blocks' worth of tokens one physical block holds at this level."""
        return _PACKING[self]

    @property
    def multiplier(self) -> float:
        """Fraction of the fp16 space this level needs (seed 003's quantization_multiplier)."""
        return 1.0 / _PACKING[self]

    @property
    def next_level(self) -> Quantization | None:
        """The level one compress call moves to; None at int4 (nothing further to compress)."""
        return _NEXT.get(self)


_PACKING = {Quantization.FP16: 1, Quantization.INT8: 2, Quantization.INT4: 4}
_NEXT = {Quantization.FP16: Quantization.INT8, Quantization.INT8: Quantization.INT4}


class Phase(StrEnum):
    """Seed-003 PhaseType of a resident sequence. Swapped sequences are idle."""

    PREFILL = "prefill"
    DECODE = "decode"
    REASONING = "reasoning"
    IDLE = "idle"


class Status(StrEnum):
    """Where a request is in its life. Only RUNNING and SWAPPED sequences hold KV blocks."""

    WAITING = "waiting"
    RUNNING = "running"
    SWAPPED = "swapped"
    FINISHED = "finished"
    FAILED = "failed"
