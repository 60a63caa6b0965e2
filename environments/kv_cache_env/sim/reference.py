"""The unconstrained reference run: what an engine with unlimited memory and no agent does over
a schedule, reduced to the few numbers `Reference` keeps (its peak sets an episode's capacity,
its tokens are the throughput ceiling).

`run_reference` plays the same steps as `Scheduler(scenario, schedule, UNLIMITED_BLOCKS,
reference=True)` followed by `run_drain` (kept as the oracle: `simulator.run_reference_stepwise`;
tests compare the two on every built-in scenario, trace replays and random schedules), in the
same order (`Scheduler.step`: returns, compute, complete, admit, fail, arrive), but keeps only
what can change those numbers. Every reset runs it, so it is specialised for speed. With
unlimited memory the engine never takes most of its paths, and this loop leaves them out:

- no admission is refused for blocks (`_try_admit` compares with ~2**40 blocks), so every
  arrival of step t-1 is admitted at step t and the waiting queue is empty whenever it is
  checked for timeouts (`_fail_expired` after `_admit`): only resumed calls can time out;
- no preemption (`_make_room`), no reclaim of cached prefix blocks, no swap (the reference's
  CPU capacity is 0), no compression: every sequence stays at the base precision and its KV only
  grows, so a paused session keeps its blocks on the GPU and returns straight to running;
- no subscribers, events, evictions, per-step `StepStats` or last-access stamps, and no
  `Sequence` objects: a `_Run` holds only the fields the step reads.

Block accounting follows `BlockPool`: used blocks are the private ones plus `unit` blocks per
referenced prefix hash; cached hashes (count 0) are free but still hit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .admission import prefill_left
from .scenario import Scenario
from .vocabulary import Quantization
from .workload import FollowUp, Request, Schedule


@dataclass(frozen=True, slots=True)
class Reference:
    """What an engine with unlimited memory does over the same schedule, with no agent."""

    peak_blocks: int
    tokens: int
    """Tokens generated during the scored turns."""
    block_steps: int
    """Blocks held, summed over the scored turns."""
    drain_tokens: int = 0
    """Tokens generated during its drain."""
    ideal_block_steps: float = 0.0
    """Over the scored turns, the blocks an ideal server would hold: only the private KV read
    in the step (sequences that computed) at the most compact precision (int4), plus the prefix
    blocks in use. The floor of `memory_efficiency`."""


class _Run:
    """One admitted request while the reference serves it (the part of `Sequence` it reads)."""

    __slots__ = ("call", "followups", "gpu", "hashes", "on", "priv")
    __slots__ += ("rate", "remaining", "todo")

    def __init__(
        self, hashes: tuple[int, ...], rate: int, followups: tuple[FollowUp, ...], priv: int
    ) -> None:
        self.hashes = hashes
        """`request.prefix_hashes`: the chain it references from admission to its end."""
        self.rate = rate
        """`request.decode_rate`."""
        self.followups = followups
        self.call = 0
        """Index of the current call (`Sequence.call`)."""
        self.priv = priv
        """Private tokens of its context: `Sequence.private_prompt + generated`."""
        self.todo = 0
        """Tokens its current call has still to generate: `call_end - generated`."""
        self.remaining = 0
        """`Sequence.prefill_remaining`."""
        self.gpu = 0
        """Private GPU blocks (`Sequence.gpu_blocks`)."""
        self.on = True
        """In the running set (False once paused, finished or failed)."""


def run_reference(scenario: Scenario, schedule: Schedule) -> Reference:
    """The reference of `schedule` under `scenario`: equal, field for field, to the stepwise
    engine's (`simulator.run_reference_stepwise`)."""
    return _play(scenario, schedule)


def _play(scenario: Scenario, schedule: Schedule) -> Reference:
    run = _ReferenceRun(scenario, schedule)
    arrivals = schedule.arrivals_by_step()
    horizon = schedule.horizon
    for t in range(horizon + scenario.drain_cap):
        draining = t >= horizon
        # Arrivals of step t-1 (`Scheduler._arrive`: none while draining) are the whole queue.
        waiting = arrivals[t - 1] if 0 < t <= horizon else ()
        if draining and not (run.running or waiting or run.paused):
            break  # `run_drain` stops when the engine is idle
        run.step(t, waiting, draining)
    return Reference(max(run.peak, 1), run.tokens, run.block_steps, run.drain_tokens, run.ideal)


class _ReferenceRun:
    """The reference's state between steps, and the step as the engine's named phases."""

    def __init__(self, scenario: Scenario, schedule: Schedule) -> None:
        base = scenario.base_quantization
        self.per_block = scenario.block_size * base.packing
        self.unit = scenario.prefix_hash_blocks
        self.hash_tokens = scenario.block_size * self.unit
        self.prefill_budget = scenario.prefill_tokens_per_step
        self.max_wait = scenario.max_wait_steps
        self.warmup = scenario.warmup_steps
        # An exact float: packings are powers of two, so every `active / densest` term and the
        # sum below are exact (multiples of 1/4, far below 2**53), as the stepwise run's are.
        self.densest = Quantization.INT4.packing / base.packing
        self.counts: dict[int, int] = {}
        """Prefix hashes referenced (count > 0), each with its occurrences in the `holders`
        chains. Only which hashes are here counts (`BlockPool.shared`'s keys: used blocks)."""
        self.known: set[int] = set()
        """Every prefix hash ever stored, shared or cached: nothing is ever reclaimed, so a hash
        is a hit exactly when it is here (`BlockPool.cached_hit_length` over shared + cached)."""
        self.holders: dict[tuple[int, ...], int] = {}
        """Holders per distinct chain (`BlockPool.holders`): each chain counts its hashes once
        however many requests hold it, so the per-hash loops of `acquire_prefix` and
        `release_prefix` run only when a chain's first holder comes and its last one leaves."""
        self.private = 0
        """`BlockPool.num_private` (recounted after each compute, see `_compute`)."""
        self.peak = 0
        self.running: list[_Run] = []
        """In (re)entry order, as `Scheduler.running`: the prefill budget goes first come first."""
        self.returns: dict[int, list[_Run]] = {}
        """Paused sessions by the step their next call arrives, each list in pause order (the
        order `Scheduler.paused` keeps them; every one returns exactly at its `resume_step`)."""
        self.paused = 0
        self.paused_gpu = 0
        """Private blocks of the paused sessions."""
        self.pending: list[tuple[_Run, int, int]] = []
        """Resumed calls that may still await their first token (the only ones that can time
        out), each with its deadline (`first_token_by`) and the tokens its call asked for: the
        first token has come exactly when `todo` fell below that (the hot loop stamps
        nothing)."""
        self.tokens = self.block_steps = self.drain_tokens = 0
        self.ideal = 0.0

    def step(self, t: int, waiting: Sequence[Request], draining: bool) -> None:
        self._return(t)
        step_tokens, active, done = self._compute()
        self._complete(done, t, draining)
        self._admit(waiting)
        if self.pending:
            self._fail(t)
        # what `StepStats` reports and `run_reference_stepwise` sums
        if draining:
            self.drain_tokens += step_tokens
        elif t >= self.warmup:
            shared = len(self.counts) * self.unit
            self.tokens += step_tokens
            self.block_steps += self.private + shared
            self.ideal += active / self.densest + shared

    def _return(self, t: int) -> None:
        """1. returns (`Scheduler._return_paused`): KV kept on the GPU, straight back to running."""
        back = self.returns.pop(t, None)
        if not back:
            return
        self.paused -= len(back)
        for run in back:
            follow = run.followups[run.call]
            run.call += 1
            run.todo = follow.output_tokens
            run.priv += follow.prompt_tokens
            run.remaining = follow.prompt_tokens
            run.on = True
            self.paused_gpu -= run.gpu
            self.running.append(run)
            self.pending.append((run, t + self.max_wait, follow.output_tokens))

    def _compute(self) -> tuple[int, int, list[_Run]]:
        """2. compute (`Scheduler._compute`) and the completion test of 3. in one pass: a
        sequence's completion depends only on its own compute, and the frees of the completed
        are applied after the pass (as `_complete` does), so the peak is unchanged. A
        sequence's KV only grows here (no preemption or compression), so its blocks after the
        step are ceil(kv / per_block), never fewer than before, and the private blocks after
        compute are those of the sequences that computed (`active`), of those the budget left
        waiting (`starved`) and of the paused: no per-sequence allocation count. Returns the
        step's tokens, `active` and the sequences whose call completed."""
        budget = self.prefill_budget
        per_block = self.per_block
        step_tokens = active = starved = 0
        done: list[_Run] = []
        for run in self.running:
            remaining = run.remaining
            todo = run.todo
            if remaining:
                if not budget:
                    starved += run.gpu
                    continue
                take = budget if budget < remaining else remaining
                # the step that ends the prompt emits a token (unless the call asks for none)
                n = 1 if take == remaining and todo > 0 else 0
                remaining -= take
                priv = run.priv + n
                kv = priv - remaining if remaining < priv else 0
                budget -= take
                run.remaining = remaining
            else:  # decoding: nothing to prefill, all the private context has KV
                n = run.rate
                if todo < n:
                    n = todo
                kv = priv = run.priv + n
            blocks = -(-kv // per_block)
            run.gpu = blocks
            active += blocks
            if n:
                run.priv = priv
                todo -= n
                run.todo = todo
                step_tokens += n
            if not remaining and todo <= 0:
                done.append(run)
        # Used blocks only grow during compute, so its end is the step's compute peak (the
        # pool notes it at every allocation; no allocation leaves it at an earlier value).
        self.private = active + starved + self.paused_gpu
        self._note_peak()
        return step_tokens, active, done

    def _note_peak(self) -> None:
        used = self.private + len(self.counts) * self.unit
        if used > self.peak:
            self.peak = used

    def _complete(self, done: list[_Run], t: int, draining: bool) -> None:
        """3. complete (`Scheduler._complete`): pause a session, or free a finished request."""
        if not done:
            return
        for run in done:
            run.on = False
            if run.call < len(run.followups) and not draining:
                resume = t + 1 + run.followups[run.call].pause_steps
                self.returns.setdefault(resume, []).append(run)
                self.paused += 1
                self.paused_gpu += run.gpu
                continue
            self.private -= run.gpu  # `Scheduler._finish`: private blocks freed, prefix released
            if run.hashes:
                _release(run, self.holders, self.counts)
        self.running = [run for run in self.running if run.on]

    def _admit(self, waiting: Sequence[Request]) -> None:
        """4. admit (`Scheduler._try_admit`; never refused): prefix hits shorten the prefill."""
        hash_tokens = self.hash_tokens
        for request in waiting:
            hashes = request.prefix_hashes
            prompt = request.prompt_tokens
            prefix = len(hashes) * hash_tokens
            if prefix > prompt:
                prefix = prompt
            run = _Run(hashes, request.decode_rate, request.followups, prompt - prefix)
            run.todo = request.output_tokens
            if hashes:
                held = self.holders.get(hashes, 0)
                self.holders[hashes] = held + 1
                # held: another holder references the whole chain, every hash a hit
                hits = len(hashes) if held else _acquire(hashes, self.counts, self.known)
                remaining = prefill_left(prompt - prefix, prefix, hits * hash_tokens)
            else:
                remaining = prompt
            run.remaining = remaining if remaining > 1 else 1
            self.running.append(run)
        if waiting:
            self._note_peak()

    def _fail(self, t: int) -> None:
        """5. fail (`Scheduler._fail_expired`): resumed calls whose first token is late."""
        watch = []
        for entry in self.pending:
            run, deadline, asked = entry
            if not run.on or run.todo != asked:
                continue  # served its first token, or left the running set
            if deadline >= t:
                watch.append(entry)
                continue
            self.running.remove(run)
            run.on = False
            self.private -= run.gpu
            if run.hashes:
                _release(run, self.holders, self.counts)
        self.pending = watch


def _acquire(hashes: tuple[int, ...], counts: dict[int, int], known: set[int]) -> int:
    """Reference the chain `hashes` for its first holder (`BlockPool.cached_hit_length`, then
    `acquire_prefix`); returns the hits: the leading run of known hashes. Every occurrence of
    a hash is counted; past the first miss, a known hash is referenced again (the pool's
    `_acquire_scattered`, for hashes that are not a hash chain) and the others are stored."""
    if all(map(known.__contains__, hashes)):  # the common case, in one C-level pass
        hits = len(hashes)
    else:
        hits = 0
        for h in hashes:
            if h not in known:
                break
            hits += 1
    get = counts.get
    for h in hashes[:hits]:
        counts[h] = get(h, 0) + 1
    if hits < len(hashes):
        stored = hashes[hits:]
        fresh = dict.fromkeys(stored, 1)
        if len(fresh) == len(stored) and known.isdisjoint(fresh):
            counts.update(fresh)  # a hash chain's misses: new hashes (in C)
        else:
            for h in stored:
                counts[h] = get(h, 0) + 1
        known.update(stored)
    return hits


def _release(run: _Run, holders: dict[tuple[int, ...], int], counts: dict[int, int]) -> None:
    """Drop `run`'s hold on its prefix chain (`BlockPool.release_prefix` when it was the last
    holder of its chain): a hash whose count falls to 0 is cached, free but still a hit."""
    key = run.hashes
    held = holders[key] - 1
    if held:
        holders[key] = held
        return
    del holders[key]
    for h in run.hashes:
        count = counts[h] - 1
        if count:
            counts[h] = count
        else:
            del counts[h]


__all__ = ["Reference", "run_reference"]
