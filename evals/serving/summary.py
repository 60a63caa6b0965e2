"""Aggregate results (`results.jsonl` objects) into per agent x scenario rows with 95% CIs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kv_cache_env.sim import ACTIONS
from rubrics.metrics import TOOL_COUNTERS

from ..common.stats import mean_ci


def _plural(name: str) -> str:
    """A tool's column: how many calls of it ("evicts", "compresses", "swaps")."""
    return f"{name}es" if name.endswith(("s", "sh", "ch", "x")) else f"{name}s"


_TOOLS = tuple(tool for tool in ACTIONS.targeted if tool.counter in TOOL_COUNTERS)
"""The tools that take a sequence and whose calls the record counts: a column each."""

# The columns of the results tables: (header, where the value lives, key). `kvarena eval`
# shows DEFAULT_COLUMNS, in order of priority (the first always, the others as the terminal's
# width allows); `--wide` shows them all.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("reward", "", "reward"),
    ("failures", "metrics", "failures"),
    ("calls/turn", "metrics", "tool_calls_per_turn"),
    ("pressure", "metrics", "pressure_steps"),
    *((_plural(tool.name), "metrics", tool.counter) for tool in _TOOLS),
    ("invalid", "metrics", "invalid_calls"),
    ("failure", "components", "failure_penalty"),
    ("throughput", "components", "throughput_reward"),
    ("headroom", "components", "headroom_bonus"),
    ("memory", "components", "memory_efficiency"),
    ("eviction q.", "components", "eviction_quality"),
    ("latency", "components", "latency_penalty"),
    ("risky", "components", "risky_eviction_penalty"),
    # the serving metrics (`rubrics.metrics.SERVING_METRIC_NAMES`), over the episodes that have
    # them: results written before they were kept show "-"
    ("SLO", "metrics", "slo_attainment"),
    ("goodput/s", "metrics", "goodput_rps"),
    ("TTFT p95 s", "metrics", "first_token_p95_s"),
    ("resumed p95 s", "metrics", "resumed_first_token_p95_s"),
    ("TBT p95 s", "metrics", "token_gap_p95_s"),
    ("offload GB", "metrics", "offloaded_bytes"),
    ("load GB", "metrics", "loaded_bytes"),
    ("recompute", "metrics", "recompute_tokens"),
)
DEFAULT_COLUMNS: tuple[str, ...] = ("reward", "failures", "calls/turn")


@dataclass(frozen=True)
class Row:
    scenario: str
    agent: str
    episodes: int
    failed: int
    values: dict[str, tuple[float, float]]
    """Column header -> (mean, 95% half-width) over the ok episodes."""


_SCALE = {"offloaded_bytes": 1e-9, "loaded_bytes": 1e-9}
"""Columns shown in other units than their metric's (bytes as GB)."""


def value(result: Mapping[str, Any], where: str, key: str) -> float | None:
    """The column's value in `result` (None where it has none: a serving metric without a
    value, or a result written before it was kept)."""
    raw = result[key] if not where else result[where].get(key)
    return None if raw is None else float(raw) * _SCALE.get(key, 1.0)


def group_results(
    results: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Results by (scenario, agent), in first-seen order."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for result in results:
        groups.setdefault((result["scenario"], result["agent"]), []).append(result)
    return groups


def summarize(results: Iterable[Mapping[str, Any]]) -> list[Row]:
    rows = []
    for (scenario, agent), group in group_results(results).items():
        ok = [r for r in group if r["status"] == "ok"]
        values = {
            header: mean_ci([v for r in ok if (v := value(r, where, key)) is not None])
            for header, where, key in COLUMNS
        }
        rows.append(Row(scenario, agent, len(group), len(group) - len(ok), values))
    return rows
