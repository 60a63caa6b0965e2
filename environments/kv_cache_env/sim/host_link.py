"""The host side of the KV cache: the CPU blocks offloaded KV occupies and the link that moves it.

It models the CPU tier of vLLM v1's KV connectors (`OffloadingConnector`, LMCache): an offload
reserves its CPU blocks at once and copies the GPU blocks out; a load brings them back when the
request is scheduled again (`WAITING_FOR_REMOTE_KVS` until the last block is in). With a finite
link (`Scenario.link_fraction_per_s`: a KV store on another host, reached over the network)
offloads and loads queue on it first come first served and it moves `blocks_per_step` blocks a
step, offloads and loads together (InferCept, arXiv 2402.01869, budgets swap per iteration for
the same reason); without one every move completes when it is asked for.

`HostLink` alone writes its counters and, on each sequence, where its KV stands on the host side
(`Sequence.cpu_blocks`, `outbound`, `inbound`). What a move does to the GPU (blocks freed as they
are copied out) is the KV-cache manager's; the scheduler, which owns the clock and the events,
joins the two (`Scheduler._transfer`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import ClassVar

from .clone_groups import shared_copy
from .sequence import Sequence


class HostLink:
    """CPU blocks for offloaded KV and the transfer queue that moves it."""

    def __init__(self, cpu_capacity: int, blocks_per_step: int) -> None:
        self.cpu_capacity = cpu_capacity
        self.cpu_used = 0
        self.blocks_per_step = blocks_per_step
        """Blocks the link moves per step, offloads and loads together (0: no limit)."""
        self.queue: deque[Sequence] = deque()
        """Sequences with blocks still to move, first come first served."""
        self.blocks_out = 0
        """Blocks copied out to CPU so far (by the link, or at once without one)."""
        self.blocks_in = 0
        """Blocks loaded back from CPU so far."""

    # --- views -------------------------------------------------------------------------------
    @property
    def room(self) -> int:
        """Free CPU blocks (what an offload must fit in)."""
        return self.cpu_capacity - self.cpu_used

    @property
    def backlog(self) -> int:
        """Blocks queued on the link (offloads and loads)."""
        return sum(s.outbound + s.inbound for s in self.queue)

    # --- moves -------------------------------------------------------------------------------
    def offload(self, seq: Sequence, blocks: int) -> bool:
        """Reserve `blocks` CPU blocks for `seq`'s KV and start copying it out. Returns whether
        the copy is complete now (no link, or nothing to move); otherwise the link frees its
        GPU blocks as it moves them (`transfer`)."""
        assert self.cpu_used + blocks <= self.cpu_capacity, "swap space exceeded"
        self.cpu_used += blocks
        seq.cpu_blocks = blocks
        if self.blocks_per_step and blocks:
            seq.outbound = blocks
            self.queue.append(seq)
            return False
        self.blocks_out += blocks
        return True

    def load(self, seq: Sequence) -> bool:
        """Start loading `seq`'s offloaded KV back. Returns whether it is in now (no link: its
        CPU copy is let go at once); otherwise the link lets it go with the last block."""
        loaded = seq.cpu_blocks
        if self.blocks_per_step:
            seq.inbound = loaded
            self.queue.append(seq)
            return False
        self.cpu_used -= loaded
        seq.cpu_blocks = 0
        self.blocks_in += loaded
        return True

    def drop(self, seq: Sequence) -> int:
        """Throw away `seq`'s CPU copy and its place on the link; returns the CPU blocks let go."""
        if seq.outbound or seq.inbound:
            self.queue.remove(seq)
            seq.outbound = seq.inbound = 0
        released = seq.cpu_blocks
        self.cpu_used -= released
        seq.cpu_blocks = 0
        return released

    def transfer(
        self, copied_out: Callable[[Sequence, int], None], loaded: Callable[[Sequence, int], None]
    ) -> int:
        """Move up to `blocks_per_step` blocks, first come first served: `copied_out(seq, n)`
        after n of an offload's blocks are out (their GPU blocks are the caller's to free),
        `loaded(seq, n)` after the last block of a load is in and its n CPU blocks were let go.
        Returns the blocks moved."""
        budget = self.blocks_per_step
        queue = self.queue
        while queue and budget:
            seq = queue[0]
            if seq.outbound:
                take = budget if budget < seq.outbound else seq.outbound
                seq.outbound -= take
                self.blocks_out += take
                copied_out(seq, take)
            else:
                take = budget if budget < seq.inbound else seq.inbound
                seq.inbound -= take
                self.blocks_in += take
                if not seq.inbound:
                    released = seq.cpu_blocks
                    self.cpu_used -= released
                    seq.cpu_blocks = 0
                    loaded(seq, released)
            budget -= take
            if not (seq.outbound or seq.inbound):
                queue.popleft()
        return self.blocks_per_step - budget

    # --- checks ------------------------------------------------------------------------------
    def check(self, holders: tuple[Sequence, ...]) -> None:
        """Assert the CPU blocks and the queue against every live sequence (`holders`);
        messages name the likely bug."""
        cpu = sum(s.cpu_blocks for s in holders)
        assert cpu == self.cpu_used <= self.cpu_capacity, f"cpu blocks {cpu} != {self.cpu_used}"
        linked = [s for s in holders if s.outbound or s.inbound]
        assert sorted(map(id, linked)) == sorted(map(id, self.queue)), "link queue out of step"
        for seq in self.queue:
            assert bool(seq.outbound) != bool(seq.inbound), f"{seq.seq_id}: both directions"

    # --- copying -----------------------------------------------------------------------------
    SHARED_FIELDS: ClassVar[tuple[str, ...]] = (
        "cpu_capacity",
        "cpu_used",
        "blocks_per_step",
        "blocks_out",
        "blocks_in",
    )
    """Fields a clone shares: numbers."""
    READ_ONLY_FIELDS: ClassVar[frozenset[str]] = frozenset()
    OWN_FIELDS: ClassVar[tuple[str, ...]] = ("queue",)
    """Fields a clone gets its own of: the queue, pointing at the clone's sequences."""

    def clone(self, copies: dict[int, Sequence]) -> HostLink:
        """An independent copy whose queue holds `copies` (by the original's id)."""
        clone = shared_copy(self)
        clone.queue = deque(copies[id(s)] for s in self.queue)
        return clone
