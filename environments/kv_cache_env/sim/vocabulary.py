"""Vocabulary of the simulator: block types, quantization levels, phases and their constants.

Everything here is a plain value shared by the engine, the observation and the rubric. The
eviction values and retention priorities are the original design's and the TensorRT-LLM
design's constants.
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


# The original design: 0.0 = highest reuse (never evict) ... 1.0 = zero reuse (safe to evict).
EVICTION_VALUE: dict[BlockType, float] = {
    BlockType.SYSTEM: 0.0,
    BlockType.CONTEXT: 0.25,
    BlockType.GENERATION: 0.5,
    BlockType.REASONING: 0.9,
    BlockType.EPHEMERAL: 1.0,
}

# The TensorRT-LLM design's KvCacheRetentionConfig: system 100 (protected), everything else 35.
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
        """Fraction of the fp16 space this level needs (the original design's
        quantization_multiplier)."""
        return 1.0 / _PACKING[self]

    @property
    def next_level(self) -> Quantization | None:
        """The level one compress call moves to; None at int4 (nothing further to compress)."""
        return _NEXT.get(self)


_PACKING = {Quantization.FP16: 1, Quantization.INT8: 2, Quantization.INT4: 4}
_NEXT = {Quantization.FP16: Quantization.INT8, Quantization.INT8: Quantization.INT4}


class Phase(StrEnum):
    """The original design's PhaseType of a sequence holding KV. A paused session (between two
    calls, on the GPU or offloaded to CPU) is idle."""

    PREFILL = "prefill"
    DECODE = "decode"
    REASONING = "reasoning"
    IDLE = "idle"


class Status(StrEnum):
    """Where a request (a session of one or more LLM calls) is in its life.

    - WAITING: in the admission queue. It holds no GPU block; it may hold CPU blocks (KV
      offloaded by `swap`, loaded back on admission instead of recomputed).
    - RUNNING: on the GPU, prefilling or decoding its current call.
    - PAUSED: between two calls (a tool runs, a human thinks); its KV stays on the GPU, pinned.
    - SWAPPED: between two calls with its KV offloaded to CPU.
    - DISCARDED: between two calls with its KV thrown away; it recomputes on return.
    - FINISHED, FAILED: done; nothing held.
    """

    WAITING = "waiting"
    RUNNING = "running"
    PAUSED = "paused"
    SWAPPED = "swapped"
    DISCARDED = "discarded"
    FINISHED = "finished"
    FAILED = "failed"


class PauseKind(StrEnum):
    """What a paused session waits on between two calls (InferCept's interceptions, arXiv
    2402.01869, Table 1): a tool from the catalogue (`catalogue.CATALOGUE`: its median
    duration and what it appends) or a human reading and typing the next chat turn."""

    CALCULATOR = "calculator"
    SEARCH = "search"
    ENV = "env"
    TTS = "tts"
    IMAGE = "image"
    HUMAN = "human"
