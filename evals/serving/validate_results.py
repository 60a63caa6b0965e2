"""The results `kvarena validate`'s checks read: one played episode (`EpisodeResult`) and a
run's episodes by (scenario, agent, seed) (`Results`).

An episode's result is what the checks use of it, typed: the reward, the seven rubric
components, the metrics, the CPU seconds the agent took, the bound's reward with a last-turn
dump, the planner's play-outs, and a digest of the episode record (the reference table and the
determinism check compare it). A crashed agent's episode is a result with its error and no
reward, never lost; asking for its reward names it. Both types pickle (the worker pool sends
them back).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kv_cache_env.sim import EpisodeRecord
from rubrics import DEFAULT_WEIGHTS, episode_metrics, score

from ..common.results import dumps

WEIGHTS = DEFAULT_WEIGHTS
"""`validate`'s weights, its planners' and its scores': always the suite's (no `--weights`)."""


def record_digest(record: Mapping[str, Any]) -> str:
    """sha256 of an episode record's canonical JSON (`EpisodeRecord.to_dict()`)."""
    return hashlib.sha256(dumps(record).encode()).hexdigest()


Key = tuple[str, str, int]
"""(scenario, agent, seed)."""


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    """One episode of one agent on one scenario and seed, as validate's checks read it."""

    agent: str
    """The label the checks call the agent by (a policy, a grid rule, `bound`, `no-swap`, …)."""
    scenario: str
    seed: int
    reward: float | None
    """The default-weighted reward; None when the agent crashed."""
    components: Mapping[str, float] = field(default_factory=dict)
    """The seven rubric components by name (empty when the agent crashed)."""
    metrics: Mapping[str, float | int] = field(default_factory=dict)
    """`rubrics.METRIC_NAMES` by name (empty when the agent crashed)."""
    record_digest: str | None = None
    """sha256 of the episode record's canonical JSON (`record_digest`); None when it crashed.
    The record itself is not kept: a run holds ~100,000 episodes, and its store one line each."""
    seconds: float = 0.0
    """CPU seconds the agent and the simulator took (the only field a rerun may change)."""
    dump_reward: float | None = None
    """The plain bound's trajectory's reward with a last-turn dump (None for other agents)."""
    plays: int = 0
    """A planner's play-outs over the episode (0 for fixed rules)."""
    error: str | None = None
    """Why the agent crashed; None for a played episode."""

    @classmethod
    def played(
        cls,
        agent: str,
        scenario: str,
        seed: int,
        record: EpisodeRecord,
        seconds: float,
        dump_reward: float | None = None,
        plays: int = 0,
    ) -> EpisodeResult:
        """The result of a finished episode, scored under `WEIGHTS` (the default weights)."""
        scored = score(record, WEIGHTS)
        return cls(
            agent,
            scenario,
            seed,
            scored.reward,
            scored.components,
            episode_metrics(record),
            record_digest(record.to_dict()),
            seconds,
            dump_reward,
            plays,
        )

    @classmethod
    def failed(cls, agent: str, scenario: str, seed: int, error: str) -> EpisodeResult:
        return cls(agent, scenario, seed, reward=None, error=error)

    @property
    def key(self) -> Key:
        return (self.scenario, self.agent, self.seed)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, object]:
        """Every field, as JSON values (a line of validate's store; `from_dict` reads it)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["components"] = dict(self.components)
        data["metrics"] = dict(self.metrics)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeResult:
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            raise ValueError(f"an episode result has the fields {sorted(names)}")
        return cls(**data)

    def fingerprint(self) -> str:
        """Every field but the CPU seconds as one canonical JSON line: equal for reruns of a
        deterministic episode, byte for byte."""
        data = self.to_dict()
        del data["seconds"]
        return dumps(data)


@dataclass(slots=True)
class Results:
    """A run's episode results by (scenario, agent, seed), with typed accessors for paired
    seeds; a later result for the same key replaces the earlier one."""

    by_key: dict[Key, EpisodeResult] = field(default_factory=dict)

    def add(self, result: EpisodeResult) -> None:
        self.by_key[result.key] = result

    def update(self, other: Results) -> None:
        self.by_key.update(other.by_key)

    def __getitem__(self, key: Key) -> EpisodeResult:
        return self.by_key[key]

    def __iter__(self) -> Iterator[EpisodeResult]:
        return iter(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    def failures(self) -> list[EpisodeResult]:
        return [r for r in self if not r.ok]

    def rewards(self, scenario: str, agent: str, seeds: Iterable[int]) -> list[float]:
        """The agent's rewards on `seeds`, in order; a crashed episode among them is an error."""
        out = []
        for seed in seeds:
            result = self.by_key[scenario, agent, seed]
            if result.reward is None:
                raise ValueError(
                    f"{agent} on {scenario} seed {seed} has no reward: it failed ({result.error})"
                )
            out.append(result.reward)
        return out

    def components(self, scenario: str, agent: str, seeds: Iterable[int], name: str) -> list[float]:
        """One rubric component of the agent's episodes on `seeds`, in order."""
        return [self.by_key[scenario, agent, s].components[name] for s in seeds]

    def metrics(self, scenario: str, agent: str, seeds: Iterable[int], name: str) -> list[float]:
        """One metric of the agent's episodes on `seeds`, in order."""
        return [self.by_key[scenario, agent, s].metrics[name] for s in seeds]


__all__ = ["EpisodeResult", "Key", "Results", "record_digest"]
