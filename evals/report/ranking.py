"""The leaderboard's ranking: agents by their mean normalized score over the suite's
scenarios, with a 95% confidence interval and a 95% interval of their rank, both by a paired
bootstrap over seeds.

Per scenario, an episode's normalized score is (agent - noop) / (mean bound - mean noop) on
its seed, over the seeds where noop and the bound both ran; a scenario enters the suite mean
only where that range is at least `MIN_RANGE` (below it there is nothing to normalize by:
`easy`, for one). An agent's suite score is the mean of its per-scenario scores over the
scenarios it ran. The bootstrap resamples each scenario's seeds with replacement, the same
draw for every agent (paired: the same episodes), recomputes every agent's suite score and
ranks them; the 2.5th and 97.5th percentiles give the score's CI and the rank interval.

A scenario normalized on fewer than `min_seeds` paired seeds (a 2-episode trace replay, whose
interval spans the whole range) is shown, flagged (`Ranking.few`), but kept out of the suite
mean, unless the caller asks for it (`min_seeds=1`; `kvarena report --min-episodes 1`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kv_cache_env.policies import REFERENCE

from ..serving.normalize import FLOOR, MIN_RANGE

RESAMPLES = 1000
BOOTSTRAP_SEED = 0
"""The bootstrap's generator seed: the same results give the same report."""


@dataclass(frozen=True)
class Ranked:
    agent: str
    score: float | None
    """Mean normalized score over the scenarios it ran that have a range (None: none)."""
    ci: tuple[float, float] | None
    """95% bootstrap interval of `score`."""
    rank: int | None
    """1 = best; None without a score."""
    rank_interval: tuple[int, int] | None
    """95% bootstrap interval of the rank."""
    per_scenario: dict[str, float | None]
    """Scenario -> normalized score (None: not run there, or no range)."""
    reward: float
    """Mean raw reward over all its ok episodes."""
    episodes: int
    scenarios: int
    """Scenarios with a range it ran (those its score averages)."""
    versus: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    """Anchor -> (score - the anchor's, and its 95% interval from the same bootstrap draws:
    paired), for each anchor ranked beside it (not for the anchor itself)."""


@dataclass(frozen=True)
class Ranking:
    rows: list[Ranked]
    scenarios: list[str]
    """Every scenario in the results, in display order."""
    normalized: list[str]
    """The scenarios whose range is wide enough to normalize by."""
    ranges: dict[str, float]
    """Scenario -> mean bound - mean noop on its paired seeds."""
    anchors: list[str] = field(default_factory=list)
    """The anchor agents ranked (each row's `versus` compares it with them)."""
    few: dict[str, int] = field(default_factory=dict)
    """Scenarios with a range but fewer paired seeds than the minimum -> their seed count:
    shown (each row's `per_scenario` has them) and flagged, not in the suite mean."""
    min_seeds: int = 1
    """The paired seeds a scenario needed to count in the mean."""


def rank_agents(
    results: Sequence[Mapping[str, Any]],
    scenarios: Sequence[str],
    reference: Sequence[Mapping[str, Any]] = (),
    *,
    floor: str = FLOOR,
    top: str = REFERENCE,
    anchors: Sequence[str] = (),
    min_seeds: int = 1,
) -> Ranking:
    """`reference`: noop and bound results to normalize by where `results` lack them (from the
    shipped table); they are not ranked unless they are also in `results`. `floor` and `top`
    name the agents at 0 and 1 of each scenario's range (the context family's section ranks its
    levels between `noop` and `oracle`). Every agent is compared with each of `anchors` that
    was ranked (`Ranked.versus`). A scenario with fewer than `min_seeds` paired seeds is
    kept out of the suite mean (`Ranking.few`)."""
    rewards: dict[tuple[str, str], dict[int, float]] = {}
    for r in (*reference, *results):
        if r.get("status") == "ok" and r.get("reward") is not None:
            rewards.setdefault((r["scenario"], r["agent"]), {})[r["seed"]] = float(r["reward"])
    agents = list(dict.fromkeys(r["agent"] for r in results))
    every, ranges = _values(rewards, agents, scenarios, floor, top)
    few = {sc: v[0].shape[1] for sc, v in every.items() if v[0].shape[1] < min_seeds}
    values = {sc: v for sc, v in every.items() if sc not in few}
    normalized = list(values)
    ones = {sc: np.ones((1, m[0].shape[1])) for sc, m in values.items()}
    point = _suite_scores(ones, values, len(agents), 1)[0]
    boot = _suite_scores(_draws(values), values, len(agents), RESAMPLES)
    ranks = _ranks(boot).astype(float)
    point_ranks = _ranks(point[None, :])[0]
    per_scenario = {sc: _scenario_scores(every[sc]) for sc in every}
    # every agent's intervals at once, over the draws where it has a score (NaN elsewhere)
    ranks[np.isnan(boot)] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an agent with no valid draw: NaN
        low, high = np.nanpercentile(boot, [2.5, 97.5], axis=0)
        first = np.nanpercentile(ranks, 2.5, axis=0, method="lower")
        last = np.nanpercentile(ranks, 97.5, axis=0, method="higher")
    present = [a for a in anchors if a in agents]
    versus = _versus(point, boot, [agents.index(a) for a in present])
    by_agent: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:  # one pass: agents x results was quadratic (2,000 agents: minutes)
        by_agent.setdefault(r["agent"], []).append(r)
    rows = []
    for i, agent in enumerate(agents):
        mine_all = by_agent[agent]
        ok = [float(r["reward"]) for r in mine_all if r["status"] == "ok"]
        per = {sc: per_scenario[sc][i] if sc in per_scenario else None for sc in scenarios}
        has = not np.isnan(point[i])
        valid = has and not np.isnan(low[i])
        rows.append(
            Ranked(
                agent=agent,
                score=float(point[i]) if has else None,
                ci=(float(low[i]), float(high[i])) if valid else None,
                rank=int(point_ranks[i]) if has else None,
                rank_interval=(int(first[i]), int(last[i])) if valid else None,
                per_scenario=per,
                reward=sum(ok) / len(ok) if ok else float("nan"),
                episodes=len(mine_all),
                scenarios=sum(per[sc] is not None for sc in normalized),
                versus={a: v[i] for a, v in zip(present, versus, strict=True) if v[i] is not None},
            )
        )
    rows.sort(key=lambda r: (r.rank is None, r.rank or 0, -_key(r.reward), r.agent))
    return Ranking(rows, list(scenarios), normalized, ranges, present, few, min_seeds)


Values = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
"""scenario -> (agents x seeds rewards, nan = absent; noop per seed; bound per seed)."""


def _values(
    rewards: Mapping[tuple[str, str], Mapping[int, float]],
    agents: Sequence[str],
    scenarios: Sequence[str],
    floor: str,
    top: str,
) -> tuple[Values, dict[str, float]]:
    """Per scenario with a range, the agents' rewards on the seeds where `floor` and `top` both
    ran; and every scenario's range (mean top - mean floor) where they did."""
    values: Values = {}
    ranges: dict[str, float] = {}
    for scenario in scenarios:
        lowest = rewards.get((scenario, floor), {})
        highest = rewards.get((scenario, top), {})
        seeds = sorted(set(lowest) & set(highest))
        if not seeds:
            continue
        low = np.array([lowest[s] for s in seeds])
        high = np.array([highest[s] for s in seeds])
        ranges[scenario] = float(high.mean() - low.mean())
        if ranges[scenario] < MIN_RANGE:
            continue
        matrix = np.full((len(agents), len(seeds)), np.nan)
        for i, agent in enumerate(agents):
            mine = rewards.get((scenario, agent), {})
            for j, seed in enumerate(seeds):
                if seed in mine:
                    matrix[i, j] = mine[seed]
        values[scenario] = (matrix, low, high)
    return values, ranges


def _versus(
    point: np.ndarray, boot: np.ndarray, anchors: Sequence[int]
) -> list[list[tuple[float, float, float] | None]]:
    """Per anchor (by index), per agent: its score - the anchor's, with the 95% interval of that
    difference over the bootstrap draws (the same draws for both: paired); None for the anchor
    itself and where either has no score."""
    out = []
    for j in anchors:
        diff = point - point[j]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = np.nanpercentile(boot - boot[:, j : j + 1], [2.5, 97.5], axis=0)
        out.append(
            [
                None
                if i == j or np.isnan(diff[i]) or np.isnan(low[i])
                else (float(diff[i]), float(low[i]), float(high[i]))
                for i in range(len(point))
            ]
        )
    return out


def _scenario_scores(value: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[float | None]:
    """Per agent: (mean agent - mean noop) / (mean bound - mean noop) over the seeds the agent
    ran (None where it ran none, or the range is not positive)."""
    matrix, low, high = value
    present = ~np.isnan(matrix)
    count = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ours = np.where(present, matrix, 0.0).sum(axis=1) / count
        floor = (present * low).sum(axis=1) / count
        span = (present * high).sum(axis=1) / count - floor
        score = (ours - floor) / span
    pairs = zip(score, count, span, strict=True)
    return [float(v) if n > 0 and s > 0 else None for v, n, s in pairs]


def _draws(
    values: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> dict[str, np.ndarray]:
    """Per scenario, (resamples x seeds) counts of each seed in a bootstrap draw."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    out = {}
    for scenario, (matrix, _, _) in values.items():
        n = matrix.shape[1]
        picks = rng.integers(0, n, size=(RESAMPLES, n))
        counts = np.zeros((RESAMPLES, n))
        np.add.at(counts, (np.arange(RESAMPLES)[:, None], picks), 1.0)
        out[scenario] = counts
    return out


def _suite_scores(
    weights: Mapping[str, np.ndarray],
    values: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    agents: int,
    draws: int,
) -> np.ndarray:
    """(draws x agents) mean over scenarios of each agent's normalized score, every mean taken
    with the draw's seed weights over the seeds the agent ran (noop and the bound on the same
    seeds: paired)."""
    total = np.zeros((draws, agents))
    count = np.zeros((draws, agents))
    for scenario, (matrix, low, high) in values.items():
        present = (~np.isnan(matrix)).astype(float)
        w = weights[scenario]
        seen = w @ present.T
        agent = w @ np.where(present > 0, matrix, 0.0).T
        floor = w @ (present * low).T
        top = w @ (present * high).T
        with np.errstate(invalid="ignore", divide="ignore"):
            span = top - floor
            score = (agent - floor) / span
        scored = (seen > 0) & (span > 0)
        # accumulated scenario by scenario: a (scenarios x draws x agents) stack took 800 MB
        # at 2,000 agents x 50 scenarios
        total += np.where(scored, score, 0.0)
        count += scored
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """(draws x agents) rank of each agent in each draw (1 = best; nan scores rank last)."""
    filled = np.where(np.isnan(scores), -np.inf, scores)
    order = np.argsort(-filled, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(scores.shape[0])[:, None]
    ranks[rows, order] = np.arange(1, scores.shape[1] + 1)[None, :]
    return ranks


def _key(value: float) -> float:
    return value if value == value else float("-inf")
