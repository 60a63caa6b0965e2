"""The context rubric (seeds 000 + 001): four named components of a `ContextRecord` and their
weighted sum. Penalties are negative numbers, so the reward is `sum(weight * component)`.

- answer_quality: mean ROUGE-L F of the reader's answers against the answer key (seed 001's
  score of "did we evict the right blocks"); 0 when the episode asked nothing.
- oom_penalty: minus the fraction of turns on which the engine had to evict by itself because
  active blocks exceeded `MAX_BLOCKS` (seed 001's OOM), in [-1, 0].
- memory_saving: one minus the mean active blocks per turn over `MAX_BLOCKS` (seed 001's
  "virtual memory"), in [0, 1]: holding less than the budget is worth something, but far less
  than answering right.
- recall_cost: minus the recall calls per question, capped at 1: each recall is a search plus
  a prefill of the recalled blocks (latency); the blocks themselves already count in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kv_cache_env.context.episode import ContextRecord

ComponentFn = Callable[[ContextRecord], float]


def answer_quality(record: ContextRecord) -> float:
    if not record.questions:
        return 0.0
    return sum(q.rouge_l for q in record.questions) / len(record.questions)


def oom_penalty(record: ContextRecord) -> float:
    return -min(1.0, record.oom_events / max(1, record.turns))


def memory_saving(record: ContextRecord) -> float:
    if not record.active_blocks:
        return 0.0
    mean = sum(record.active_blocks) / len(record.active_blocks)
    return max(0.0, min(1.0, 1.0 - mean / record.max_blocks))


def recall_cost(record: ContextRecord) -> float:
    return -min(1.0, record.recalls / max(1, len(record.questions)))


CONTEXT_COMPONENTS: Mapping[str, ComponentFn] = {
    "answer_quality": answer_quality,
    "oom_penalty": oom_penalty,
    "memory_saving": memory_saving,
    "recall_cost": recall_cost,
}
CONTEXT_WEIGHTS: Mapping[str, float] = {
    "answer_quality": 1.0,
    "oom_penalty": 0.5,
    "memory_saving": 0.2,
    "recall_cost": 0.1,
}


def context_score(
    record: ContextRecord, weights: Mapping[str, float] | None = None
) -> tuple[dict[str, float], float]:
    """(components, reward). `weights` overrides some defaults; unknown names raise."""
    merged = dict(CONTEXT_WEIGHTS)
    for name, value in (weights or {}).items():
        if name not in CONTEXT_COMPONENTS:
            raise ValueError(
                f"unknown context component {name!r}; known: {', '.join(CONTEXT_COMPONENTS)}"
            )
        merged[name] = float(value)
    components = {name: fn(record) for name, fn in CONTEXT_COMPONENTS.items()}
    return components, sum(merged[name] * value for name, value in components.items())
