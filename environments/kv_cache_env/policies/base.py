"""What a baseline policy is, and the pressure controller the eviction heuristics share.

A policy sees one `Observation` per turn and answers with a list of actions (several per turn is
normal). Observation-based policies decide from the observation alone, so they behave the same
in-process and behind an HTTP chat endpoint (which sees only the text). A `SimulatorPolicy`
(lookahead) needs the simulator itself and runs in-process only.

The eviction heuristics differ only in *which* sequence goes first: each is a sort key over the
entries (`priority(entry)`, smallest first), and `OrderedEvictionPolicy` does the mechanics
(style: the victim order is a key, carrying out the preemption is the simulator's job).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from kv_cache_env.rl.features import compress_gain, growth_at_most, growth_blocks
from kv_cache_env.sim import Action, EntryView, Observation, Simulator, compress, evict

DEFAULT_TARGET_USAGE = 0.95


class Policy(ABC):
    name: ClassVar[str]
    needs_simulator: ClassVar[bool] = False
    reads_candidates: ClassVar[bool] = False
    """Whether `act` reads the pre-scored candidates (they are not built for those that don't)."""
    keeps_state: ClassVar[bool] = False
    """Whether `act` depends on more than this turn's observation (what it saw on earlier turns,
    its own random draws): the bound reuses only stateless policies' play-outs."""
    reads_sessions: ClassVar[bool] = True
    """Whether what it does depends on any one sequence's own signals (its phase, pause,
    priority, size, ...); False for a *blind* rule, which treats every sequence alike or
    gates on the header's numbers alone (validate holds the named regimes against these)."""
    optimises: ClassVar[bool] = False
    """Whether it searches by the rubric's reward (the planners): it is then built with the
    weights it will be scored under (`weights=`; `create(name, weights)` passes the run's)."""

    def reset(self, seed: int) -> None:  # noqa: B027 - optional hook
        """Called before each episode with its seed (for policies with their own randomness)."""

    @abstractmethod
    def act(self, obs: Observation) -> list[Action]:
        """The actions for this turn, applied in order before the engine step."""


class SimulatorPolicy(Policy):
    """A policy that reads the simulator itself (in-process only)."""

    needs_simulator = True

    def act(self, obs: Observation) -> list[Action]:
        raise TypeError(f"policy {self.name!r} needs the simulator; call act_in(sim)")

    @abstractmethod
    def act_in(self, sim: Simulator) -> list[Action]: ...


def decide(policy: Policy, sim: Simulator) -> list[Action]:
    """The policy's actions for the simulator's current turn."""
    if isinstance(policy, SimulatorPolicy):
        return policy.act_in(sim)
    return policy.act(sim.observe(hints=policy.reads_candidates))


# --- the shared pressure controller ---------------------------------------------------------
def blocks_to_free(obs: Observation, target_usage: float = DEFAULT_TARGET_USAGE) -> int:
    """Blocks to release now so that next step's growth fits under `target_usage` of capacity
    and, when the oldest waiting request is one step from failing, the queue head fits too."""
    urgent = 0
    if obs.queue.waiting and obs.queue.oldest_wait >= obs.max_wait - 1:
        urgent = obs.queue.head_blocks
    limit = int(target_usage * obs.capacity)
    slack = limit - obs.used - urgent
    if slack >= growth_at_most(obs):
        return 0  # the growth fits whatever it is: no sum over the running set needed
    return max(0, growth_blocks(obs) - slack)


class OrderedEvictionPolicy(Policy):
    """Evict in `priority` order (smallest key first) until `blocks_to_free` is met."""

    target_usage: ClassVar[float] = DEFAULT_TARGET_USAGE

    @abstractmethod
    def priority(self, entry: EntryView) -> tuple[Any, ...]: ...

    def eligible(self, entry: EntryView) -> bool:
        return entry.frees > 0 and not entry.swapped

    def act(self, obs: Observation) -> list[Action]:
        need = blocks_to_free(obs, self.target_usage)
        actions: list[Action] = []
        if need <= 0:
            return actions
        for entry in sorted(filter(self.eligible, obs.entries), key=self.priority):
            actions.append(evict(entry.seq_id))
            need -= entry.frees
            if need <= 0:
                break
        return actions


def compress_then(need: int, order: list[EntryView]) -> tuple[list[Action], int]:
    """Compress entries in `order` (one level, then a second pass) until `need` is met."""
    actions: list[Action] = []
    levels = {e.seq_id: e for e in order}
    for _ in range(2):
        for seq_id, entry in list(levels.items()):
            if need <= 0:
                return actions, need
            gain = compress_gain(entry)
            if gain <= 0:
                continue
            actions.append(compress(seq_id))
            need -= gain
            levels[seq_id] = _after_compress(entry, gain)
    return actions, need


def _after_compress(entry: EntryView, gain: int) -> EntryView:
    level = entry.quantization.next_level
    assert level is not None
    return entry._replace(quantization=level, private_blocks=entry.private_blocks - gain)
