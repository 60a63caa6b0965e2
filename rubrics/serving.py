"""The serving rubric: the original design's seven reward components, each a pure function of an
`EpisodeRecord`, and their weighted sum.

Penalties are returned as negative numbers, so the reward is the plain weighted sum
`sum(weight * component)`. The original design's formulas are used as written; where it left a
choice open
the docstring says what was chosen:

- failures, throughput and latency cover the agent turns and the agent-free drain that ends
  every episode (a departure: the seed stops at the last turn, so a last-turn dump was free);
  headroom covers the agent turns only;
- throughput is normalised by what an unconstrained engine generates over the same turns and
  drain (the record's `reference_tokens + reference_drain_tokens`), not by the original design's
  fixed 500 tokens;
- memory_efficiency (unspecified in the seed; redefined in suite v2) is the quality-weighted
  tokens produced per block-step held over the turns, relative to an *ideal* server on the same
  schedule that holds only the KV read in each step, at int4 (the record's
  `reference_ideal_block_steps`), capped at 1. Idle KV (paused sessions, stalled or uncompressed
  sequences) lowers it, and so do lost tokens, so no simple rule reaches 1;
- eviction_quality is the original design's block-type-weighted value of what is in the cache at the
last
  agent turn (paused sessions' KV included); an empty cache scores 0;
- risky_eviction_penalty uses the original design's three rules with progress = generated / target
output
  tokens, and is capped at 1 like the original design's other penalties.
Engine-forced preemptions count as evictions in the last two, because keeping room is the
agent's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kv_cache_env.sim.record import EpisodeRecord
from kv_cache_env.sim.vocabulary import EVICTION_VALUE, BlockType

from .weights import RubricWeights

ComponentFn = Callable[[EpisodeRecord], float]


def failure_penalty(record: EpisodeRecord) -> float:
    """Accelerating cost of failed requests: 0.15 for each of the first two, 0.25 after;
    1 failure = -0.15, 3 = -0.55, 5 or more = -1.0."""
    f = record.total_failures
    return -min(f * 0.15 + max(0, f - 2) * 0.1, 1.0)


def throughput_reward(record: EpisodeRecord) -> float:
    """Quality-weighted tokens generated over the turns and the drain / tokens an unconstrained
    engine generates over the same, capped at 1."""
    ours = sum(record.effective_tokens) + record.drain_effective_tokens
    ceiling = record.reference_tokens + record.reference_drain_tokens
    return min(ours / max(ceiling, 1), 1.0)


def headroom_bonus(record: EpisodeRecord) -> float:
    """Mean per-turn headroom score x 0.4: usage < 0.8 -> 1.0, < 0.95 -> 0.5, < 1.0 -> 0.2,
    full -> -0.5. Range [-0.2, 0.4]."""
    usage = record.usage
    if not usage:
        return 0.0
    return sum(_headroom(u) for u in usage) / len(usage) * 0.4


def _headroom(usage: float) -> float:
    if usage < 0.8:
        return 1.0
    if usage < 0.95:
        return 0.5
    if usage < 1.0:
        return 0.2
    return -0.5


def memory_efficiency(record: EpisodeRecord) -> float:
    """(quality-weighted tokens per block-step held over the turns) / (the ideal server's: the
    reference tokens per block-step of only the KV read each step, at int4), capped at 1."""
    held = sum(record.used_blocks)
    if held == 0 or record.reference_tokens == 0 or record.reference_ideal_block_steps <= 0:
        return 0.0
    ours = sum(record.effective_tokens) / held
    ideal = record.reference_tokens / record.reference_ideal_block_steps
    return min(ours / ideal, 1.0)


def eviction_quality(record: EpisodeRecord) -> float:
    """Value-weighted share of the final cache: sum((1 - eviction_value) x blocks) / blocks,
    in [0, 1]. High when what is left is system/context, low when it is reasoning/ephemeral."""
    total = sum(r.blocks for r in record.residents)
    if total <= 0:
        return 0.0
    kept = sum((1.0 - EVICTION_VALUE[r.block_type]) * r.blocks for r in record.residents)
    return kept / total


def latency_penalty(record: EpisodeRecord) -> float:
    """-min(total swap-in latency in seconds x 0.2, 0.3)."""
    return -min(record.swap_latency_s * 0.2, 0.3)


def risky_eviction_penalty(record: EpisodeRecord) -> float:
    """Per eviction: system +0.3; context with priority >= 0.5 +0.15; generation with priority
    >= 0.7 and progress >= 0.7 +0.2. Negated, capped at 1."""
    penalty = 0.0
    for e in record.evictions:
        if e.block_type is BlockType.SYSTEM:
            penalty += 0.3
        elif e.block_type is BlockType.CONTEXT and e.priority >= 0.5:
            penalty += 0.15
        elif e.block_type is BlockType.GENERATION and e.priority >= 0.7 and e.progress >= 0.7:
            penalty += 0.2
    return -min(penalty, 1.0)


COMPONENTS: dict[str, ComponentFn] = {
    "failure_penalty": failure_penalty,
    "throughput_reward": throughput_reward,
    "headroom_bonus": headroom_bonus,
    "memory_efficiency": memory_efficiency,
    "eviction_quality": eviction_quality,
    "latency_penalty": latency_penalty,
    "risky_eviction_penalty": risky_eviction_penalty,
}

_NAMES = tuple(COMPONENTS)

_SEED_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "failure_penalty": 0.40,
        "throughput_reward": 0.25,
        "headroom_bonus": 0.18,
        "memory_efficiency": 0.07,
        "eviction_quality": 0.05,
        "latency_penalty": 0.03,
        "risky_eviction_penalty": 0.02,
    }
)
"""The original design's weights: the suite's, and the only ones the shipped reference table answers
for."""


class Weights(RubricWeights):
    """The serving rubric's weights: `Weights()` is the suite's (`DEFAULT_WEIGHTS`),
    `Weights({"latency_penalty": 3.0})` overrides some (checked here, once: `RubricWeights`).
    The one value `kvarena eval --weights`, the Gymnasium envs' `weights=` and the verifiers
    taskset's reward weights become, and what the rubric (`score`) and the planners that search
    by it (`bound`, `expert`, `lookahead`) are given."""

    __slots__ = ()
    COMPONENTS = _NAMES
    DEFAULTS = _SEED_WEIGHTS
    NOUN = "rubric component"


DEFAULT_WEIGHTS = Weights()
"""The suite's weights (the original design's)."""


@dataclass(frozen=True)
class Score:
    components: dict[str, float]
    weights: Weights
    reward: float


def weighted_reward(components: Mapping[str, float], weights: Mapping[str, float]) -> float:
    return sum(weights[name] * components[name] for name in COMPONENTS)


def score(record: EpisodeRecord, weights: Weights) -> Score:
    """The components of `record` and their sum under `weights` (no default: whoever scores
    says under which weights, so a planner cannot search under other weights than its run's)."""
    if not isinstance(weights, Weights):
        raise TypeError(f"score() takes rubrics.Weights, not {type(weights).__name__}")
    components = {name: fn(record) for name, fn in COMPONENTS.items()}
    return Score(components, weights, weighted_reward(components, weights))
