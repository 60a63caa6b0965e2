"""The scheduler: the serving engine's step mechanics - session returns, chunked prefill, decode
growth, call completion and pauses, admission, preemption, offload (swap) and compression.

The engine is vLLM v1's three roles: this scheduler (the clock, the queues, every request's
progress, the events it publishes), the KV-cache manager over the block pool (`kv_manager.py`:
what each sequence holds on the GPU) and the host link (`host_link.py`: CPU blocks and the
transfer queue). Each writes only its own state; the scheduler drives the other two.

It models vLLM v1 (`vllm/v1/core/sched/scheduler.py`, `vllm/v1/core/kv_cache_manager.py`):
- blocks are allocated for the tokens computed in the step (`KVCacheManager.allocate_slots`
  allocates for `num_new_tokens`), prefill is chunked under a per-step token budget
  (`max_num_batched_tokens`), shared prefix blocks are found by hash
  (`find_longest_cache_hit`) and cached blocks of finished requests are reclaimed least
  recently used first (`BlockPool.get_new_blocks` pops the free queue's head);
- when an allocation fails the scheduler preempts by recompute, newest running request first
  (`self.running.pop()` in `schedule()`), possibly the request being scheduled itself; the
  victim's blocks are freed and it goes back to the front of the waiting queue
  (`_preempt_request` + `prepend_request`). The `trtllm` fallback instead evicts by TensorRT-LLM's
  prioritized LRU (retention priority, then least recently used);
- there is no swap of running requests in v1: `swap` here means CPU offload through a KV
  connector (vLLM's `OffloadingConnector` / LMCache): the KV is copied to CPU, the request
  leaves the GPU and, when it is scheduled again, its KV is loaded back instead of recomputed
  (`WAITING_FOR_REMOTE_KVS`). No admission gate waits on offloaded requests (v0's did).
Sessions (agentic and chat requests intercepted by tool calls or a human, InferCept, arXiv
2402.01869) pause between calls. A paused session computes nothing; by default its KV stays on
the GPU, pinned (what a serving stack that retains a session's KV does); only the agent moves or
discards it: the engine's own fallback never touches paused KV.

`Scheduler` carries out; it never chooses, except where a real engine chooses by itself (the
fallback preemption). Validation of agent actions lives in `Simulator`; the methods here assume
a valid call and assert their preconditions.

One `step()`, in order (after the agent's actions):
1. returns: paused sessions whose pause ends start their next call: with KV on the GPU they run
   at once (their new prompt is prefilled); offloaded or discarded ones join the waiting queue's
   tail (loaded, or recomputed, on admission);
2. compute: running sequences in order share the prefill budget (first come first); a sequence
   whose prefill completes emits its first token; decoding sequences emit `decode_rate` tokens.
   Blocks are allocated for what is computed; if none are left the engine preempts (fallback);
3. complete: a finished call pauses its session until the next call (or, after the last call or
   while draining, finishes it: its blocks are freed, its prefix blocks stay cached);
4. admit waiting requests FCFS while blocks allow (prefix hits reduce the need; offloaded KV is
   loaded; the head of the queue blocks the rest; a request preempted this step waits a step);
5. fail requests that have waited more than `max_wait_steps`, and resumed calls whose first
   token has not come `max_wait_steps` after their return: a per-request time-to-first-token
   SLO (DistServe, Zhong et al., OSDI 2024, sets TTFT SLOs of 0.25-4 s for chatbots and 15 s
   for summarization; Mooncake, FAST 2025, rejects requests predicted to miss theirs). The
   client of a resumed call waits through queueing, loading and recompute alike, so a
   discarded long context that cannot be recomputed in time fails - InferCept's cost of
   discarding;
6. enqueue this step's arrivals (none while draining).

Along the way it logs what each request's client saw (`Sequence.first_token_wait`,
`resumed_waits`, `stalls`) and the prefill tokens recomputed after a discard
(`recomputed_tokens`); with the blocks the host link moved (`HostLink.blocks_out`, `blocks_in`)
they are what the episode record's serving part (`record.ServingRecord`) is read from.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from .catalogue import informative, log_ratio
from .clone_groups import shared_copy
from .events import BlockEvent, EventKind, Medium, Reason, Subscriber
from .frozen import slot_constructor
from .host_link import HostLink
from .kv_manager import KVCacheManager
from .record import EvictionRecord
from .scenario import Scenario
from .sequence import BETWEEN_CALLS, Sequence
from .vocabulary import RETENTION_PRIORITY, BlockType, Quantization, Status
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
    active_blocks: int = 0
    """Private GPU blocks of the sequences that computed in this step."""
    transferred: int = 0
    """Blocks the host link moved in this step (offloads and loads together)."""


Eviction = EvictionRecord
"""The engine logs each discard of KV as the episode record's own `EvictionRecord` (one record;
this name stays for callers that imported it from here)."""

_make_step_stats = slot_constructor(StepStats)
_make_eviction = slot_constructor(EvictionRecord)


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


class Scheduler:
    """State and mechanics of one simulated server over one schedule: it owns the clock, the
    queues and every request's progress, and drives its KV-cache manager (`kv`) and its host
    link (`host`)."""

    def __init__(
        self, scenario: Scenario, schedule: Schedule, capacity: int, *, reference: bool = False
    ) -> None:
        """`reference=True`: the unconstrained reference run played step by step
        (`simulator.run_reference_stepwise`, the oracle of the specialised `reference.py` that
        resets run), which saves memory (a full Mooncake replay's reference otherwise holds
        ~13 MiB it never reads): `capacity` is never reached, so its pool keeps cached blocks
        without LRU order (see `BlockPool`), and nobody looks its requests up by id, so
        `sequences` stays empty and finished requests are freed; it has no CPU tier."""
        self.scenario = scenario
        self.schedule = schedule
        self.kv = KVCacheManager(scenario, capacity, reclaims=not reference)
        cpu = 0 if reference else int(capacity * scenario.cpu_capacity_fraction)
        self.host = HostLink(cpu, scenario.link_blocks(capacity))
        self._indexes = not reference
        self.t = 0
        """Engine clock: the step about to run."""
        self.running: list[Sequence] = []
        """Sequences computing on the GPU in the order they (re)entered the running set."""
        self.paused: list[Sequence] = []
        """Sessions between two calls (PAUSED on GPU, SWAPPED to CPU, DISCARDED), by pause."""
        self._next_return = _NEVER
        """The earliest `resume_step` in `paused` (kept where `paused` changes): most steps no
        session returns, and this one comparison says so."""
        self.waiting: deque[Sequence] = deque()
        self.sequences: dict[str, Sequence] = {}
        """Every request that has arrived, whatever its status (none in a reference engine)."""
        self.evictions: list[EvictionRecord] = []
        """Every discard of KV, by the agent or forced, warm-up included (turn < 0)."""
        self.admissions = 0
        self.draining = False
        """No arrivals and no new pauses: set for the agent-free drain that ends an episode."""
        self.subscribers: list[Subscriber] = []
        self._arrivals = schedule.arrivals_by_step()
        self._quality = _quality_table(scenario)
        self._prefill_budget = scenario.prefill_tokens_per_step
        self._step_seconds = scenario.step_seconds
        self.max_decode_blocks = self._decode_blocks_at_most(schedule)
        """Blocks one decode step can take at most for any sequence of the schedule (its
        fastest decode rate at the smallest block): `Table.decode_growth_at_most`."""
        self.recomputed_tokens = 0
        """Prefill tokens computed again so far because their KV had been discarded."""

    def _decode_blocks_at_most(self, schedule: Schedule) -> int:
        fastest = max((r.decode_rate for r in schedule.requests), default=0)
        return -(-fastest // min(self.kv.tokens_per_block.values()))

    def rewrite_requests(self, requests: Mapping[str, Request], schedule: Schedule) -> None:
        """Give the arrived requests `requests` names other records, and the steps to come
        `schedule`'s arrivals (a what-if copy: `Simulator.rewrite`). What the engine derived
        from the old records is recomputed: where each current call ends (it began at the same
        `generated`), each session's total output, when each pause ends, the next return, the
        arrivals by step and the fastest decode growth."""
        live = {id(s) for s in (*self.running, *self.paused, *self.waiting)}
        for seq_id, request in requests.items():
            seq = self.sequences[seq_id]
            if id(seq) not in live:  # a finished or failed record, which clones share
                seq = self.sequences[seq_id] = seq.copy()
            start = seq.call_end - seq.call_output  # `generated` when its current call began
            seq.request = request
            seq.call_end = start + seq.call_output
            seq.total_output = request.total_output
            if seq.status in BETWEEN_CALLS:
                seq.resume_step = seq.paused_since + request.followups[seq.call].pause_steps
        self._next_return = min((s.resume_step for s in self.paused), default=_NEVER)
        self.schedule = schedule
        self._arrivals = schedule.arrivals_by_step()
        self.max_decode_blocks = self._decode_blocks_at_most(schedule)

    # --- what the queue needs ----------------------------------------------------------------
    def head_need(self) -> int:
        """Fresh blocks the first admissible waiting request needs (0 if none)."""
        for seq in self.waiting:
            if seq.not_before <= self.t and not seq.outbound:
                return self.kv.admission_need(seq)
        return 0

    def queue_demand(self) -> int:
        """Fresh blocks every waiting request needs, each counted against today's cache."""
        return sum(self.kv.admission_need(seq) for seq in self.waiting)

    def recent_arrivals(self, steps: int) -> int:
        """Requests that arrived over the last `steps` steps (none arrive while draining)."""
        arrivals = self._arrivals
        return sum(
            len(arrivals[k]) for k in range(max(0, self.t - steps), min(self.t, len(arrivals)))
        )

    @property
    def cpu_room(self) -> int:
        """Free CPU blocks (the `Server` the action table's validity rule reads)."""
        return self.host.room

    # --- actions (preconditions asserted; Simulator validates) -------------------------------
    def evict(self, seq: Sequence, *, forced: bool = False) -> int:
        """Discard `seq`'s KV. A running sequence is preempted by recompute (back to the queue's
        front); a paused session's KV (on GPU or CPU) is thrown away and recomputed when its next
        call arrives. Returns the GPU blocks freed."""
        status = seq.status
        assert status in (Status.RUNNING, Status.PAUSED, Status.SWAPPED), f"evict of {status}"
        progress = seq.progress
        reason: Reason = "preempt" if forced else "evict"
        held = seq.context_tokens - seq.prefill_remaining  # tokens whose KV it had
        if held > seq.lost_tokens:
            seq.lost_tokens = held
        freed = self._drop_kv(seq, reason)
        self.kv.reset_precision(seq)
        seq.prefill_remaining = 0
        seq.preemptions += 1
        if status is Status.RUNNING:
            self._requeue_front(seq)
        else:
            seq.status = Status.DISCARDED
        self.evictions.append(
            _make_eviction(  # EvictionRecord(...), built faster
                self.t - self.scenario.warmup_steps,  # the agent turn it happened in
                seq.seq_id,
                seq.block_type,
                seq.priority,
                progress,
                forced,
                freed,
                status is not Status.RUNNING,
            )
        )
        return freed

    def _drop_kv(self, seq: Sequence, reason: Reason) -> int:
        """Throw away everything `seq` holds: its GPU blocks and prefix references, its CPU
        blocks, and its place on the transfer link. Returns the GPU blocks that became
        available."""
        private, released = self.kv.free(seq)
        self._emit("removed", "gpu", reason, seq, private)
        self._emit("removed", "cpu", reason, seq, self.host.drop(seq))
        return private + released

    def compress(self, seq: Sequence) -> int:
        """Move one quantization level down and repack the private blocks; returns blocks freed."""
        assert seq.status in (Status.RUNNING, Status.PAUSED), f"compress of {seq.status}"
        freed = self.kv.compress(seq)
        self._emit("removed", "gpu", "compress", seq, freed)
        return freed

    def swap_out(self, seq: Sequence) -> int:
        """Offload the private blocks to CPU (their CPU blocks are reserved now). A running
        sequence leaves the GPU for the queue's front (it loads its KV back on readmission); a
        paused session stays paused on CPU. With a transfer link (`HostLink.blocks_per_step`),
        its GPU blocks and prefix references stay until the link has moved them (`_transfer`),
        so nothing is freed now; without one the move is instant. Returns GPU blocks freed
        now."""
        assert seq.status in (Status.RUNNING, Status.PAUSED), f"swap of {seq.status} sequence"
        assert not seq.inbound, "swap of a sequence still loading its KV"
        blocks = seq.gpu_blocks
        freed = 0
        if self.host.offload(seq, blocks):
            private, released = self.kv.free(seq)
            self._emit("removed", "gpu", "swap_out", seq, private)
            freed = private + released
        if seq.status is Status.RUNNING:
            self._requeue_front(seq)
        else:
            seq.status = Status.SWAPPED
        self._emit("stored", "cpu", "swap_out", seq, blocks)
        return freed

    def _requeue_front(self, seq: Sequence) -> None:
        """A running sequence that lost its GPU KV (recompute or offload) waits at the queue's
        front (vLLM's `prepend_request`), not readmitted in the step it left. Its client's
        patience runs from the last token it received (a streaming client's read timeout:
        httpx restarts it when bytes arrive, never because the server re-queued the request
        or recomputed its prompt): one preempted before it emitted again keeps its earlier
        wait, so preempting a request every turn cannot hold off its timeout."""
        self.running.remove(seq)
        seq.status = Status.WAITING
        if seq.token_step > seq.wait_since:
            seq.wait_since = seq.token_step
        seq.not_before = self.t + 1
        self.waiting.appendleft(seq)

    # --- the step ----------------------------------------------------------------------------
    def step(self) -> StepStats:
        tally = _Tally()
        transferred = self._transfer() if self.host.queue else 0
        self._return_paused()
        active = self._compute(tally)
        self._complete(tally)
        self._admit(tally)
        self._fail_expired(tally)
        self._arrive()
        # StepStats(...), built faster (one per step; by position, ~40% less than by name)
        stats = _make_step_stats(
            self.t,  # step
            tally.tokens,  # tokens
            tally.effective,  # effective_tokens
            tally.failures,  # failures
            tally.forced,  # forced_preemptions
            tally.completed,  # completed
            tally.hits,  # prefix_hit_blocks
            tally.lookups,  # prefix_lookup_blocks
            tally.swap_ins,  # swap_ins
            tally.swap_latency,  # swap_latency_s
            self.kv.pool.used,  # used_blocks
            len(self.waiting),  # queue
            active,  # active_blocks
            transferred,  # transferred
        )
        self.t += 1
        return stats

    def fail_unfinished(self) -> int:
        """The drain's safety cap was reached (a runaway engine): every request still running,
        waiting or paused fails. Returns how many failed."""
        failed = 0
        for seq in (*self.running, *self.waiting, *self.paused):
            self._drop_kv(seq, "fail")
            seq.status = Status.FAILED
            failed += 1
        self.running.clear()
        self.waiting.clear()
        self.paused.clear()
        self._next_return = _NEVER
        return failed

    @property
    def idle(self) -> bool:
        """Nothing left to do: no running, waiting or paused request."""
        return not (self.running or self.waiting or self.paused)

    def _transfer(self) -> int:
        """Let the host link move this step's blocks (`HostLink.transfer`): an offload's GPU
        blocks are freed as they are copied out (its prefix references when the last one is),
        a load's CPU copy is let go when the last block is in."""
        return self.host.transfer(self._copied_out, self._loaded)

    def _copied_out(self, seq: Sequence, blocks: int) -> None:
        self.kv.copied_out(seq, blocks)
        self._emit("removed", "gpu", "swap_out", seq, blocks)
        if not seq.outbound:
            self.kv.release_prefix(seq)

    def _loaded(self, seq: Sequence, blocks: int) -> None:
        self._emit("removed", "cpu", "swap_in", seq, blocks)

    def _return_paused(self) -> None:
        t = self.t
        if self._next_return > t:
            return
        still = []
        next_return = _NEVER
        for seq in self.paused:
            if seq.resume_step > t:
                still.append(seq)
                if seq.resume_step < next_return:
                    next_return = seq.resume_step
                continue
            follow = seq.request.followups[seq.call]
            seq.call += 1
            if informative(follow.pause, self._step_seconds):
                seq.pauses_done += 1
                seq.log_ratio_sum += log_ratio(follow.pause, follow.pause_steps, self._step_seconds)
            seq.call_end = seq.generated + follow.output_tokens
            seq.private_prompt += follow.prompt_tokens
            seq.paused_since = seq.resume_step = -1
            seq.first_token_by = t + self.scenario.max_wait_steps
            if seq.status is Status.PAUSED:
                seq.status = Status.RUNNING
                seq.prefill_remaining = follow.prompt_tokens
                seq.admitted_order = self.admissions
                self.admissions += 1
                self.running.append(seq)
                continue
            if seq.status is Status.SWAPPED:
                seq.prefill_remaining = follow.prompt_tokens  # its KV loads on admission
            seq.status = Status.WAITING
            seq.wait_since = t
            seq.not_before = t
            self.waiting.append(seq)
        self.paused = still
        self._next_return = next_return

    def _compute(self, tally: _Tally) -> int:
        """Phase 2: prefill chunks and decode tokens, allocating their blocks; returns the
        private blocks of the sequences that computed. The hot loop of the simulator:
        attributes are read into locals on purpose. `preempted` says whether the fallback
        preempted in this step (only then can a later sequence have left the running set). The
        fresh blocks decode growth takes are counted in `free` / `taken` and taken from the pool
        (`BlockPool.take_free`, with its peak) before anything else reads or changes it (`_grow`,
        the loop's end);
        used blocks only grow in between, so the peak then is the peak of every allocation.
        (`KVCacheManager.allocate` written out: the one writer of `gpu_blocks` outside it.)"""
        kvm = self.kv
        t, budget, pool = self.t, self._prefill_budget, kvm.pool
        quality, per_block_of, base_level = self._quality, kvm.tokens_per_block, kvm.base_level
        running_status = Status.RUNNING
        preempted = False
        tokens = active = taken = 0
        effective = 0.0
        free = pool.num_free
        for seq in tuple(self.running):
            if preempted and seq.status is not running_status:
                continue  # preempted earlier in this loop
            if seq.inbound:
                continue  # its KV is still loading over the link
            remaining = seq.prefill_remaining
            generated = seq.generated
            level = seq.quantization_level
            # (conditional expressions instead of min(): no builtin call per sequence and step)
            if remaining:
                if not budget:
                    continue
                take = budget if budget < remaining else remaining
                # the step that ends the prompt emits a token (unless the call is complete)
                n = 1 if take == remaining and generated < seq.call_end else 0
                left = remaining - take
                private = seq.private_prompt + generated + n
                kv = private - left if left < private else 0
            else:  # decoding (most sequences, most steps): all of its private context has KV
                n = seq.call_end - generated
                rate = seq.request.decode_rate
                if rate < n:
                    n = rate
                kv = seq.private_prompt + generated + n
            gpu = seq.gpu_blocks
            need = -(-kv // per_block_of[level]) - gpu
            if need > 0:
                if need <= free and not self.subscribers:  # `pool.allocate`'s fast path
                    free -= need
                    taken += need
                else:
                    pool.take_free(taken)  # (free == pool.num_free - taken)
                    taken = 0
                    grown, others = self._grow(seq, need, kv, tally)
                    preempted = preempted or others
                    free = pool.num_free
                    if not grown:
                        continue
                gpu += need
                seq.gpu_blocks = gpu
            if remaining:  # (after the allocation: a sequence preempted by it takes nothing)
                budget -= take
                seq.prefill_remaining = left
                if seq.lost_tokens:
                    self._recompute(seq, remaining, take)
            if n:
                if seq.token_step != t - 1:  # not the next token of a call decoding at its pace
                    self._first_or_stall(seq, remaining)
                seq.first_token_by = -1
                seq.token_step = t
            seq.generated = generated + n
            seq.last_access_step = t
            tokens += n
            if level is base_level:
                effective += n  # quality 1.0 at the base precision: n * 1.0 == n, no lookup
            else:
                effective += n * quality[level, seq.request.block_type]
            active += gpu
        pool.take_free(taken)
        tally.tokens += tokens
        tally.effective += effective
        return active

    def _recompute(self, seq: Sequence, remaining: int, take: int) -> None:
        """Count the tokens of a prefill chunk (`take` of the `remaining`, computed in context
        order) that had KV before it was discarded (`Sequence.lost_tokens`)."""
        start = seq.context_tokens - remaining
        end = start + take
        lost = seq.lost_tokens
        if start < lost:
            self.recomputed_tokens += (end if end < lost else lost) - start
        if end >= lost:
            seq.lost_tokens = 0

    def _first_or_stall(self, seq: Sequence, prefill: int) -> None:
        """`seq` emits tokens in this step after a gap (`Sequence.token_step` is not the step
        before): log its call's first-token wait, or the stall. On the engine clock (step k
        spans [k, k + 1)) a prefill's token comes at the end of its step and decode tokens at the
        sequence's pace from the start of theirs; a client's wait for a first token starts at
        the end of its arrival step, or at the start of the step its call returned in."""
        t = self.t
        at = t + 1.0 if prefill else t + 1.0 / seq.request.decode_rate
        if seq.token_step < 0:  # the request's first token
            seq.first_token_wait = at - (seq.request.arrival_step + 1)
        elif seq.first_token_by >= 0:  # a resumed call's first token
            returned = seq.first_token_by - self.scenario.max_wait_steps
            seq.resumed_waits = (*seq.resumed_waits, at - returned)
        else:  # a stall inside a call: its last token came at the end of its step
            seq.stalls = (*seq.stalls, at - (seq.token_step + 1))

    def _grow(self, seq: Sequence, need: int, kv: int, tally: _Tally) -> tuple[bool, bool]:
        """`_compute`'s slow allocation of `need` blocks for `seq` (reaching `kv` private
        tokens): reclaiming cached prefix blocks, preempting by the fallback when even they do
        not suffice, and the `grow` event. Returns (whether `seq` got its blocks, whether the
        fallback preempted anyone)."""
        preempted = False
        if need > self.kv.pool.available:
            preempted = True
            self._make_room(need, seq, tally)
            if seq.status is not Status.RUNNING:
                return False, True
        self._reclaimed(self.kv.allocate(need))
        if self.subscribers:
            per_block = self.kv.tokens_per_block[seq.quantization_level]
            start = seq.prefix_tokens + min(seq.gpu_blocks * per_block, kv)
            self._emit("stored", "gpu", "grow", seq, need, (start, seq.prefix_tokens + kv))
        return True, preempted

    def _make_room(self, need: int, growing: Sequence, tally: _Tally) -> None:
        pool = self.kv.pool
        while need > pool.available:
            victim = self._fallback_victim()
            self.evict(victim, forced=True)
            tally.forced += 1
            if victim is growing:
                return

    def _fallback_victim(self) -> Sequence:
        # A sequence whose call completed earlier in this step frees its blocks in `_complete`
        # anyway (vLLM has already removed a finished request from `running` by then).
        running = [s for s in self.running if s.prefill_remaining or s.generated < s.call_end]
        if self.scenario.fallback == "vllm":
            return running[-1]  # newest first: vLLM's self.running.pop()
        return min(
            running,
            key=lambda s: (RETENTION_PRIORITY[s.block_type], s.last_access_step, -s.admitted_order),
        )

    def _complete(self, tally: _Tally) -> None:
        t = self.t
        still_running = []
        append = still_running.append
        for seq in self.running:
            if not seq.prefill_remaining and seq.generated >= seq.call_end:
                if seq.has_more_calls and not self.draining:
                    seq.status = Status.PAUSED
                    seq.paused_since = t + 1
                    resume = seq.resume_step = t + 1 + seq.request.followups[seq.call].pause_steps
                    if resume < self._next_return:
                        self._next_return = resume
                    self.paused.append(seq)
                    continue
                self._finish(seq)
                tally.completed += 1
            else:
                append(seq)
        self.running = still_running

    def _finish(self, seq: Sequence) -> None:
        # Once per request: its private blocks back to the pool, its prefix references released.
        blocks, _ = self.kv.free(seq)
        if self.subscribers:
            self._emit("removed", "gpu", "finish", seq, blocks)
        seq.status = _FINISHED

    def _admit(self, tally: _Tally) -> None:
        if not self.waiting:
            return
        t = self.t
        remaining: deque[Sequence] = deque()
        blocked = False
        reserved = 0
        """First-chunk blocks promised to requests admitted in this pass (vLLM v1 allocates a
        request's scheduled slots when it schedules it, so the next one sees fewer)."""
        for seq in self.waiting:
            if blocked or seq.not_before > t or seq.outbound:
                # (a request whose KV is still moving out to CPU waits for the link: it does
                # not hold up the queue behind it)
                remaining.append(seq)
                continue
            promised = self._try_admit(seq, tally, reserved)
            if promised is None:
                blocked = True  # FCFS: the head blocks everyone behind it
                remaining.append(seq)
            else:
                reserved += promised
        self.waiting = remaining

    def _try_admit(self, seq: Sequence, tally: _Tally, reserved: int) -> int | None:
        """Admit `seq` if its prefix misses, its offloaded KV and its first prefill chunk fit
        beside `reserved`; returns the chunk blocks it was promised, or None (not admitted).
        An offload holds the whole context, shared prefix included (LMCache stores every
        chunk): a prefix block reclaimed while it was away is restored from the CPU copy."""
        kv_manager = self.kv
        pool = kv_manager.pool
        request = seq.request
        hashes = request.prefix_hashes
        # (a request without a shared prefix skips the pool's chain walks)
        hits, cached_hits = pool.cached_hit_length(hashes) if hashes else (0, 0)
        loaded = seq.cpu_blocks
        remaining, level, chunk = kv_manager.admission(seq, hits)
        unit = kv_manager.unit
        # (`pool.available` written out, net of the cached blocks the hits will reference)
        if (len(hashes) - hits) * unit + (chunk if chunk > loaded else loaded) + reserved > (
            pool.num_free + (len(pool.cached) - cached_hits) * unit
        ):
            return None
        stored, reclaimed = kv_manager.admit(seq, hits, level)
        self._reclaimed(reclaimed)
        if stored and self.subscribers:
            self._emit_prefix("stored", "admit", tuple(stored))
        seq.prefill_remaining = max(remaining, 1) if not loaded else remaining
        if loaded:
            self._reclaimed(kv_manager.load(seq, loaded))
            # vLLM v1 allocates a request's blocks, then waits for its KV
            # (WAITING_FOR_REMOTE_KVS): with a link it computes once all of it is in
            if self.host.load(seq):
                self._emit("removed", "cpu", "swap_in", seq, loaded)
            scenario = self.scenario
            nbytes = seq.kv_private * scenario.bytes_per_token * level.multiplier
            tally.swap_ins += 1
            tally.swap_latency += scenario.swap_overhead_s + nbytes / scenario.pcie_bytes_per_s
            self._emit("stored", "gpu", "swap_in", seq, loaded)
        seq.status = Status.RUNNING
        seq.admitted_order = self.admissions
        self.admissions += 1
        self.running.append(seq)
        tally.hits += hits
        tally.lookups += len(hashes)
        return max(chunk - loaded, 0)

    def _fail_expired(self, tally: _Tally) -> None:
        limit = self.scenario.max_wait_steps
        t = self.t
        late = [s for s in self.running if 0 <= s.first_token_by < t]
        for seq in late:
            self.running.remove(seq)
            self._drop_kv(seq, "fail")
            seq.status = Status.FAILED
            tally.failures += 1
        since = t - limit  # a request waiting since before this step has waited too long
        # (a loop that stops at the first, not `any()` over a generator: every step does this)
        for seq in self.waiting:
            if seq.wait_since < since or 0 <= seq.first_token_by < t:
                break
        else:
            return
        remaining: deque[Sequence] = deque()
        for seq in self.waiting:
            if seq.wait_since < since or 0 <= seq.first_token_by < t:
                self._drop_kv(seq, "fail")  # its CPU KV (and GPU KV still moving out)
                seq.status = Status.FAILED
                tally.failures += 1
            else:
                remaining.append(seq)
        self.waiting = remaining

    def _arrive(self) -> None:
        t = self.t
        if self.draining or t >= len(self._arrivals):
            return
        hash_tokens = self.kv.hash_tokens
        for request in self._arrivals[t]:
            prefix = min(len(request.prefix_hashes) * hash_tokens, request.prompt_tokens)
            seq = Sequence.arriving(
                request, request.prompt_tokens - prefix, t, self.kv.base_level, prefix
            )
            if self._indexes:
                self.sequences[request.seq_id] = seq
            self.waiting.append(seq)

    # --- prefix references and events --------------------------------------------------------
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
            start = seq.prefix_tokens
            token_range = (start, start + seq.kv_private)
        event = BlockEvent(kind, self.t, medium, reason, seq.seq_id, blocks, (), token_range)
        for subscriber in self.subscribers:
            subscriber(event)

    def _emit_prefix(self, kind: EventKind, reason: Reason, hashes: tuple[int, ...]) -> None:
        event = BlockEvent(
            kind, self.t, "gpu", reason, "prefix", len(hashes) * self.kv.unit, hashes
        )
        for subscriber in self.subscribers:
            subscriber(event)

    # --- copies and checks -------------------------------------------------------------------
    # --- copying -----------------------------------------------------------------------------
    # Every field is declared once, in the group that says how a clone treats it, so a clone
    # cannot forget one: `clone` refuses an engine holding an undeclared field, and a test
    # checks the groups against a live engine and mutates every field of a clone in place.
    SHARED_FIELDS: ClassVar[tuple[str, ...]] = (
        "scenario",
        "schedule",
        "_indexes",
        "t",
        "_next_return",
        "admissions",
        "draining",
        "_arrivals",
        "_quality",
        "_prefill_budget",
        "_step_seconds",
        "max_decode_blocks",
        "recomputed_tokens",
    )
    """Fields a clone shares: immutable values, and the tables in `READ_ONLY_FIELDS`."""
    READ_ONLY_FIELDS: ClassVar[frozenset[str]] = frozenset({"_arrivals", "_quality"})
    """Shared containers built at construction and only read after it."""
    OWN_FIELDS: ClassVar[tuple[str, ...]] = (
        "kv",
        "host",
        "running",
        "paused",
        "waiting",
        "sequences",
        "evictions",
        "subscribers",
    )
    """Fields a clone gets its own of: the KV-cache manager and the host link (each its own
    `clone`), every live sequence (copied once, each container pointing at the copies;
    finished requests, which nothing changes again, stay shared in `sequences`), the eviction
    log, and no subscribers."""

    def clone(self) -> Scheduler:
        """An independent copy (no subscribers) that shares only immutable data."""
        clone = shared_copy(self)
        copies = {id(s): s.copy() for s in (*self.running, *self.paused, *self.waiting)}
        clone.kv = self.kv.clone()
        clone.host = self.host.clone(copies)
        clone.running = [copies[id(s)] for s in self.running]
        clone.paused = [copies[id(s)] for s in self.paused]
        clone.waiting = deque(copies[id(s)] for s in self.waiting)
        clone.sequences = {k: copies.get(id(s), s) for k, s in self.sequences.items()}
        clone.evictions = list(self.evictions)
        clone.subscribers = []
        return clone

    def check(self) -> None:
        """Assert every accounting invariant, each part its own (`KVCacheManager.check`,
        `HostLink.check`) and how the queues place each sequence; messages name the likely bug."""
        assert all(s.status is Status.RUNNING for s in self.running), "non-running in running"
        assert all(s.status in _BETWEEN_CALLS for s in self.paused), "non-paused in paused list"
        assert self._next_return == min((s.resume_step for s in self.paused), default=_NEVER), (
            "the earliest return is stale"
        )
        assert all(s.status is Status.WAITING for s in self.waiting), "non-waiting in queue"
        on_gpu = [*self.running, *(s for s in self.paused if s.status is Status.PAUSED)]
        moving_out = [s for s in (*self.paused, *self.waiting) if s.outbound]
        self.kv.check(on_gpu, moving_out)
        self.host.check((*self.running, *self.paused, *self.waiting))
        for seq in moving_out:
            assert seq.gpu_blocks == seq.outbound <= seq.cpu_blocks, f"{seq.seq_id}: offload"
        for seq in self.paused:
            assert seq.prefill_remaining == 0 or seq.status is not Status.PAUSED, (
                "paused mid-prefill"
            )
        for seq in self.host.queue:
            assert not seq.inbound or seq.status is Status.RUNNING, f"{seq.seq_id} loads idle"
        for seq in self.running:
            assert seq.inbound or not seq.cpu_blocks, f"{seq.seq_id} runs holding a CPU copy"
        for seq in self.waiting:
            assert seq.gpu_blocks == seq.outbound, f"{seq.seq_id} waits holding GPU KV"
            assert seq.prefix_held == 0 or seq.outbound, f"{seq.seq_id} waits holding a prefix"
        for seq in self.paused:
            if seq.status is not Status.PAUSED and not seq.outbound:
                assert seq.gpu_blocks == seq.prefix_held == 0, f"{seq.seq_id} off GPU holds GPU KV"
            if seq.status is Status.DISCARDED:
                assert seq.cpu_blocks == 0, f"{seq.seq_id} discarded but holds CPU KV"
        for seq in self.sequences.values():
            if seq.status in _DONE:
                assert seq.gpu_blocks == seq.cpu_blocks == seq.prefix_held == 0, (
                    f"{seq.seq_id} ({seq.status}) still holds blocks"
                )


@lru_cache(maxsize=64)
def _quality_table(scenario: Scenario) -> dict[tuple[Quantization, BlockType], float]:
    """`Scenario.quality` for every precision and block type, built once per scenario (two
    engines per reset built it, ~4 us an entry; the table is only read, so engines share it)."""
    return {
        (level, block_type): scenario.quality(level, block_type)
        for level in Quantization
        for block_type in BlockType
    }


_NEVER = 1 << 62
"""A step no episode reaches."""
_FINISHED = Status.FINISHED
"""(A module constant: reading an enum member off its class costs ~80 ns more in Python 3.11.)"""
_BETWEEN_CALLS = (Status.PAUSED, Status.SWAPPED, Status.DISCARDED)
_DONE = (Status.FINISHED, Status.FAILED)


__all__ = ["Eviction", "Request", "Scheduler", "StepStats"]
