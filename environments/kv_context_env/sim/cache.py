"""The KV block cache of one long conversation (the masking design's absolute coordinates, the
TensorRT-LLM design's retention priorities): which blocks are still active, and the
engine's prioritized-LRU fallback when more than `max_blocks` are active (an OOM event).

Coordinates: messages are appended in order without gaps, so message `i` occupies tokens
`[start_i, start_i + n_tokens_i)` and `start_{i+1} = start_i + n_tokens_i`. Block `k` covers
tokens `[k*B, k*B + B - 1]`; a block may hold the end of one message and the start of the next.
Nothing is renumbered: an evicted block keeps its index and never comes back (a recalled turn
is appended as new tokens instead).

The tail block (the one holding the newest token) can never be evicted: it is still being
written, and the next message continues filling it. An evicted tail would leave the next
message's first tokens in a block that is already gone, so both `evict_*` (ValueError) and the
engine (skipped) refuse it. With `max_blocks >= 1` the engine can always get back under the limit.

Failures: caller misuse (unknown or evicted block, out-of-order message) raises `ValueError`;
`evict_*` and `enforce_limit` return `None` when nothing was evicted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from kv_context_env.vocabulary import (
    BLOCK_SIZE,
    DEFAULT_PRIORITY,
    SYSTEM_PRIORITY,
    BlocksRemoved,
    Message,
)


@dataclass(frozen=True, slots=True)
class BlockInfo:
    """One row of `BlockCache.block_table()`: what an observation shows about a block."""

    index: int
    """Absolute block index, 0 .. n_blocks - 1."""
    active: bool
    """False once evicted (by the agent or the engine); never True again."""
    priority: int
    """SYSTEM_PRIORITY if the block holds any token of a system message, else DEFAULT_PRIORITY."""
    last_access: int
    """Step of the last read or write (append, `touch_all`)."""
    messages: tuple[int, ...]
    """Indices of the messages with at least one token in the block, ascending."""


class BlockCache:
    """Blocks of one conversation in absolute token coordinates.

    Engine eviction order (`enforce_limit`, TensorRT-LLM's prioritized LRU): lowest priority
    first, then least recently used (`last_access`), then oldest position (lowest index).
    Because every active block is read each turn (`touch_all`), LRU ties are common and the
    position tie-break makes the engine evict oldest-first within a priority; system blocks go
    only when nothing else is left, and the tail block never. With a non-decreasing step clock,
    last access never decreases along the active blocks (appends write only the newest blocks,
    `touch_all` reads all of them), so the order is in effect (priority, position); the LRU
    term is kept so the key is TensorRT-LLM's.
    """

    def __init__(self, max_blocks: int, block_size: int = BLOCK_SIZE) -> None:
        if max_blocks < 1:
            raise ValueError(f"max_blocks must be at least 1, got {max_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1, got {block_size}")
        self.max_blocks = max_blocks
        """Active blocks the engine allows before it evicts (the masking design's MAX_BLOCKS)."""
        self.block_size = block_size
        self._messages: list[Message] = []
        self._starts: list[int] = []
        """First token of each message (the TensorRT-LLM design's `message_token_positions_`)."""
        self._n_tokens = 0
        """Tokens appended so far; the next message starts here."""
        # Per block, indexed by absolute block index; only `append` grows them.
        self._active: list[bool] = []
        self._priority: list[int] = []
        self._last_access: list[int] = []
        self._block_messages: list[list[int]] = []
        self._n_active = 0
        """Running count of True entries in `_active`; changed only where `_active` is."""

    # ----------------------------------------------------------------- growth and reads

    def append(self, message: Message, step: int) -> None:
        """Append the next message: its tokens follow the current end without a gap. Blocks it
        reaches are created active (or, for the tail block, continued) and accessed at `step`.
        Message indices must run 0, 1, 2, ... in order."""
        if message.index != len(self._messages):
            raise ValueError(
                f"message index {message.index} is out of order: expected {len(self._messages)}"
            )
        if message.n_tokens < 1:
            raise ValueError(f"message {message.index} has {message.n_tokens} tokens (need >= 1)")
        start = self._n_tokens
        end = start + message.n_tokens
        self._messages.append(message)
        self._starts.append(start)
        self._n_tokens = end
        priority = SYSTEM_PRIORITY if message.role == "system" else DEFAULT_PRIORITY
        for k in range(start // self.block_size, (end - 1) // self.block_size + 1):
            if k == len(self._active):
                self._active.append(True)
                self._priority.append(priority)
                self._last_access.append(step)
                self._block_messages.append([])
                self._n_active += 1
            # Only the old tail block can be continued, and it is never evicted.
            assert self._active[k], f"block {k} is evicted but message {message.index} writes it"
            self._priority[k] = max(self._priority[k], priority)
            self._last_access[k] = step
            self._block_messages[k].append(message.index)

    def touch_all(self, step: int) -> None:
        """Every active block is read this turn (attention over the whole resident context)."""
        for k, active in enumerate(self._active):
            if active:
                self._last_access[k] = step

    # ----------------------------------------------------------------------- evictions

    def evict_blocks(self, blocks: Iterable[int], step: int) -> BlocksRemoved | None:
        """The agent evicts these blocks (duplicates collapse). All ids are checked before any
        is evicted: unknown, already evicted or the tail block raise ValueError and change
        nothing. Returns the event (cause "agent"), or None for an empty request."""
        wanted = sorted(set(blocks))
        for k in wanted:
            self._check_evictable(k)
        return self._evict(wanted, step, "agent")

    def evict_message(self, index: int, step: int) -> BlocksRemoved | None:
        """The agent evicts every active block overlapping message `index`, except the tail
        block. Returns None when no such block is left (already evicted, or only the tail)."""
        tail = self.tail_block
        return self._evict(
            [k for k in self.blocks_of(index) if self._active[k] and k != tail], step, "agent"
        )

    def enforce_limit(self, step: int) -> BlocksRemoved | None:
        """While more than `max_blocks` blocks are active, the engine evicts by prioritized LRU
        (see the class docstring). Returns the event (cause "engine": an OOM event for the
        score), or None when the cache was within its limit."""
        excess = self._n_active - self.max_blocks
        if excess <= 0:
            return None
        tail = self.tail_block
        candidates = sorted(
            (k for k, active in enumerate(self._active) if active and k != tail),
            key=lambda k: (self._priority[k], self._last_access[k], k),
        )
        return self._evict(sorted(candidates[:excess]), step, "engine")

    def _check_evictable(self, k: int) -> None:
        if not 0 <= k < len(self._active):
            raise ValueError(f"block {k} does not exist: valid blocks are 0..{self.n_blocks - 1}")
        if not self._active[k]:
            raise ValueError(f"block {k} is already evicted")
        if k == self.tail_block:
            raise ValueError(f"block {k} is the tail block (being written) and cannot be evicted")

    def _evict(
        self, blocks: list[int], step: int, cause: Literal["agent", "engine"]
    ) -> BlocksRemoved | None:
        if not blocks:
            return None
        for k in blocks:
            self._active[k] = False
            self._n_active -= 1
        return BlocksRemoved(step=step, blocks=tuple(blocks), cause=cause)

    # ------------------------------------------------------------------------- queries

    @property
    def active_blocks(self) -> int:
        """Blocks currently active (the masking design's Active Blocks = sum(block_mask_status))."""
        return self._n_active

    @property
    def n_blocks(self) -> int:
        """Blocks created so far, active or evicted: ceil(tokens / block_size)."""
        return len(self._active)

    @property
    def n_tokens(self) -> int:
        """Tokens appended so far."""
        return self._n_tokens

    @property
    def n_messages(self) -> int:
        return len(self._messages)

    @property
    def tail_block(self) -> int | None:
        """The block holding the newest token (never evictable); None before any append."""
        return (self._n_tokens - 1) // self.block_size if self._n_tokens else None

    def message(self, index: int) -> Message:
        self._check_message(index)
        return self._messages[index]

    def active_flags(self) -> tuple[bool, ...]:
        """Whether each block is active, by absolute index (a snapshot)."""
        return tuple(self._active)

    def is_active(self, k: int) -> bool:
        if not 0 <= k < len(self._active):
            raise ValueError(f"block {k} does not exist: valid blocks are 0..{self.n_blocks - 1}")
        return self._active[k]

    def message_span(self, index: int) -> tuple[int, int]:
        """Tokens of message `index` as `(start, end)`, end exclusive."""
        self._check_message(index)
        start = self._starts[index]
        return start, start + self._messages[index].n_tokens

    def blocks_of(self, index: int) -> range:
        """The blocks holding at least one token of message `index`."""
        start, end = self.message_span(index)
        return range(start // self.block_size, (end - 1) // self.block_size + 1)

    def visible_tokens(self, index: int) -> int:
        """Tokens of message `index` that lie in active blocks."""
        start, end = self.message_span(index)
        b = self.block_size
        return sum(
            min(end, (k + 1) * b) - max(start, k * b)
            for k in self.blocks_of(index)
            if self._active[k]
        )

    def fully_resident(self, index: int) -> bool:
        """All blocks of message `index` are active."""
        return all(self._active[k] for k in self.blocks_of(index))

    def resident_messages(self) -> list[int]:
        """Indices of the messages the cache still fully holds, ascending."""
        return [i for i in range(len(self._messages)) if self.fully_resident(i)]

    def block_table(self) -> list[BlockInfo]:
        """Every block, active or evicted, in index order (for observations)."""
        return [
            BlockInfo(
                index=k,
                active=self._active[k],
                priority=self._priority[k],
                last_access=self._last_access[k],
                messages=tuple(self._block_messages[k]),
            )
            for k in range(len(self._active))
        ]

    def _check_message(self, index: int) -> None:
        if not 0 <= index < len(self._messages):
            raise ValueError(
                f"message {index} does not exist: valid messages are 0..{len(self._messages) - 1}"
            )
