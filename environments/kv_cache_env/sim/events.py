"""KV block events, in the spirit of vLLM's `BlockStored`/`BlockRemoved` and TensorRT-LLM's
`KVCacheStoredData`/`KVCacheRemovedData`: callers subscribe and are told, after the fact, which
blocks entered or left a memory tier and why.

Events are only built when someone subscribes, so an unobserved simulator pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

EventKind = Literal["stored", "removed"]
Medium = Literal["gpu", "cpu"]
Reason = Literal[
    "admit",  # blocks allocated when a request is (re)admitted
    "grow",  # a decoding sequence crossed into a new block
    "compress",  # repacking at a lower precision released blocks
    "evict",  # the agent preempted the sequence (recompute later)
    "preempt",  # the engine preempted it because growth did not fit
    "swap_out",
    "swap_in",
    "finish",  # the request completed
    "fail",  # the request failed (a deadline passed) and its KV went
    "reclaim",  # a cached prefix block (count 0) was reused for fresh data
]


@dataclass(frozen=True, slots=True)
class BlockEvent:
    kind: EventKind
    step: int
    """Engine step on which it happened."""
    medium: Medium
    reason: Reason
    owner: str
    """The sequence's id, or "prefix" for content-addressed shared blocks."""
    blocks: int
    """Physical blocks stored or removed."""
    block_hashes: tuple[int, ...] = ()
    """Hashes of shared prefix blocks (empty for private blocks)."""
    token_range: tuple[int, int] | None = None
    """[start, end) token positions of the owner's sequence the blocks held, where known."""


Subscriber = Callable[[BlockEvent], None]
