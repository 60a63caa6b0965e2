"""`VectorSimulator`: many independent episodes stepped together, optionally in worker processes.

    episodes = [(get_scenario("hard"), seed) for seed in range(64)]
    with VectorSimulator(episodes, workers=2) as vec:
        observations = vec.reset()                    # one Observation per episode
        while not vec.done:
            results = vec.step([my_policy(obs) for obs in observations])  # actions per episode
            observations = [r.observation for r in results]
        records = vec.records()                       # one EpisodeRecord per episode

or, to play whole episodes under an agent that runs inside the workers (rollouts of the bound,
benchmarks):

    records = vec.play(make_agent)     # make_agent(seed) -> (sim -> list[Action]); picklable

Every episode is an ordinary `Simulator`, stepped exactly as a caller stepping it alone would,
so results equal the scalar engine's episode for episode. Worker `w` of `workers` owns a
contiguous slice of the episodes for `reset`/`step`; a call sends one message to each worker and
waits for all of them, so the workers step their slices in parallel. `play` is scheduled
dynamically instead: every worker gets all the specs and takes the next unplayed episode from a
shared counter as it finishes one, so a worker slowed by longer episodes (or by another process
on its core) plays fewer of them rather than leaving the other core idle at the end; a worker
sends its records a few at a time as the episodes end, and `play` returns them in the caller's
order. The caller keeps the records of finished episodes, so a worker sends each one once.
`workers=0` runs everything in this process through the same code (no pipes). The package's
purity rule holds: no files, no clock; the only outside-world effect is the worker processes,
their pipes and the shared counter.

An episode spec is `(scenario, seed)` or `(scenario, seed, schedule)` (a `Scenario` or a
built-in scenario name; `schedule` replays fixed arrivals), or any picklable object with a
`simulator()` method (e.g. `kv_cache_env.episodes.EpisodeSpec`, which loads a trace in the
worker). Turn protocol, as in `evals.serving.runner`: a turn's actions are applied in order,
then one engine step; an empty action list counts as an implicit noop (a reply without a tool
call).
"""

from __future__ import annotations

import contextlib
import copyreg
import io
import operator
import pickle
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from .actions import Action, ActionResult
from .observation import Observation
from .record import EpisodeRecord, EvictionRecord, ResidentRecord
from .scenario import Scenario, get_scenario
from .scheduler import StepStats
from .simulator import Simulator
from .workload import Schedule

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

EpisodeSpecLike = tuple[Scenario | str, int] | tuple[Scenario | str, int, Schedule | None] | Any
Observe = Callable[[Simulator], Any]
Agent = Callable[[Simulator], list[Action]]
"""One turn's actions for the simulator's current state."""
AgentFactory = Callable[[int], Agent]
"""Builds the agent of one episode from its seed (must be picklable when workers > 0)."""
Claim = Callable[[], int | None]
"""The index of the next episode to play, or None when all are taken."""


def default_observe(sim: Simulator) -> Observation:
    """The default per-turn observation: `sim.observe()` (hints on)."""
    return sim.observe()


@dataclass(frozen=True, slots=True)
class VectorStep:
    """What one episode's turn produced."""

    observation: Any
    """`observe(sim)` for the next turn; None once the episode is done (with `observe_done`,
    the turn that ends it carries `observe(sim)` of the final state, after the drain)."""
    stats: StepStats | None
    """The engine step's figures; None when the episode was already done before this call."""
    results: tuple[ActionResult, ...]
    """One result per action applied this turn, in order."""
    done: bool
    record: EpisodeRecord | None = None
    """The episode's record, set on the turn that ends it (and on calls after it)."""


class VectorSimulator:
    """Independent episodes stepped in lock step; see the module docstring."""

    def __init__(
        self,
        episodes: Sequence[EpisodeSpecLike],
        *,
        workers: int = 0,
        observe: Observe | None = default_observe,
        mp_context: str | None = None,
        observe_done: bool = False,
    ) -> None:
        """`workers`: worker processes (0: step in this process; at most one per episode).
        `observe`: what each turn returns per episode (default `Simulator.observe()`; pass a
        picklable module-level function to send compact features instead, or None for none).
        `mp_context`: multiprocessing start method (default: the platform's).
        `observe_done`: also observe each episode on the turn that ends it (the state after the
        drain: a Gymnasium env's terminal observation) instead of returning None there."""
        if not episodes:
            raise ValueError("a VectorSimulator needs at least one episode")
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.episodes = list(episodes)
        self.num_envs = len(self.episodes)
        self._observe = observe
        self._done = [False] * self.num_envs
        self._records: list[EpisodeRecord | None] = [None] * self.num_envs
        """Finished episodes' records, as the workers sent them (each is sent once)."""
        self._reset_called = False
        count = min(workers, self.num_envs)
        bounds = [self.num_envs * w // max(count, 1) for w in range(max(count, 1) + 1)]
        self._slices = [slice(bounds[w], bounds[w + 1]) for w in range(max(count, 1))]
        self._local: _Slice | None = None
        self._pipes: list[Connection] = []
        self._processes: list[Any] = []
        self._counter: Any = None
        if count == 0:
            self._local = _Slice(self.episodes, observe, observe_done)
            return
        import multiprocessing  # here, not at the top: every `import kv_cache_env` pays for it

        context = multiprocessing.get_context(mp_context)
        self._counter = context.Value("q", 0)  # `play`'s next episode, shared by the workers
        for part in self._slices:
            parent, child = context.Pipe()
            process = context.Process(
                target=_worker,
                args=(child, self.episodes[part], observe, observe_done, self._counter),
                daemon=True,
            )
            process.start()
            child.close()
            self._pipes.append(parent)
            self._processes.append(process)

    # --- driving -----------------------------------------------------------------------------
    def reset(self, episodes: Sequence[EpisodeSpecLike] | None = None) -> list[Any]:
        """(Re)build every episode from its spec (or from `episodes`, which replace the specs,
        one per episode); returns each one's first observation."""
        if episodes is not None:
            if len(episodes) != self.num_envs:
                raise ValueError(f"need {self.num_envs} episode specs, got {len(episodes)}")
            self.episodes = list(episodes)
        self._done = [False] * self.num_envs
        self._records = [None] * self.num_envs
        self._reset_called = True
        return self._call("reset", [self.episodes[part] for part in self._slices])

    def reset_at(self, index: int, episode: EpisodeSpecLike | None = None) -> Any:
        """(Re)build episode `index` alone (from `episode`, which replaces its spec, or from
        its spec), e.g. when it is done; returns its first observation."""
        if not self._reset_called:
            raise RuntimeError("call reset() before reset_at()")
        if not 0 <= index < self.num_envs:
            raise IndexError(f"episode index {index} out of range(0, {self.num_envs})")
        if episode is not None:
            self.episodes[index] = episode
        w = next(w for w, part in enumerate(self._slices) if part.start <= index < part.stop)
        self._done[index] = False
        self._records[index] = None
        payload = (index - self._slices[w].start, self.episodes[index])
        return self._call("reset_at", [payload], only=w)[0]

    def step(self, actions: Sequence[Sequence[Action]]) -> list[VectorStep]:
        """Play one turn of every episode: `actions[i]` are applied to episode i in order, then
        its engine steps. A done episode is left alone (its `actions` must be empty)."""
        if not self._reset_called:
            raise RuntimeError("call reset() before step()")
        if len(actions) != self.num_envs:
            raise ValueError(
                f"need one action list per episode ({self.num_envs}), got {len(actions)}"
            )
        for i, (done, acts) in enumerate(zip(self._done, actions, strict=True)):
            if done and acts:
                raise ValueError(f"episode {i} is done; it takes no more actions")
        replies: list[VectorStep | None] = self._call(
            "step", [[list(a) for a in actions[part]] for part in self._slices]
        )
        results: list[VectorStep] = []
        for i, reply in enumerate(replies):
            if reply is None:  # done before this call: the worker sent its record already
                reply = VectorStep(None, None, (), True, self._records[i])
            elif reply.record is not None:
                self._records[i] = reply.record
            results.append(reply)
        self._done = [r.done for r in results]
        return results

    def play(self, make_agent: AgentFactory) -> list[EpisodeRecord]:
        """Reset every episode and play it to the end under `make_agent(seed)`, inside the
        workers; returns the records, in the episodes' order. Leaves the episodes done (or,
        when it raises, to be reset)."""
        self._reset_called = False
        if self._counter is not None:
            self._counter.value = 0  # no worker reads it between calls
        # every worker gets every spec (pickled once): any of them may play any episode
        played: list[tuple[int, EpisodeRecord]] = self._call(
            "play", [(make_agent, self.episodes)] * len(self._slices)
        )
        self._reset_called = True
        records: list[Any] = [None] * self.num_envs
        for index, record in played:
            records[index] = record
        assert len(played) == self.num_envs and all(r is not None for r in records)
        self._records = list(records)
        self._done = [True] * self.num_envs
        return records

    def records(self) -> list[EpisodeRecord]:
        """Each episode's record so far (final once it is done)."""
        if not self._reset_called:
            raise RuntimeError("call reset() before records()")
        replies: list[EpisodeRecord | None] = self._call("records", [None] * len(self._slices))
        out: list[EpisodeRecord] = []
        for i, reply in enumerate(replies):
            if reply is None:  # finished, and its record was sent before
                reply = self._records[i]
                assert reply is not None
            out.append(reply)
        return out

    @property
    def done(self) -> bool:
        """Every episode is done."""
        return all(self._done)

    @property
    def dones(self) -> list[bool]:
        return list(self._done)

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        for pipe in self._pipes:
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.send_bytes(_dumps(("close", None)))
            pipe.close()
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
        self._pipes = []
        self._processes = []

    def __enter__(self) -> VectorSimulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_pipes", None):
            self.close()

    # --- transport ---------------------------------------------------------------------------
    def _call(self, command: str, payloads: list[Any], only: int | None = None) -> list[Any]:
        """Send `command` with one payload per worker slice (or to worker `only`, one
        payload); gather the replies in order."""
        if self._local is not None:
            parts: list[Any] = []
            reply = self._local.run(command, payloads[0], _count(self.num_envs), parts.append)
            return parts + reply
        if not self._pipes:
            raise RuntimeError("the VectorSimulator is closed")
        from multiprocessing.connection import wait

        pipes = self._pipes if only is None else [self._pipes[only]]
        message: bytes | None = None
        for pipe, payload in zip(pipes, payloads, strict=True):
            if message is None or payload is not payloads[0]:
                message = _dumps((command, payload))  # a payload shared by all: pickled once
            pipe.send_bytes(message)
        replies: list[list[Any]] = [[] for _ in pipes]
        failures: list[str] = []
        waiting = set(range(len(pipes)))
        while waiting:  # every reply is read, so that a failure leaves no pipe behind
            # whichever worker is ready first: its records are unpickled while the other plays
            for ready in wait([pipes[w] for w in waiting]):
                w = pipes.index(ready)
                status, reply = pickle.loads(pipes[w].recv_bytes())
                if status == "part":  # a `play` worker's finished episodes, more to come
                    replies[w].extend(reply)
                    continue
                waiting.remove(w)
                if status:
                    replies[w].extend(reply)
                else:
                    failures.append(reply)
        if failures:
            raise RuntimeError(f"a VectorSimulator worker failed:\n{failures[0]}")
        return [item for reply in replies for item in reply]


class _Slice:
    """The episodes one worker owns, and the commands it answers."""

    def __init__(
        self, episodes: list[EpisodeSpecLike], observe: Observe | None, observe_done: bool = False
    ) -> None:
        self.episodes = episodes
        self.observe = observe
        self.observe_done = observe_done
        self.sims: list[Simulator | None] = []
        """None: played by `play` (done; the caller holds its record)."""
        self.sent: list[bool] = []
        """The caller holds the episode's final record."""

    def run(
        self, command: str, payload: Any, claim: Claim, emit: Callable[[Any], None]
    ) -> list[Any]:
        """Answer `command`. `play` takes its episodes from `claim` and hands each one's
        `(index, record)` to `emit` as it ends (the worker sends it at once)."""
        if command == "reset":
            self.episodes = payload
            self.sims = [build(spec) for spec in self.episodes]
            self.sent = [False] * len(self.sims)
            return [self._look(sim) for sim in self.sims]
        if command == "reset_at":
            local, spec = payload
            self.episodes[local] = spec
            self.sims[local] = sim = build(spec)
            self.sent[local] = False
            return [self._look(sim)]
        if command == "step":
            return [self._turn(i, actions) for i, actions in enumerate(payload)]
        if command == "play":
            make_agent, specs = payload
            # the caller holds every record once this returns; the slice's current episodes
            # are dropped first (64 live `hard` sims slow the in-process play by ~10%)
            self.sims = [None] * len(self.episodes)
            self.sent = [True] * len(self.episodes)
            while (index := claim()) is not None:
                sim = build(specs[index])
                emit((index, _play(sim, make_agent(sim.seed))))
            return []
        if command == "records":
            return [self._record(i) for i in range(len(self.sims))]
        raise ValueError(f"unknown command {command!r}")

    def _look(self, sim: Simulator, ending: bool = False) -> Any:
        if self.observe is None or (sim.done and not (ending and self.observe_done)):
            return None
        return self.observe(sim)

    def _record(self, i: int) -> EpisodeRecord | None:
        """Episode i's record so far, or None when the caller holds its final record."""
        sim = self.sims[i]
        return None if sim is None or self.sent[i] else sim.record()

    def _turn(self, i: int, actions: list[Action]) -> VectorStep | None:
        """Episode i's turn; None when it was done and the caller holds its record."""
        sim = self.sims[i]
        if sim is None or sim.done:
            record = self._record(i)
            self.sent[i] = True
            return None if record is None else VectorStep(None, None, (), True, record)
        turn = sim.play_turn(actions)
        results, stats = turn.results, turn.stats
        record = self._record(i) if sim.done else None
        self.sent[i] = sim.done
        return VectorStep(self._look(sim, ending=True), stats, results, sim.done, record)


def build(spec: EpisodeSpecLike) -> Simulator:
    """The simulator of one episode spec (see the module docstring)."""
    if hasattr(spec, "simulator"):
        return spec.simulator()
    scenario, seed, *rest = spec
    if isinstance(scenario, str):
        scenario = get_scenario(scenario)
    schedule = rest[0] if rest else None
    return Simulator(scenario, int(seed), schedule=schedule)


def _play(sim: Simulator, agent: Agent) -> EpisodeRecord:
    while not sim.done:
        sim.play_turn(agent(sim))
    return sim.record()


def _count(n: int) -> Claim:
    """In-process `play`: the episodes in order."""
    indices: Iterator[int] = iter(range(n))
    return lambda: next(indices, None)


def _shared_count(counter: Any, n: int) -> Claim:
    """A worker's `play`: the next episode no worker has taken (`counter` is shared)."""

    def claim() -> int | None:
        with counter.get_lock():
            index = int(counter.value)
            if index >= n:
                return None
            counter.value = index + 1
        return index

    return claim


# --- pickling --------------------------------------------------------------------------------
# The records and step results a worker sends are frozen slotted dataclasses, which pickle by
# default as a class plus a per-object `__getstate__` list that `__setstate__` writes back
# field by field: ~5 ms to dump and ~6 ms to load the 32 records of half a 64-episode `hard`
# batch, mostly in the parent while the workers wait. Pickled as a call of the class on its
# field values they take ~1.5 ms and ~2.5 ms: the same objects, for a class whose fields are
# all `__init__` arguments stored as given (any other keeps the default).
def _by_fields(cls: type) -> Callable[[Any], tuple[type, tuple[Any, ...]]]:
    values = operator.attrgetter(*(f.name for f in fields(cls)))
    return lambda obj: (cls, values(obj))


_DISPATCH = copyreg.dispatch_table | {
    cls: _by_fields(cls)
    for cls in (EpisodeRecord, EvictionRecord, ResidentRecord, StepStats, ActionResult, VectorStep)
    if len(fields(cls)) > 1
    and all(f.init for f in fields(cls))
    and not hasattr(cls, "__post_init__")
}


def _dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(obj)
    return buffer.getvalue()


_CHUNK = 8
"""`play` records a worker sends per message. One per message costs the caller a wake-up per
episode (~12 ms of its CPU for 64 `hard` episodes, taken from the playing workers); a slice's
all at the end leave ~5 ms of unpickling after the last episode. 8: ~7 ms and ~1 ms."""


def _worker(
    conn: Connection,
    episodes: list[EpisodeSpecLike],
    observe: Observe | None,
    observe_done: bool,
    counter: Any,
) -> None:
    part = _Slice(episodes, observe, observe_done)
    pending: list[Any] = []

    def send_part(item: Any) -> None:
        """`play`'s finished episodes go to the caller `_CHUNK` at a time as they end."""
        pending.append(item)
        if len(pending) >= _CHUNK:
            conn.send_bytes(_dumps(("part", pending)))
            pending.clear()

    while True:
        try:
            command, payload = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        if command == "close":
            return
        pending.clear()
        try:
            claim = _shared_count(counter, len(payload[1])) if command == "play" else _count(0)
            result = part.run(command, payload, claim, send_part)
            reply = _dumps((True, pending + result))  # what `send_part` still holds, first
        except Exception:  # reported to the caller, which raises
            reply = _dumps((False, traceback.format_exc()))
        conn.send_bytes(reply)
