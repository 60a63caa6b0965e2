"""Normalized scores against the leaderboard's floor and ceiling, on paired seeds.

normalized = (mean agent - mean noop) / (mean bound - mean noop) over the seeds all three ran
(D4RL-style: 0 = doing nothing, 1 = the reference bound), and the paired difference bound - agent
with its Student-t 95% CI. Both are None where noop or the bound was not run on the scenario, or
where the range is too small to mean anything (< 0.05).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kv_cache_env.policies import REFERENCE

from ..common.stats import mean_ci

FLOOR = "noop"
MIN_RANGE = 0.05


@dataclass(frozen=True)
class Normalized:
    score: float | None
    """(agent - noop) / (bound - noop) on paired seeds; None without a range."""
    to_bound: tuple[float, float] | None
    """Paired bound - agent: (mean, 95% half-width); None when the bound was not run."""
    seeds: int
    """Seeds the figures rest on."""


def normalized_scores(
    results: Iterable[Mapping[str, Any]], *, floor: str = FLOOR, top: str = REFERENCE
) -> dict[tuple[str, str], Normalized]:
    """(scenario, agent) -> its normalized figures, from ok results. `floor` and `top` name
    the agents at 0 and 1 (the report normalizes the context family's levels between its own
    `noop` and `oracle` with the same arithmetic)."""
    rewards: dict[tuple[str, str], dict[Any, float]] = {}
    for r in results:
        if r.get("status") == "ok" and r.get("reward") is not None:
            rewards.setdefault((r["scenario"], r["agent"]), {})[r["seed"]] = float(r["reward"])
    out = {}
    for (scenario, agent), mine in rewards.items():
        bound = rewards.get((scenario, top), {})
        lowest = rewards.get((scenario, floor), {})
        to_bound = None
        common_bound = sorted(set(mine) & set(bound))
        if common_bound:
            to_bound = mean_ci([bound[s] - mine[s] for s in common_bound])
        common = sorted(set(mine) & set(bound) & set(lowest))
        score = None
        if common:
            high = sum(bound[s] for s in common) / len(common)
            low = sum(lowest[s] for s in common) / len(common)
            ours = sum(mine[s] for s in common) / len(common)
            if high - low >= MIN_RANGE:
                score = (ours - low) / (high - low)
        out[scenario, agent] = Normalized(score, to_bound, len(common) or len(common_bound))
    return out
