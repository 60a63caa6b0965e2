"""The serving engine's step mechanics: admission, chunked prefill, decode growth, completion,
preemption, swap and compression, over an exact `BlockPool`.

`Engine` carries out; it never chooses, except where a real engine chooses by itself (the
fallback preemption when growth does not fit). Validation of agent actions lives in
`Simulator`; the methods here assume a valid call and assert their preconditions.

One `step()`, in order (the issue's step order, after the agent's actions):
1. compute: prefilling sequences share the prefill budget, first admitted first; a sequence whose
   prompt completes emits its first token; decoding sequences emit `decode_rate` tokens each.
   New tokens that need blocks get them; if none are left the engine preempts (fallback policy)
   until they fit, possibly the growing sequence itself (vLLM v1's scheduler loop);
2. complete finished sequences (their blocks are freed, their prefix blocks stay cached);
3. swap in swapped-out sequences, oldest first, while blocks allow (never in the step they left);
   while any remain swapped out, no new request is admitted (vLLM v0's scheduler);
4. admit waiting requests FCFS while blocks allow (prefix hits reduce the need; the head of the
   queue blocks the rest; a request preempted this step is skipped until the next);
5. fail requests that have waited more than `max_wait_steps`;
6. enqueue this step's arrivals.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .block_pool import BlockPool
from .events import BlockEvent, EventKind, Medium, Reason, Subscriber
from .scenario import Scenario
from .sequence import Sequence
from .types import RETENTION_PRIORITY, BlockType, Quantization, Status
from .workload import Request, Schedule


@dataclass(frozen=True, slots=True)
class StepStats:
    """What one engine step did. `used_blocks` and `queue` are read at the end of the step."""

    step: int
    tokens: int
    effective_tokens: float
    """Tokens weighted by the quality factor of the precision they were generated at."""
    failures: int
    forced_preemptions: int
    completed: int
    prefix_hit_blocks: int
    prefix_lookup_blocks: int
    swap_ins: int
    swap_latency_s: float
    used_blocks: int
    queue: int


@dataclass(frozen=True, slots=True)
class Eviction:
    """One preemption, by the agent (`forced=False`) or by the engine."""

    step: int
    seq_id: str
    block_type: BlockType
    priority: float
    progress: float
    forced: bool
    freed_blocks: int


class _Tally:
    __slots__ = (
        "completed",
        "effective",
        "failures",
        "forced",
        "hits",
        "lookups",
        "swap_ins",
        "swap_latency",
        "tokens",
    )

    def __init__(self) -> None:
        self.tokens = 0
        self.effective = 0.0
        self.failures = 0
        self.forced = 0
        self.completed = 0
        self.hits = 0
        self.lookups = 0
        self.swap_ins = 0
        self.swap_latency = 0.0


class Engine:
    """State and mechanics of one simulated server over one schedule."""

    def __init__(self, scenario: Scenario, schedule: Schedule, capacity: int) -> None:
        self.scenario = scenario
        self.schedule = schedule
        self.block_size = scenario.block_size
        self.pool = BlockPool(capacity)
        self.cpu_capacity = int(capacity * scenario.cpu_capacity_fraction)
        self.cpu_used = 0
        self.t = 0
        """Engine clock: the step about to run."""
        self.running: list[Sequence] = []
        """Resident sequences in the order they (re)entered the running set."""
        self.swapped: list[Sequence] = []
        """Swapped-out sequences, oldest swap first."""
        self.waiting: deque[Sequence] = deque()
        self.sequences: dict[str, Sequence] = {}
        """Every request that has arrived, whatever its status."""
        self.evictions: list[Eviction] = []
        self.admissions = 0
        self.subscribers: list[Subscriber] = []
        self._arrivals = schedule.arrivals_by_step()
        self._quality = {
            (level, block_type): scenario.quality(level, block_type)
            for level in Quantization
            for block_type in BlockType
        }
        self._prefill_budget = scenario.prefill_tokens_per_step
        self._per_block = {level: self.block_size * level.packing for level in Quantization}

    # --- geometry ----------------------------------------------------------------------------
    def blocks_for(self, seq: Sequence, level: Quantization | None = None) -> int:
        """Private physical blocks `seq` needs at `level` (default: its own)."""
        per_block = self.block_size * (level or seq.quantization_level).packing
        return -(-seq.private_tokens // per_block)

    def freeable_blocks(self, seq: Sequence) -> int:
        """GPU blocks that become available if `seq` is evicted now: its private blocks plus the
        prefix blocks it alone references (shared ones stay pinned by the others)."""
        return seq.gpu_blocks + self._sole_prefix_blocks(seq)

    def _sole_prefix_blocks(self, seq: Sequence) -> int:
        """Prefix blocks `seq` holds that no other sequence references."""
        if not seq.prefix_held:
            return 0
        held = seq.request.prefix_hashes[: seq.prefix_held]
        return list(map(self.pool.ref_counts.__getitem__, held)).count(1)

    def admission_need(self, seq: Sequence) -> int:
        """Fresh blocks admitting `seq` now takes, net of prefix hits."""
        hashes = seq.request.prefix_hashes
        hits, _ = self.pool.cached_hit_length(hashes)
        return len(hashes) - hits + self.blocks_for(seq, Quantization.FP16)

    def head_need(self) -> int:
        """Fresh blocks the first admissible waiting request needs (0 if none)."""
        for seq in self.waiting:
            if seq.not_before <= self.t:
                return self.admission_need(seq)
        return 0

    def queue_demand(self) -> int:
        """Fresh blocks every waiting request needs, each counted against today's cache."""
        return sum(self.admission_need(seq) for seq in self.waiting)

    # --- actions (preconditions asserted; Simulator validates) -------------------------------
    def evict(self, seq: Sequence, *, forced: bool = False) -> int:
        """Preempt by recompute: free everything it holds, put it at the queue's front."""
        assert seq.status in (Status.RUNNING, Status.SWAPPED), f"evict of {seq.status} sequence"
        progress = seq.progress
        freed = 0
        if seq.status is Status.RUNNING:
            self.running.remove(seq)
            freed = seq.gpu_blocks
            self.pool.free(seq.gpu_blocks)
            self._emit("removed", "gpu", "preempt" if forced else "evict", seq, seq.gpu_blocks)
        else:
            self.swapped.remove(seq)
            self.cpu_used -= seq.cpu_blocks
            self._emit("removed", "cpu", "preempt" if forced else "evict", seq, seq.cpu_blocks)
        freed += self._release_prefix(seq)
        seq.gpu_blocks = seq.cpu_blocks = 0
        seq.status = Status.WAITING
        seq.quantization_level = Quantization.FP16
        seq.prefill_remaining = 0
        seq.wait_since = self.t
        seq.not_before = self.t + 1
        seq.preemptions += 1
        self.waiting.appendleft(seq)
        self.evictions.append(
            Eviction(self.t, seq.seq_id, seq.block_type, seq.priority, progress, forced, freed)
        )
        return freed

    def compress(self, seq: Sequence) -> int:
        """Move one quantization level down and repack the private blocks; returns blocks freed."""
        assert seq.status is Status.RUNNING, f"compress of {seq.status} sequence"
        level = seq.quantization_level.next_level
        assert level is not None, "compress past int4"
        seq.quantization_level = level
        new_blocks = self.blocks_for(seq)
        freed = seq.gpu_blocks - new_blocks
        self.pool.free(freed)
        seq.gpu_blocks = new_blocks
        self._emit("removed", "gpu", "compress", seq, freed)
        return freed

    def swap_out(self, seq: Sequence) -> int:
        """Move the private blocks to CPU (prefix references stay); returns GPU blocks freed."""
        assert seq.status is Status.RUNNING, f"swap of {seq.status} sequence"
        blocks = seq.gpu_blocks
        assert self.cpu_used + blocks <= self.cpu_capacity, "swap space exceeded"
        self.running.remove(seq)
        self.pool.free(blocks)
        self.cpu_used += blocks
        seq.cpu_blocks, seq.gpu_blocks = blocks, 0
        seq.status = Status.SWAPPED
        seq.not_before = self.t + 1
        self.swapped.append(seq)
        self._emit("removed", "gpu", "swap_out", seq, blocks)
        self._emit("stored", "cpu", "swap_out", seq, blocks)
        return blocks

    # --- the step ----------------------------------------------------------------------------
    def step(self) -> StepStats:
        tally = _Tally()
        self._compute(tally)
        self._complete(tally)
        self._swap_in_and_admit(tally)
        self._fail_expired(tally)
        self._arrive()
        stats = StepStats(
            step=self.t,
            tokens=tally.tokens,
            effective_tokens=tally.effective,
            failures=tally.failures,
            forced_preemptions=tally.forced,
            completed=tally.completed,
            prefix_hit_blocks=tally.hits,
            prefix_lookup_blocks=tally.lookups,
            swap_ins=tally.swap_ins,
            swap_latency_s=tally.swap_latency,
            used_blocks=self.pool.used,
            queue=len(self.waiting),
        )
        self.t += 1
        return stats

    def _compute(self, tally: _Tally) -> None:
        # The hot loop of the simulator: attributes are read into locals on purpose.
        t = self.t
        budget = self._prefill_budget
        pool = self.pool
        quality = self._quality
        per_block_of = self._per_block
        running_status = Status.RUNNING
        tokens = 0
        effective = 0.0
        for seq in tuple(self.running):
            if seq.status is not running_status:
                continue  # preempted earlier in this loop
            request = seq.request
            if seq.prefill_remaining:
                if not budget:
                    continue
                take = min(budget, seq.prefill_remaining)
                budget -= take
                seq.prefill_remaining -= take
                seq.last_access_step = t
                if seq.prefill_remaining:
                    continue
                n = 1  # the step that finishes the prompt emits the first token
            else:
                n = min(request.decode_rate, request.output_tokens - seq.generated)
            level = seq.quantization_level
            private = seq.private_prompt + seq.generated
            need = -(-(private + n) // per_block_of[level]) - seq.gpu_blocks
            if need > 0:
                if need > pool.num_free + len(pool.cached):
                    self._make_room(need, seq, tally)
                    if seq.status is not running_status:
                        continue
                self._reclaimed(pool.allocate(need))
                seq.gpu_blocks += need
                if self.subscribers:
                    self._emit("stored", "gpu", "grow", seq, need, (private, private + n))
            seq.generated += n
            seq.last_access_step = t
            tokens += n
            effective += n * quality[level, request.block_type]
        tally.tokens += tokens
        tally.effective += effective

    def _make_room(self, need: int, growing: Sequence, tally: _Tally) -> None:
        while need > self.pool.available:
            victim = self._fallback_victim()
            self.evict(victim, forced=True)
            tally.forced += 1
            if victim is growing:
                return

    def _fallback_victim(self) -> Sequence:
        if self.scenario.fallback == "vllm":
            return self.running[-1]  # newest first: vLLM's running.pop()
        return min(
            self.running,
            key=lambda s: (RETENTION_PRIORITY[s.block_type], s.last_access_step, -s.admitted_order),
        )

    def _complete(self, tally: _Tally) -> None:
        t = self.t
        still_running = []
        append = still_running.append
        for seq in self.running:
            if seq.generated >= seq.request.output_tokens:
                self._finish(seq)
                tally.completed += 1
            else:
                seq.hotness = 0.5 * seq.hotness + (0.5 if seq.last_access_step == t else 0.0)
                append(seq)
        self.running = still_running
        for seq in self.swapped:
            seq.hotness *= 0.5

    def _finish(self, seq: Sequence) -> None:
        self.pool.free(seq.gpu_blocks)
        self._emit("removed", "gpu", "finish", seq, seq.gpu_blocks)
        self._release_prefix(seq)
        seq.gpu_blocks = 0
        seq.status = Status.FINISHED

    def _swap_in_and_admit(self, tally: _Tally) -> None:
        t = self.t
        pool = self.pool
        while self.swapped:
            seq = self.swapped[0]
            if seq.not_before > t or seq.cpu_blocks > pool.available:
                break
            self._swap_in(seq, tally)
        if self.swapped:
            return  # vLLM v0: no new prefills while requests are swapped out
        if not self.waiting:
            return
        remaining: deque[Sequence] = deque()
        blocked = False
        for seq in self.waiting:
            if blocked or seq.not_before > t:
                remaining.append(seq)
            elif not self._try_admit(seq, tally):
                blocked = True  # FCFS: the head blocks everyone behind it
                remaining.append(seq)
        self.waiting = remaining

    def _swap_in(self, seq: Sequence, tally: _Tally) -> None:
        blocks = seq.cpu_blocks
        self._reclaimed(self.pool.allocate(blocks))
        self.swapped.pop(0)
        self.cpu_used -= blocks
        seq.gpu_blocks, seq.cpu_blocks = blocks, 0
        seq.status = Status.RUNNING
        seq.admitted_order = self.admissions
        self.admissions += 1
        self.running.append(seq)
        scenario = self.scenario
        nbytes = seq.private_tokens * scenario.bytes_per_token * seq.quantization_level.multiplier
        tally.swap_ins += 1
        tally.swap_latency += scenario.swap_overhead_s + nbytes / scenario.pcie_bytes_per_s
        self._emit("removed", "cpu", "swap_in", seq, blocks)
        self._emit("stored", "gpu", "swap_in", seq, blocks)

    def _try_admit(self, seq: Sequence, tally: _Tally) -> bool:
        pool = self.pool
        request = seq.request
        hashes = request.prefix_hashes
        hits, cached_hits = pool.cached_hit_length(hashes)
        private_blocks = self.blocks_for(seq, Quantization.FP16)
        if len(hashes) - hits + private_blocks > pool.available - cached_hits:
            return False
        _, stored, reclaimed = pool.acquire_prefix(hashes, hits)
        self._reclaimed(reclaimed)
        if stored and self.subscribers:
            self._emit_prefix("stored", "admit", tuple(stored))
        self._reclaimed(pool.allocate(private_blocks))
        seq.gpu_blocks = private_blocks
        seq.prefix_held = len(hashes)
        seq.status = Status.RUNNING
        seq.quantization_level = Quantization.FP16
        seq.admitted_order = self.admissions
        self.admissions += 1
        hit_tokens = min(hits * self.block_size, request.prompt_tokens)
        seq.prefill_remaining = max(request.prompt_tokens + seq.generated - hit_tokens, 1)
        self.running.append(seq)
        tally.hits += hits
        tally.lookups += len(hashes)
        self._emit("stored", "gpu", "admit", seq, private_blocks)
        return True

    def _fail_expired(self, tally: _Tally) -> None:
        limit = self.scenario.max_wait_steps
        t = self.t
        if not any(t - seq.wait_since > limit for seq in self.waiting):
            return
        remaining: deque[Sequence] = deque()
        for seq in self.waiting:
            if t - seq.wait_since > limit:
                seq.status = Status.FAILED
                tally.failures += 1
            else:
                remaining.append(seq)
        self.waiting = remaining

    def _arrive(self) -> None:
        t = self.t
        if t >= len(self._arrivals):
            return
        for request in self._arrivals[t]:
            private_prompt = max(
                0, request.prompt_tokens - len(request.prefix_hashes) * self.block_size
            )
            seq = Sequence(request, private_prompt, wait_since=t, not_before=t + 1)
            self.sequences[request.seq_id] = seq
            self.waiting.append(seq)

    # --- prefix references and events --------------------------------------------------------
    def _release_prefix(self, seq: Sequence) -> int:
        """Drop `seq`'s prefix references; returns how many blocks fell to count 0."""
        released = self._sole_prefix_blocks(seq)
        self.pool.release_prefix(seq.request.prefix_hashes[: seq.prefix_held])
        seq.prefix_held = 0
        return released

    def _reclaimed(self, hashes: list[int]) -> None:
        if hashes and self.subscribers:
            self._emit_prefix("removed", "reclaim", tuple(hashes))

    def _emit(
        self,
        kind: EventKind,
        medium: Medium,
        reason: Reason,
        seq: Sequence,
        blocks: int,
        token_range: tuple[int, int] | None = None,
    ) -> None:
        if not self.subscribers or not blocks:
            return
        if token_range is None:
            start = len(seq.request.prefix_hashes) * self.block_size
            start = min(start, seq.request.prompt_tokens)
            token_range = (start, start + seq.private_tokens)
        event = BlockEvent(kind, self.t, medium, reason, seq.seq_id, blocks, (), token_range)
        for subscriber in self.subscribers:
            subscriber(event)

    def _emit_prefix(self, kind: EventKind, reason: Reason, hashes: tuple[int, ...]) -> None:
        event = BlockEvent(kind, self.t, "gpu", reason, "prefix", len(hashes), hashes)
        for subscriber in self.subscribers:
            subscriber(event)

    # --- copies and checks -------------------------------------------------------------------
    def clone(self) -> Engine:
        """An independent copy (no subscribers) that shares only immutable data."""
        clone = Engine.__new__(Engine)
        clone.scenario = self.scenario
        clone.schedule = self.schedule
        clone.block_size = self.block_size
        clone.pool = self.pool.copy()
        clone.cpu_capacity = self.cpu_capacity
        clone.cpu_used = self.cpu_used
        clone.t = self.t
        copies = {id(s): _copy_sequence(s) for s in (*self.running, *self.swapped, *self.waiting)}
        clone.running = [copies[id(s)] for s in self.running]
        clone.swapped = [copies[id(s)] for s in self.swapped]
        clone.waiting = deque(copies[id(s)] for s in self.waiting)
        clone.sequences = {k: copies.get(id(s), s) for k, s in self.sequences.items()}
        clone.evictions = list(self.evictions)
        clone.admissions = self.admissions
        clone.subscribers = []
        clone._arrivals = self._arrivals
        clone._quality = self._quality
        clone._prefill_budget = self._prefill_budget
        clone._per_block = self._per_block
        return clone

    def check(self) -> None:
        """Assert every accounting invariant; messages name the likely bug."""
        pool = self.pool
        pool.check()
        resident = self.running
        assert all(s.status is Status.RUNNING for s in resident), "non-running in running list"
        assert all(s.status is Status.SWAPPED for s in self.swapped), "non-swapped in swap list"
        assert all(s.status is Status.WAITING for s in self.waiting), "non-waiting in queue"
        private = sum(s.gpu_blocks for s in resident)
        assert private == pool.num_private, f"private blocks {private} != pool {pool.num_private}"
        for seq in resident:
            assert seq.gpu_blocks == self.blocks_for(seq), f"{seq.seq_id}: blocks != ceil(tokens)"
        cpu = sum(s.cpu_blocks for s in self.swapped)
        assert cpu == self.cpu_used <= self.cpu_capacity, f"cpu blocks {cpu} != {self.cpu_used}"
        refs: dict[int, int] = {}
        for seq in (*resident, *self.swapped):
            assert seq.prefix_held == len(seq.request.prefix_hashes), "partial prefix reference"
            for h in seq.request.prefix_hashes:
                refs[h] = refs.get(h, 0) + 1
        assert refs == pool.ref_counts, "reference counts disagree with holders"
        for seq in (*self.waiting, *(s for s in self.sequences.values() if s.status in _DONE)):
            assert seq.gpu_blocks == seq.cpu_blocks == seq.prefix_held == 0, (
                f"{seq.seq_id} ({seq.status}) still holds blocks"
            )
        assert pool.used <= pool.num_blocks, "usage above physical capacity"


_DONE = (Status.FINISHED, Status.FAILED)


def _copy_sequence(seq: Sequence) -> Sequence:
    return Sequence(
        request=seq.request,
        private_prompt=seq.private_prompt,
        wait_since=seq.wait_since,
        not_before=seq.not_before,
        status=seq.status,
        quantization_level=seq.quantization_level,
        generated=seq.generated,
        prefill_remaining=seq.prefill_remaining,
        gpu_blocks=seq.gpu_blocks,
        cpu_blocks=seq.cpu_blocks,
        prefix_held=seq.prefix_held,
        last_access_step=seq.last_access_step,
        hotness=seq.hotness,
        admitted_order=seq.admitted_order,
        preemptions=seq.preemptions,
    )


__all__ = ["Engine", "Eviction", "Request", "StepStats"]
