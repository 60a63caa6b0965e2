"""`lookahead`: the upper-bound reference policy (a fortified rollout, Bertsekas).

At every turn it plays each base heuristic from the current state to the end of the episode on a
copy of the simulator (the arrival schedule is fixed, so the play-out is exact), scores the
finished copy with the rubric (under its run's weights), and keeps the best complete trajectory
seen so far; it then takes that trajectory's next actions. Because turn 0 already considers every
base heuristic played from the start, and the kept trajectory is only ever replaced by a better
one, its reward is never below any base heuristic's on the same episode.
"""

from __future__ import annotations

from collections.abc import Callable

from kv_cache_env.sim import Action, Simulator
from rubrics import DEFAULT_WEIGHTS, Weights

from .base import Policy, SimulatorPolicy
from .bound import play
from .heuristics import (
    CompressAllPolicy,
    CompressFirstPolicy,
    FifoPolicy,
    HeadroomPolicy,
    LruPolicy,
    NoopPolicy,
    PriorityPolicy,
    TrtllmPolicy,
)


class _Aggressive(PriorityPolicy):
    """Priority order with a headroom target (keeps usage under 0.8 where it can)."""

    name = "priority@0.8"
    target_usage = 0.8


class _CompressEarly(CompressFirstPolicy):
    """Compression only, with a headroom target."""

    name = "compress-first@0.8"
    target_usage = 0.8
    evict_when_short = False


BASE_HEURISTICS: tuple[Callable[[], Policy], ...] = (
    NoopPolicy,
    FifoPolicy,
    LruPolicy,
    PriorityPolicy,
    TrtllmPolicy,
    CompressFirstPolicy,
    HeadroomPolicy,
    CompressAllPolicy,
    _Aggressive,
    _CompressEarly,
)


def play_out(sim: Simulator, policy: Policy, weights: Weights) -> tuple[float, list[list[Action]]]:
    """Play `policy` from `sim`'s state (on a copy) to the end: (reward under `weights`,
    actions per turn)."""
    policy.reset(sim.seed)
    return play(sim, None, policy, weights)


class LookaheadPolicy(SimulatorPolicy):
    """Upper-bound reference: plays every base heuristic to the end on copies of the simulator
    and follows the best complete trajectory found so far (in-process only)."""

    name = "lookahead"
    optimises = True

    def __init__(
        self,
        heuristics: tuple[Callable[[], Policy], ...] = BASE_HEURISTICS,
        *,
        weights: Weights = DEFAULT_WEIGHTS,
    ) -> None:
        """`weights`: the rubric's weights it scores its play-outs under (its run's)."""
        self.heuristics = heuristics
        self.weights = weights
        self._best: float | None = None
        self._plan: list[list[Action]] = []
        self._seed: int | None = None

    def reset(self, seed: int) -> None:
        self._best = None
        self._plan = []
        self._seed = seed

    def act_in(self, sim: Simulator) -> list[Action]:
        if self._seed != sim.seed or (sim.turn == 0 and self._plan):
            self.reset(sim.seed)
        for make in self.heuristics:
            reward, plan = play_out(sim, make(), self.weights)
            if self._best is None or reward > self._best:
                self._best, self._plan = reward, plan
        return self._plan.pop(0)
