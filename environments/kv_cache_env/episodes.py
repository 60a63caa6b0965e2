"""What identifies one episode, as plain JSON-safe data, and how to build its simulator.

Shared by the verifiers taskset (its task data) and the evals (their jobs), so an episode named
the same way is the same episode everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .limits import MAX_EPISODE_STEPS, whole_number
from .sim import Scenario, Schedule, Simulator, get_scenario
from .traces.replay import Trace, load_trace, trace_scenario, trace_schedule

# The documented seed split (serving and context families alike). Evaluation - every default in
# the CLI, the tasksets and `kvarena validate` - uses seeds from 0 up; training (RL, learned
# baselines, tuning) uses seeds from TRAIN_SEED_START up, so no evaluated episode is trained on.
EVAL_SEED_START = 0
TRAIN_SEED_START = 1_000_000
EVAL_SEEDS = range(EVAL_SEED_START, TRAIN_SEED_START)


@dataclass(frozen=True)
class EpisodeSpec:
    scenario: str
    """Built-in scenario name; with `trace`, the tier whose budget and mix the replay uses."""
    seed: int
    trace: str | None = None
    """Built-in trace name (`mooncake-conversation`, `azure-conv-2023`) or path of a Mooncake
    .jsonl or Azure .csv trace (optionally .gz) to replay instead of synthetic arrivals."""
    full: bool = False
    """With `trace`: replay the whole trace rather than a seeded window."""
    steps: int | None = None
    """Turns per episode (default: the scenario's), 1..`MAX_EPISODE_STEPS` (10,000)."""
    block_size: int | None = None
    """Tokens per block (default: the scenario's, or the trace's prefix granularity)."""

    @property
    def label(self) -> str:
        """The scenario name results carry (replays are named after the trace file)."""
        return f"trace:{Path(self.trace).name}" if self.trace else self.scenario

    def resolve(self) -> tuple[Scenario, Schedule | None]:
        if self.steps is not None:
            whole_number(self.steps, "steps", 1, MAX_EPISODE_STEPS)
        base = get_scenario(self.scenario)
        changes: dict[str, object] = {}
        if self.steps is not None:
            changes["steps"] = self.steps
        if self.block_size is not None and self.trace is None:
            changes["block_size"] = self.block_size
        if changes:
            base = base.with_options(**changes)
        if self.trace is None:
            return base, None
        trace = _load(self.trace)
        scenario = trace_scenario(trace, base, full=self.full)
        return scenario, trace_schedule(trace, scenario, self.seed, full=self.full)

    def simulator(self) -> Simulator:
        scenario, schedule = self.resolve()
        return Simulator(scenario, self.seed, schedule=schedule)


def load_episode_trace(path: str) -> Trace:
    """The trace episodes replay, parsed once per process (and inherited by forked workers):
    the CLI checks a trace with this before its episodes resolve it."""
    return _load(path)


@lru_cache(maxsize=4)
def _load(path: str) -> Trace:
    return load_trace(path)
