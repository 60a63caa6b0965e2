"""`Simulator`: one episode of the KV-cache serving game, the only object callers drive.

    sim = Simulator(get_scenario("hard"), seed=7)
    while not sim.done:
        obs = sim.observe()            # structured; text.render(obs) for an LLM
        sim.play_turn([evict("r12")])  # any number of validated actions, then one engine step
    record = sim.record()              # what the rubric scores

The turn rule lives in one place, `step`: a turn on which the agent made no call at all counts
as noop (as an LLM reply without a tool call), then the engine advances one step. Callers that
make their calls one by one (an LLM's tool calls, a Gymnasium env's per-call actions) `apply`
each and end the turn with `step`; the others hand the turn's actions to `play_turn`.

Reset draws the whole arrival schedule and the memory budget from `numpy.random.default_rng(seed)`,
runs an unconstrained reference engine over the same schedule (its peak sets the capacity, its
output is the throughput ceiling), then plays the warm-up steps. The same scenario, seed and
actions give a bit-identical episode. Pure: no I/O, no wall clock.

The last agent turn is followed by a **drain** (a departure from the original design, which just
stops): agent-free engine steps with no new arrivals and no new pauses, in which paused sessions
return on schedule (offloaded ones load their KV back, discarded ones recompute), until every
request has completed or failed by its own deadline (a queue timeout, a resumed call's first-token
deadline): nothing fails because the episode ended. `scenario.drain_cap` is a safety cap only
(no suite episode reaches it; a record that does says so). The drain makes the consequences of
the last turns count: a last-turn dump of the cache pays for itself in the drain. The reference
engine runs through the same drain.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .actions import ACTIONS, Action, ActionResult, AgentTool, Refusal
from .clone_groups import shared_copy
from .events import Subscriber
from .frozen import slot_constructor
from .observation import Observation, Queue, Table, build_observation
from .record import RECORD_FIELDS, EpisodeRecord, ResidentRecord, ServingRecord
from .reference import Reference, run_reference
from .scenario import Scenario
from .scheduler import Scheduler, StepStats
from .sequence import Sequence
from .vocabulary import Quantization, Status
from .workload import Request, Schedule, synthesize

UNLIMITED_BLOCKS = 1 << 40

_make_resident = slot_constructor(ResidentRecord)  # ResidentRecord(...), built faster


def run_reference_stepwise(scenario: Scenario, schedule: Schedule) -> Reference:
    """The reference played by the engine itself, step by step (`reference.run_reference`, which
    every reset runs, is its specialised equivalent; tests hold the two equal)."""
    engine = Scheduler(scenario, schedule, UNLIMITED_BLOCKS, reference=True)
    tokens = block_steps = 0
    ideal = 0.0
    densest = Quantization.INT4.packing / scenario.base_quantization.packing
    unit = scenario.prefix_hash_blocks
    for t in range(schedule.horizon):
        stats = engine.step()
        if t >= scenario.warmup_steps:
            tokens += stats.tokens
            block_steps += stats.used_blocks
            ideal += stats.active_blocks / densest + len(engine.kv.pool.shared) * unit
    drain = run_drain(engine)
    return Reference(
        max(engine.kv.pool.peak_used, 1),
        tokens,
        block_steps,
        sum(s.tokens for s in drain[0]),
        ideal,
    )


def run_drain(engine: Scheduler) -> tuple[list[StepStats], int]:
    """Play the agent-free drain on `engine` until it is idle: every request completes or fails
    by its own deadline (a queue timeout, a resumed call's first-token deadline). Returns its
    step stats and how many requests failed at the safety cap (`Scenario.drain_cap`, 0 unless
    the engine ran away; `Scheduler.fail_unfinished`)."""
    engine.draining = True
    stats = []
    for _ in range(engine.scenario.drain_cap):
        if engine.idle:
            return stats, 0
        stats.append(engine.step())
    return stats, engine.fail_unfinished()


@dataclass(frozen=True, slots=True)
class EpisodeDraws:
    """What a reset draws for (scenario, seed) with synthetic arrivals, before its first engine
    step: all immutable and a function of the two alone. Callers that play several agents on one
    episode (an eval's policies) draw it once and hand it to each `Simulator(..., draws=...)`."""

    scenario: Scenario
    seed: int
    schedule: Schedule
    reference: Reference
    """The unconstrained reference run over `schedule` (`run_reference`)."""
    budget_fraction: float
    """The memory budget as a fraction of the reference's peak, drawn from the scenario's
    range."""


def draw_episode(scenario: Scenario, seed: int) -> EpisodeDraws:
    """The reset's draws, in their order on `numpy.random.default_rng(seed)`: the schedule,
    then the budget fraction (module docstring)."""
    rng = np.random.default_rng(seed)
    schedule = synthesize(scenario, rng)
    fraction = float(rng.uniform(*scenario.budget_fraction))
    return EpisodeDraws(scenario, seed, schedule, run_reference(scenario, schedule), fraction)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What one `Simulator.play_turn` did: each action's result, in order, and the engine step."""

    results: tuple[ActionResult, ...]
    stats: StepStats


_make_turn_result = slot_constructor(TurnResult)  # TurnResult(...), built faster (every turn)


class Simulator:
    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        *,
        schedule: Schedule | None = None,
        budget_fraction: float | None = None,
        capacity: int | None = None,
        draws: EpisodeDraws | None = None,
    ) -> None:
        """`schedule` replaces the synthetic arrivals (trace replay); `budget_fraction` fixes the
        memory budget instead of drawing it from the scenario's range; `capacity` sets the GPU
        blocks outright (tests, what-if runs); `draws` is `draw_episode(scenario, seed)` drawn
        earlier (the same episode, without drawing it again)."""
        self.scenario = scenario
        self.seed = seed
        if draws is not None:
            if schedule is not None:
                raise ValueError("give schedule or draws, not both")
            if draws.seed != seed or draws.scenario != scenario:
                raise ValueError(
                    f"draws of ({draws.scenario.name!r}, seed {draws.seed}) given for "
                    f"({scenario.name!r}, seed {seed})"
                )
        elif schedule is None:
            draws = draw_episode(scenario, seed)
        self.schedule = draws.schedule if draws is not None else schedule
        assert self.schedule is not None
        expected = scenario.warmup_steps + scenario.steps
        if self.schedule.horizon != expected:
            raise ValueError(
                f"schedule spans {self.schedule.horizon} steps; scenario {scenario.name!r} "
                f"needs warmup_steps + steps = {expected}"
            )
        fraction = budget_fraction
        if draws is not None:
            self.reference = draws.reference
            if fraction is None:
                fraction = draws.budget_fraction
        else:  # a replayed schedule: the budget is the seed's first draw
            self.reference = run_reference(scenario, self.schedule)
            if fraction is None:
                fraction = float(np.random.default_rng(seed).uniform(*scenario.budget_fraction))
        if capacity is None:
            capacity = max(
                math.ceil(fraction * self.reference.peak_blocks),
                self.schedule.max_request_blocks(scenario.block_size),
            )
        self.engine = Scheduler(scenario, self.schedule, capacity)
        for _ in range(scenario.warmup_steps):
            self.engine.step()
        engine = self.engine
        self._before_turns = frozenset(
            seq_id for seq_id, seq in engine.sequences.items() if seq.status in _DONE
        )
        """Requests finished or failed in the warm-up (not among those the episode serves)."""
        self._moved_before = (
            engine.host.blocks_out,
            engine.host.blocks_in,
            engine.recomputed_tokens,
        )
        """The engine's link and recompute counters at the first turn."""
        self.turn = 0
        self._stats: list[StepStats] = []
        self._drain: list[StepStats] = []
        self._drain_failures = 0
        self._residents: tuple[ResidentRecord, ...] = ()
        self._calls_this_turn = 0
        self._calls_per_turn: list[int] = []
        self._counts = dict.fromkeys((*ACTIONS.names, "invalid"), 0)
        """Calls per tool (valid ones) and invalid calls (`record`: each tool's counter)."""
        self._tables: list[weakref.ref[Table] | weakref.ref[Queue]] = []
        """Lazy entry tables and queues handed out since the last change (see `observe`)."""

    # --- driving -----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.turn >= self.scenario.steps

    @property
    def capacity(self) -> int:
        return self.engine.kv.pool.num_blocks

    def observe(self, *, hints: bool = True) -> Observation:
        """The agent's view of this turn. Without hints its entries are a lazy `Table` and its
        queue a lazy `Queue`, built only if read (or if the observation is still held when the
        state next changes)."""
        obs = build_observation(
            self.engine,
            turn=self.turn,
            turns=self.scenario.steps,
            warmup=self.scenario.warmup_steps,
            hints=hints,
            lazy=not hints,
        )
        if isinstance(obs.entries, Table):
            self._tables.append(weakref.ref(obs.entries))
        if isinstance(obs.queue, Queue):
            self._tables.append(weakref.ref(obs.queue))
        return obs

    def _settle(self) -> None:
        """Build the lazy tables and queues still held before the state changes (`Table`)."""
        for ref in self._tables:
            part = ref()
            if part is not None:
                part.settle()
        self._tables.clear()

    def apply(self, action: Action) -> ActionResult:
        """Validate and carry out one action. Invalid ones change nothing and are counted."""
        if self.done:
            raise RuntimeError("the episode is over; no more actions")
        if self._tables:
            self._settle()
        self._calls_this_turn += 1
        result = self._apply(action)
        kind = action.kind if result.ok else "invalid"
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return result

    @property
    def calls_this_turn(self) -> int:
        """Calls made since the last step: actions applied (valid or not) and counted invalid
        calls."""
        return self._calls_this_turn

    def count_invalid(self) -> None:
        """Count a call that never became an action (unknown tool, malformed arguments)."""
        self._calls_this_turn += 1
        self._counts["invalid"] += 1

    def play_turn(self, actions: Iterable[Action] = ()) -> TurnResult:
        """One agent turn: apply `actions` in order, then end the turn (`step`)."""
        return _make_turn_result(tuple(map(self.apply, actions)), self.step())

    def step(self) -> StepStats:
        """End the turn: a turn with no call at all (no action applied, valid or not, and no
        invalid call counted) counts as noop, as an LLM reply without a tool call does; then the
        engine advances one step."""
        if self.done:
            raise RuntimeError("the episode is over; no more steps")
        if self._calls_this_turn == 0:
            self._counts["noop"] += 1
        if self._tables:
            self._settle()
        stats = self.engine.step()
        self._stats.append(stats)
        self._calls_per_turn.append(self._calls_this_turn)
        self._calls_this_turn = 0
        self.turn += 1
        if self.done:
            self._residents = self._resident_snapshot()
            self._drain, self._drain_failures = run_drain(self.engine)
        return stats

    def subscribe(self, subscriber: Subscriber) -> None:
        """Receive every `BlockEvent` from now on."""
        self.engine.subscribers.append(subscriber)

    # --- validation --------------------------------------------------------------------------
    def _apply(self, action: Action) -> ActionResult:
        """The action table's rule (`actions.AgentTool.refusal`) on the target, then its effect."""
        tool = ACTIONS.get(action.kind)
        if tool is None:
            return ActionResult(
                False, f"unknown action {action.kind!r}; valid actions: {', '.join(ACTIONS.names)}"
            )
        engine = self.engine
        if not tool.targets:
            return tool.carry_out(engine, None)
        seq = engine.sequences.get(action.seq_id or "")
        if seq is None or seq.status not in _HOLDING:
            return ActionResult(False, self._not_actionable(tool, action.seq_id, seq))
        refusal = tool.refusal(seq, engine)
        if refusal is not None:
            return ActionResult(False, self._refused(tool, seq, refusal))
        return tool.carry_out(engine, seq)

    def _refused(self, tool: AgentTool, seq: Sequence, refusal: Refusal) -> str:
        """What an agent is told when `tool`'s rule refuses `seq`, naming what is valid."""
        kind, sid, engine = tool.name, seq.seq_id, self.engine
        if refusal is Refusal.LOADING:
            takers = [t.name for t in ACTIONS.targeted if t.on_loading]
            which = (
                f"{takers[0]} is the only tool that acts on it now"
                if len(takers) == 1
                else f"only {', '.join(takers) or 'no tool'} act on it now"
            )
            return (
                f"{kind} {sid}: its KV is still loading over the host link ({seq.inbound} "
                f"blocks to go); {which}"
            )
        if refusal is Refusal.OFFLOADED:
            resident = self._ids(Status.RUNNING, Status.PAUSED)
            return (
                f"{kind} {sid}: it is already offloaded to CPU; {kind} acts on GPU-resident "
                f"sequences: {resident}"
            )
        if refusal is Refusal.LOWEST_LEVEL:
            valid = ", ".join(
                s.seq_id
                for s in (*engine.running, *engine.paused)
                if s.status in _HOLDING and tool.valid_on(s, engine)
            )
            return (
                f"{kind} {sid}: already {seq.quantization_level} (fp16 -> int8 -> int4, one "
                f"level per call); compressible: {valid or 'none'}"
            )
        return (
            f"{kind} {sid}: needs {seq.private_blocks} CPU blocks, only {engine.cpu_room} of "
            f"{engine.host.cpu_capacity} free"
        )

    def _not_actionable(self, tool: AgentTool, seq_id: str | None, seq: Sequence | None) -> str:
        valid = self._ids(*(_HOLDING if tool.on_offloaded else _ON_GPU))
        if seq is None:
            what = f"unknown seq_id {seq_id!r}"
        else:
            what = {
                Status.WAITING: f"{seq_id} is waiting in the queue and holds no GPU blocks",
                Status.DISCARDED: f"{seq_id} is paused and its KV was already discarded",
                Status.FINISHED: f"{seq_id} already finished",
                Status.FAILED: f"{seq_id} already failed",
            }[seq.status]
        return f"{tool.name}: {what}; valid ids: {valid}"

    def _ids(self, *statuses: Status) -> str:
        engine = self.engine
        seqs = [s for s in (*engine.running, *engine.paused) if s.status in statuses]
        return ", ".join(sorted((s.seq_id for s in seqs), key=_id_order)) or "none"

    # --- results -----------------------------------------------------------------------------
    def _resident_snapshot(self) -> tuple[ResidentRecord, ...]:
        """What holds GPU blocks now (computing or paused), each with its share of the blocks."""
        engine = self.engine
        counts = engine.kv.pool.ref_counts
        unit = engine.kv.pool.unit
        # Each prefix chain's share is summed once (holders of a popular prefix share the same
        # tuple and the same float sum; it runs at the end of every rollout of the bound).
        shares: dict[tuple[int, int], float] = {}
        residents = []
        for seq in (*engine.running, *engine.paused):
            if seq.status not in _ON_GPU:
                continue
            chain = seq.request.prefix_hashes
            key = (id(chain), seq.prefix_held)
            share = shares.get(key)
            if share is None:
                share = shares[key] = unit * sum(1 / counts[h] for h in chain[: seq.prefix_held])
            residents.append(_make_resident(seq.seq_id, seq.block_type, seq.gpu_blocks + share))
        return tuple(residents)

    def record(self) -> EpisodeRecord:
        engine = self.engine
        stats = self._stats
        drain = self._drain
        residents = self._residents if self.done else self._resident_snapshot()
        evictions = tuple(e for e in engine.evictions if e.turn >= 0)  # warm-up's are unscored
        return EpisodeRecord(
            scenario=self.scenario.name,
            seed=self.seed,
            turns=len(stats),
            block_size=self.scenario.block_size,
            capacity_blocks=self.capacity,
            reference_tokens=self.reference.tokens,
            reference_block_steps=self.reference.block_steps,
            reference_peak_blocks=self.reference.peak_blocks,
            used_blocks=tuple(s.used_blocks for s in stats),
            queue=tuple(s.queue for s in stats),
            failures=tuple(s.failures for s in stats),
            tokens=tuple(s.tokens for s in stats),
            effective_tokens=tuple(s.effective_tokens for s in stats),
            forced_preemptions=tuple(s.forced_preemptions for s in stats),
            prefix_hit_blocks=sum(s.prefix_hit_blocks for s in stats),
            prefix_lookup_blocks=sum(s.prefix_lookup_blocks for s in stats),
            swap_latency_s=sum(s.swap_latency_s for s in (*stats, *drain)),
            evictions=evictions,
            residents=residents,
            calls_per_turn=tuple(self._calls_per_turn),
            invalid_calls=self._counts["invalid"],
            **self._tool_counters(),
            drain_steps=len(drain),
            drain_tokens=sum(s.tokens for s in drain),
            drain_effective_tokens=sum(s.effective_tokens for s in drain),
            drain_failures=sum(s.failures for s in drain) + self._drain_failures,
            drain_capped=len(drain) >= self.scenario.drain_cap,
            reference_drain_tokens=self.reference.drain_tokens,
            reference_ideal_block_steps=self.reference.ideal_block_steps,
            paused_evictions=sum(1 for e in evictions if e.paused),
            serving=self._serving_record(),
        )

    def _serving_record(self) -> ServingRecord:
        """What the clients of the requests the episode serves saw (`ServingRecord`), from each
        request's own log (`Sequence.first_token_wait`, `resumed_waits`, `stalls`)."""
        engine = self.engine
        before = self._before_turns
        first: list[float] = []
        resumed: list[float] = []
        completed: list[tuple[float, float]] = []
        gaps: dict[float, int] = {}
        served = 0
        for seq_id, seq in engine.sequences.items():
            if seq_id in before:
                continue
            served += 1
            if seq.first_token_wait >= 0:
                first.append(seq.first_token_wait)
            resumed.extend(seq.resumed_waits)
            stalls = seq.stalls
            between = seq.generated - seq.calls_answered  # gaps between tokens of one call
            paced = between - len(stalls)
            pace = 1.0 / seq.request.decode_rate
            if paced:
                gaps[pace] = gaps.get(pace, 0) + paced
            for stall in stalls:
                gaps[stall] = gaps.get(stall, 0) + 1
            if seq.status is Status.FINISHED:
                slowest = max((seq.first_token_wait, *seq.resumed_waits))
                per_token = (paced * pace + sum(stalls)) / between if between else 0.0
                completed.append((slowest, per_token))
        scenario = self.scenario
        block_bytes = scenario.block_size * scenario.bytes_per_token
        out, into, recomputed = self._moved_before
        return ServingRecord(
            step_seconds=scenario.step_seconds,
            requests=served,
            first_token_steps=tuple(first),
            resumed_first_token_steps=tuple(resumed),
            token_gaps=tuple(sorted(gaps.items())),
            completed=tuple(completed),
            offloaded_bytes=(engine.host.blocks_out - out) * block_bytes,
            loaded_bytes=(engine.host.blocks_in - into) * block_bytes,
            recompute_tokens=engine.recomputed_tokens - recomputed,
        )

    def _tool_counters(self) -> dict[str, int]:
        """Each tool's counter (`AgentTool.counter`) that the record has a field for: the built-in
        tools' (tested); a tool registered without one is counted in `calls_per_turn` only."""
        return {
            tool.counter: self._counts.get(tool.name, 0)
            for tool in ACTIONS
            if tool.counter in RECORD_FIELDS
        }

    # --- copies and checks -------------------------------------------------------------------
    # --- copying (declared as in `Scheduler`: a clone cannot forget a field) ---------------------
    SHARED_FIELDS: ClassVar[tuple[str, ...]] = (
        "scenario",
        "seed",
        "schedule",
        "reference",
        "turn",
        "_drain_failures",
        "_residents",
        "_calls_this_turn",
        "_before_turns",
        "_moved_before",
    )
    """Fields a clone shares: immutable values (the residents are a tuple of frozen records)."""
    READ_ONLY_FIELDS: ClassVar[frozenset[str]] = frozenset()
    OWN_FIELDS: ClassVar[tuple[str, ...]] = (
        "engine",
        "_stats",
        "_drain",
        "_calls_per_turn",
        "_counts",
        "_tables",
    )
    """Fields a clone gets its own of: the engine's clone, the logs, the call counts, and no
    lazy tables (those handed out describe, and are settled by, the original)."""

    def clone(self) -> Simulator:
        """An independent copy at the same point (lookahead plays futures on it)."""
        clone = shared_copy(self)
        clone.engine = self.engine.clone()
        clone._stats = list(self._stats)
        clone._drain = list(self._drain)
        clone._calls_per_turn = list(self._calls_per_turn)
        clone._counts = dict(self._counts)
        clone._tables = []
        return clone

    def rewrite(self, requests: Mapping[str, Request], future: Iterable[Request]) -> None:
        """Make this simulator (a what-if copy: a planner's sampled world, a test's twin) serve
        other request records: `requests` replaces the records of arrived requests it names,
        `future` the arrivals still to come. What derives from them is recomputed (the engine's
        side: `Scheduler.rewrite_requests`; the schedule and its reference run)."""
        t = self.engine.t
        arrived = [requests.get(r.seq_id, r) for r in self.schedule.requests if r.arrival_step < t]
        schedule = Schedule(requests=(*arrived, *future), horizon=self.schedule.horizon)
        self.engine.rewrite_requests(requests, schedule)
        self.schedule = schedule
        self.reference = run_reference(self.scenario, schedule)

    def check_invariants(self) -> None:
        self.engine.check()


_HOLDING = (Status.RUNNING, Status.PAUSED, Status.SWAPPED)
_ON_GPU = (Status.RUNNING, Status.PAUSED)
_DONE = (Status.FINISHED, Status.FAILED)


def _id_order(seq_id: str) -> tuple[int, str]:
    digits = seq_id.lstrip("r")
    return (int(digits), seq_id) if digits.isdigit() else (1 << 62, seq_id)
