"""Episode metrics (not rewards): the original design's results-table columns and a few more, and
the serving metrics in serving's own terms (first-token latency percentiles, time between tokens,
SLO attainment, goodput, host-link traffic, recompute), each a pure function of an
`EpisodeRecord`.

A serving metric is None where it has no value: a percentile of no samples (an episode with no
resumed call has no resumed first-token latency), or a record written before the serving
record was kept (`EpisodeRecord.serving` is None). Percentiles are nearest-rank: the p-th
percentile of n values is the ceil(p/100 * n)-th smallest (a value that was observed).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from kv_cache_env.sim.actions import ACTIONS
from kv_cache_env.sim.record import RECORD_FIELDS, EpisodeRecord, ServingRecord

from .slo import Objectives, objectives_for

PRESSURE_USAGE = 0.95

TOOL_COUNTERS: tuple[str, ...] = tuple(
    tool.counter for tool in ACTIONS if tool.counter in RECORD_FIELDS
)
"""Each tool's count of valid calls (`AgentTool.counter`), in the action table's order."""

BASE_METRIC_NAMES: tuple[str, ...] = (
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
"""The metrics every result has (results schema 3 on)."""

SERVING_METRIC_NAMES: tuple[str, ...] = (
    "first_token_p50_s",
    "first_token_p95_s",
    "first_token_max_s",
    "resumed_first_token_p50_s",
    "resumed_first_token_p95_s",
    "resumed_first_token_max_s",
    "token_gap_p95_s",
    "slo_attainment",
    "goodput_rps",
    "offloaded_bytes",
    "loaded_bytes",
    "recompute_tokens",
)
"""The serving metrics (results schema 4 on), each None where it has no value."""

METRIC_NAMES: tuple[str, ...] = (*BASE_METRIC_NAMES, *SERVING_METRIC_NAMES)


def pressure_steps(record: EpisodeRecord) -> int:
    """Turns with usage >= 0.95, a forced preemption, or a failure."""
    return sum(
        1
        for usage, forced, failed in zip(
            record.usage, record.forced_preemptions, record.failures, strict=True
        )
        if usage >= PRESSURE_USAGE or forced or failed
    )


def percentile(values: Sequence[float], p: float) -> float | None:
    """The nearest-rank `p`-th percentile (0 < p <= 100) of `values` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)), 1) - 1]


def weighted_percentile(counts: Iterable[tuple[float, int]], p: float) -> float | None:
    """`percentile` of a multiset given as (value, how many) pairs (None when empty)."""
    pairs = sorted(counts)
    total = sum(n for _, n in pairs)
    if not total:
        return None
    rank = max(math.ceil(p / 100 * total), 1)
    seen = 0
    for value, n in pairs:
        seen += n
        if seen >= rank:
            return value
    raise AssertionError("a rank past the total")  # (rank <= total)


def slo_attainment(record: EpisodeRecord, objectives: Objectives | None = None) -> float | None:
    """Share of the requests the episode serves that complete within `objectives` (default:
    their scenario's, `slo.objectives_for`): every call's first token in time and a mean time
    per output token within the per-token objective. None without a serving record, or when
    the episode serves no request."""
    serving = record.serving
    if serving is None or not serving.requests:
        return None
    return _met(serving, objectives or objectives_for(record.scenario)) / serving.requests


def goodput(record: EpisodeRecord, objectives: Objectives | None = None) -> float | None:
    """Requests meeting `objectives` (default: their scenario's) per second of the episode's
    turns and drain."""
    serving = record.serving
    if serving is None:
        return None
    seconds = (record.turns + record.drain_steps) * serving.step_seconds
    met = _met(serving, objectives or objectives_for(record.scenario))
    return met / seconds if seconds else None


def _met(serving: ServingRecord, objectives: Objectives) -> int:
    # (a margin of a millionth of a step: waits are sums of step fractions)
    first = objectives.first_token_s / serving.step_seconds + 1e-9
    per_token = objectives.per_token_s / serving.step_seconds + 1e-9
    return sum(1 for wait, tpot in serving.completed if wait <= first and tpot <= per_token)


def serving_metrics(record: EpisodeRecord) -> dict[str, float | int | None]:
    """`SERVING_METRIC_NAMES` of `record` (all None without a serving record)."""
    serving = record.serving
    if serving is None:
        return dict.fromkeys(SERVING_METRIC_NAMES)
    step = serving.step_seconds

    def seconds(steps: float | None) -> float | None:
        return None if steps is None else steps * step

    first = serving.first_token_steps
    resumed = serving.resumed_first_token_steps
    return {
        "first_token_p50_s": seconds(percentile(first, 50)),
        "first_token_p95_s": seconds(percentile(first, 95)),
        "first_token_max_s": seconds(max(first, default=None)),
        "resumed_first_token_p50_s": seconds(percentile(resumed, 50)),
        "resumed_first_token_p95_s": seconds(percentile(resumed, 95)),
        "resumed_first_token_max_s": seconds(max(resumed, default=None)),
        "token_gap_p95_s": seconds(weighted_percentile(serving.token_gaps, 95)),
        "slo_attainment": slo_attainment(record),
        "goodput_rps": goodput(record),
        "offloaded_bytes": serving.offloaded_bytes,
        "loaded_bytes": serving.loaded_bytes,
        "recompute_tokens": serving.recompute_tokens,
    }


def valued_metrics(record: EpisodeRecord) -> dict[str, float | int]:
    """`episode_metrics` without those that have no value (for consumers of numbers only: the
    verifiers metrics, the Gymnasium `info`)."""
    return {k: v for k, v in episode_metrics(record).items() if v is not None}


def episode_metrics(record: EpisodeRecord) -> dict[str, float | int | None]:
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
        **serving_metrics(record),
    }
