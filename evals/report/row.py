"""One row of the serving leaderboard: an agent on a scenario, over its episodes (built by
`build.leaderboard`, drawn by `figures`, shown by `build`'s tables)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    scenario: str
    agent: str
    episodes: int
    failed: int
    reward: tuple[float, float]
    """(mean, 95% half-width) over ok episodes."""
    components: dict[str, float]
    metrics: dict[str, float]
    gap: float | None
    """Mean reward of the bound minus this agent's, on the same scenario (None: not run)."""
    usage: list[float]
    """Mean memory usage per turn."""
    normalized: float | None = None
    """(agent - noop) / (bound - noop) on paired seeds (None: no range, or not run)."""
    to_bound: tuple[float, float] | None = None
    """Paired bound - agent, (mean, 95% half-width)."""
    cost: float | None = None
    """Mean input dollars per episode from the recorded model usage (`build_report` with
    prices; None for policies or without prices)."""

    @property
    def ok(self) -> bool:
        """At least one episode ran to the end."""
        return self.episodes > self.failed
