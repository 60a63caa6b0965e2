"""The unconstrained reference run: what an engine with unlimited memory and no agent does over
a schedule, reduced to the few numbers `Reference` keeps (its peak sets an episode's capacity,
its tokens are the throughput ceiling).

`run_reference` plays the same steps as `Engine(scenario, schedule, UNLIMITED_BLOCKS,
reference=True)` followed by `run_drain` (kept as the oracle: `simulator.run_reference_stepwise`;
tests compare the two on every built-in scenario, trace replays and random schedules), in the
same order (engine.py's `step`: returns, compute, complete, admit, fail, arrive), but keeps only
what can change those numbers. Every reset runs it, so it is specialised for speed. With
unlimited memory the engine never takes most of its paths, and this loop leaves them out:

- no admission is refused for blocks (`_try_admit` compares with ~2**40 blocks), so every
  arrival of step t-1 is admitted at step t and the waiting queue is empty whenever it is
  checked for timeouts (`_fail_expired` after `_admit`): only resumed calls can time out;
- no preemption (`_make_room`), no reclaim of cached prefix blocks, no swap (the reference's
  CPU capacity is 0), no compression: every sequence stays at the base precision and its KV only
  grows, so a paused session keeps its blocks on the GPU and returns straight to running;
- no subscribers, events, evictions, per-step `StepStats`, hotness or last-access stamps, and no
  `Sequence` objects: a `_Run` holds only the fields the step reads.

Block accounting follows `BlockPool`: used blocks are the private ones plus `unit` blocks per
referenced prefix hash; cached hashes (count 0) are free but still hit.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scenario import Scenario
from .types import Quantization
from .workload import FollowUp, Schedule


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

    __slots__ = ("call", "first_token_by", "followups", "gpu", "hashes", "on", "priv", "rate")
    __slots__ += ("remaining", "todo")

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
        self.first_token_by = -1
        """`Sequence.first_token_by`: a resumed call fails if no token comes by this step."""
        self.on = True
        """In the running set (False once paused, finished or failed)."""


def run_reference(scenario: Scenario, schedule: Schedule) -> Reference:
    """The reference of `schedule` under `scenario`: equal, field for field, to the stepwise
    engine's (`simulator.run_reference_stepwise`)."""
    block_size = scenario.block_size
    base = scenario.base_quantization
    per_block = block_size * base.packing
    unit = scenario.prefix_hash_blocks
    hash_tokens = block_size * unit
    prefill_budget = scenario.prefill_tokens_per_step
    max_wait = scenario.max_wait_steps
    warmup = scenario.warmup_steps
    horizon = schedule.horizon
    # An exact float: packings are powers of two, so every `active / densest` term and the sum
    # below are exact (multiples of 1/4, far below 2**53), as the stepwise run's are.
    densest = Quantization.INT4.packing / base.packing
    arrivals = schedule.arrivals_by_step()

    counts: dict[int, int] = {}
    """Reference counts of the prefix hashes held (`BlockPool.ref_counts`)."""
    known: set[int] = set()
    """Every prefix hash ever stored, shared or cached: nothing is ever reclaimed, so a hash is
    a hit exactly when it is here (`BlockPool.cached_hit_length` over ref_counts + cached)."""
    get_count = counts.get
    private = 0
    """`BlockPool.num_private`."""
    peak = 0
    running: list[_Run] = []
    """In (re)entry order, as `Engine.running`: the prefill budget goes first come first."""
    returns: dict[int, list[_Run]] = {}
    """Paused sessions by the step their next call arrives, each list in pause order (the order
    `Engine.paused` keeps them; every one returns exactly at its `resume_step`)."""
    paused = 0
    pending: list[_Run] = []
    """Resumed calls that may still await their first token (the only ones that can time out)."""

    tokens = block_steps = drain_tokens = 0
    ideal = 0.0

    for t in range(horizon + scenario.drain_steps):
        draining = t >= horizon
        # Arrivals of step t-1 (`Engine._arrive`: none while draining) are the whole queue.
        waiting = arrivals[t - 1] if 0 < t <= horizon else ()
        if draining and not (running or waiting or paused):
            break  # `run_drain` stops when the engine is idle
        # 1. returns (`Engine._return_paused`): KV kept on the GPU, so straight back to running
        back = returns.pop(t, None)
        if back:
            paused -= len(back)
            for run in back:
                follow = run.followups[run.call]
                run.call += 1
                run.todo = follow.output_tokens
                run.priv += follow.prompt_tokens
                run.remaining = follow.prompt_tokens
                run.first_token_by = t + max_wait
                run.on = True
                running.append(run)
                pending.append(run)
        # 2. compute (`Engine._compute`) and 3. its completion test (`Engine._complete`) in one
        # pass: a sequence's completion depends only on its own compute, and the frees of the
        # completed are applied after the pass (as `_complete` does), so the peak is unchanged.
        budget = prefill_budget
        step_tokens = active = 0
        still: list[_Run] = []
        keep = still.append
        done: list[_Run] = []
        for run in running:
            remaining = run.remaining
            if remaining:
                if not budget:
                    keep(run)
                    continue
                take = budget if budget < remaining else remaining
                # the step that ends the prompt emits a token (unless the call asks for none)
                n = 1 if take == remaining and run.todo > 0 else 0
                left = remaining - take
                priv = run.priv + n
                kv = priv - left if left < priv else 0
                budget -= take
                run.remaining = left
            else:
                # decoding: nothing to prefill, all the private context has KV
                n = run.todo
                if run.rate < n:
                    n = run.rate
                kv = priv = run.priv + n
            blocks = -(-kv // per_block)
            if blocks > run.gpu:
                private += blocks - run.gpu
                run.gpu = blocks
            if n:
                run.first_token_by = -1
                run.priv = priv
                run.todo -= n
                step_tokens += n
            active += run.gpu
            if run.remaining or run.todo > 0:
                keep(run)
            else:
                done.append(run)
        # Used blocks only grow during compute, so its end is the step's compute peak (the pool
        # notes it at every allocation; no allocation leaves it at an earlier, noted value).
        used = private + len(counts) * unit
        if used > peak:
            peak = used
        running = still
        for run in done:
            run.on = False
            if run.call < len(run.followups) and not draining:
                resume = t + 1 + run.followups[run.call].pause_steps
                returns.setdefault(resume, []).append(run)
                paused += 1
                continue
            private -= run.gpu  # `Engine._finish`: private blocks freed, prefix released
            for h in run.hashes:
                count = counts[h] - 1
                if count:
                    counts[h] = count
                else:
                    del counts[h]  # cached: free, still a hit (it stays in `known`)
        # 4. admit (`Engine._try_admit`; never refused): prefix hits shorten the prefill
        for request in waiting:
            hashes = request.prefix_hashes
            prompt = request.prompt_tokens
            prefix = len(hashes) * hash_tokens
            if prefix > prompt:
                prefix = prompt
            run = _Run(hashes, request.decode_rate, request.followups, prompt - prefix)
            run.todo = request.output_tokens
            if hashes:
                # `cached_hit_length` (the common case, a chain all held, in one C-level pass)
                if all(map(known.__contains__, hashes)):
                    hits = len(hashes)
                else:
                    hits = 0
                    for h in hashes:
                        if h not in known:
                            break
                        hits += 1
                # `BlockPool.acquire_prefix`, the same dict operations on the counts
                for h in hashes[:hits]:
                    counts[h] = get_count(h, 0) + 1
                if hits < len(hashes):
                    stored = hashes[hits:]
                    counts.update(dict.fromkeys(stored, 1))
                    known.update(stored)
                hit_tokens = hits * hash_tokens
                remaining = prompt - (hit_tokens if hit_tokens < prefix else prefix)
            else:
                remaining = prompt
            run.remaining = remaining if remaining > 1 else 1
            running.append(run)
        if waiting:
            used = private + len(counts) * unit
            if used > peak:
                peak = used
        # 5. fail (`Engine._fail_expired`): resumed calls whose first token is late
        if pending:
            watch = []
            for run in pending:
                if not run.on or run.first_token_by < 0:
                    continue  # served its first token, or left the running set
                if run.first_token_by >= t:
                    watch.append(run)
                    continue
                running.remove(run)
                run.on = False
                private -= run.gpu
                for h in run.hashes:
                    count = counts[h] - 1
                    if count:
                        counts[h] = count
                    else:
                        del counts[h]
            pending = watch
        # what `StepStats` reports and `run_reference_stepwise` sums
        if draining:
            drain_tokens += step_tokens
        elif t >= warmup:
            shared = len(counts) * unit
            tokens += step_tokens
            block_steps += private + shared
            ideal += active / densest + shared
    return Reference(max(peak, 1), tokens, block_steps, drain_tokens, ideal)


__all__ = ["Reference", "run_reference"]
