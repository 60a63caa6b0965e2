"""The context rubric: three named components of a `ContextRecord` and their weighted sum.
Penalties are negative numbers, so the reward is `sum(weight * component)`.

- answer_quality: mean answer score over the questions (`values.VERDICT_SCORES`: the right
  value 1, "I don't know" or no value 0, a wrong value -0.25); 0 when the episode asked
  nothing. A stated departure from the block-masking design, which scores answers by ROUGE-L:
  ROUGE-L pays an echo of the question and a stale value most of the credit. ROUGE-L stays as
  a metric.
- oom_penalty: minus the fraction of turns on which the engine had to evict by itself because
  active blocks exceeded `MAX_BLOCKS` (an OOM), in [-1, 0].
- recall_cost: minus the latency recalls added, in time-to-first-token budgets per question,
  uncapped: `sum(recall_latency_s) / (RECALL_SLO_S * questions)`. One recall's latency is
  `RECALL_SEARCH_S + tokens_returned / RECALL_PREFILL_TOKENS_PER_S` (`episode.recall_latency_s`:
  0.1 s of search, then the returned tokens prefilled at 4096 tokens/s), so a recall costs what
  it brings back: a 200-token turn 0.15 s, 0.74 of one 0.2 s budget. A recall that spends a
  whole budget costs as much as one right answer earns. The recalled blocks themselves count
  against the cache budget like any others (an OOM if they do not fit).

There is no memory-saving term (suite 3): the facts still to be asked need more blocks than the
budget, so a block left empty is a block a needed fact could have used. The OOM term weighs
0.05 (it was 0.15): what a forced eviction loses is already counted in the answers it costs,
and at 0.15 a policy that does exactly what the engine does, only before it (`trt-lru`), closed
a quarter of the noop → oracle range without any judgment (12% at 0.05).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from kv_context_env.sim.episode import ContextRecord

from .weights import RubricWeights

RECALL_SLO_S = 0.2
"""Time-to-first-token objective of a chat answer, against which recall latency is priced
(200 ms: the chat-application TTFT target in vLLM's guidellm documentation)."""

ComponentFn = Callable[[ContextRecord], float]


def answer_quality(record: ContextRecord) -> float:
    if not record.questions:
        return 0.0
    return sum(q.score for q in record.questions) / len(record.questions)


def oom_penalty(record: ContextRecord) -> float:
    return -min(1.0, record.oom_events / max(1, record.turns))


def recall_cost(record: ContextRecord) -> float:
    return -record.recall_latency_s / (RECALL_SLO_S * max(1, len(record.questions)))


CONTEXT_COMPONENTS: Mapping[str, ComponentFn] = {
    "answer_quality": answer_quality,
    "oom_penalty": oom_penalty,
    "recall_cost": recall_cost,
}


class ContextWeights(RubricWeights):
    """The context rubric's weights (`kvarena context-eval --weights`), checked as the serving
    rubric's are (`RubricWeights`: known components, finite numbers, |w| <= 10^6)."""

    __slots__ = ()
    COMPONENTS = tuple(CONTEXT_COMPONENTS)
    DEFAULTS = MappingProxyType({"answer_quality": 1.0, "oom_penalty": 0.05, "recall_cost": 1.0})
    NOUN = "context component"


CONTEXT_WEIGHTS = ContextWeights()
"""The context suite's weights."""


def context_score(
    record: ContextRecord, weights: ContextWeights = CONTEXT_WEIGHTS
) -> tuple[dict[str, float], float]:
    """(components, reward) under `weights` (the suite's by default: the context family has no
    planner that searches by its rubric)."""
    if not isinstance(weights, ContextWeights):
        raise TypeError(f"context_score() takes ContextWeights, not {type(weights).__name__}")
    components = {name: fn(record) for name, fn in CONTEXT_COMPONENTS.items()}
    return components, sum(weights[name] * value for name, value in components.items())


CONTEXT_METRIC_NAMES: tuple[str, ...] = (
    "rouge_l",
    "value_accuracy",
    "wrong_values",
    "facts_visible",
    "oom_events",
    "mean_active_blocks",
    "max_active_blocks",
    "recalls",
    "recall_latency_s",
    "archived_turns",
    "invalid_actions",
)
"""The names `context_metrics` returns, in its order (a result's `metrics` holds exactly
these)."""


def context_metrics(record: ContextRecord) -> dict[str, float]:
    """What results show beside the reward: answer quality, OOM events, blocks, recalls
    (`CONTEXT_METRIC_NAMES`)."""
    questions = record.questions
    return {
        "rouge_l": sum(q.rouge_l for q in questions) / len(questions) if questions else 0.0,
        "value_accuracy": (
            sum(q.value_correct for q in questions) / len(questions) if questions else 0.0
        ),
        "wrong_values": (
            sum(q.verdict == "wrong" for q in questions) / len(questions) if questions else 0.0
        ),
        "facts_visible": (
            sum(q.fact_visible for q in questions) / len(questions) if questions else 0.0
        ),
        "oom_events": float(record.oom_events),
        "mean_active_blocks": (
            sum(record.active_blocks) / len(record.active_blocks) if record.active_blocks else 0.0
        ),
        "max_active_blocks": float(max(record.active_blocks, default=0)),
        "recalls": float(record.recalls),
        "recall_latency_s": record.recall_latency_s,
        "archived_turns": float(record.archived_turns),
        "invalid_actions": float(record.invalid_actions),
    }
