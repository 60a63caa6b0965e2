"""Episode metrics (not rewards): seed 003's results-table columns and a few more, each a pure
function of an `EpisodeRecord`."""

from __future__ import annotations

from kv_cache_env.sim.actions import ACTIONS
from kv_cache_env.sim.record import RECORD_FIELDS, EpisodeRecord

PRESSURE_USAGE = 0.95

TOOL_COUNTERS: tuple[str, ...] = tuple(
    tool.counter for tool in ACTIONS if tool.counter in RECORD_FIELDS
)
"""Each tool's count of valid calls (`AgentTool.counter`), in the action table's order."""

METRIC_NAMES: tuple[str, ...] = (
    "failures",
    "pressure_steps",
    "tool_calls_per_turn",
    *TOOL_COUNTERS,
    "invalid_calls",
    "tokens_generated",
    "forced_preemptions",
    "prefix_hit_rate",
    "drain_failures",
    "paused_discards",
)


def pressure_steps(record: EpisodeRecord) -> int:
    """Turns with usage >= 0.95, a forced preemption, or a failure."""
    return sum(
        1
        for usage, forced, failed in zip(
            record.usage, record.forced_preemptions, record.failures, strict=True
        )
        if usage >= PRESSURE_USAGE or forced or failed
    )


def episode_metrics(record: EpisodeRecord) -> dict[str, float | int]:
    turns = max(record.turns, 1)
    lookups = record.prefix_lookup_blocks
    return {
        "failures": record.total_failures,
        "pressure_steps": pressure_steps(record),
        "tool_calls_per_turn": sum(record.calls_per_turn) / turns,
        **{counter: getattr(record, counter) for counter in TOOL_COUNTERS},
        "invalid_calls": record.invalid_calls,
        "tokens_generated": record.tokens_generated,
        "forced_preemptions": sum(record.forced_preemptions),
        "prefix_hit_rate": record.prefix_hit_blocks / lookups if lookups else 0.0,
        "drain_failures": record.drain_failures,
        "paused_discards": record.paused_evictions,
    }
