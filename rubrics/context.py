"""The context rubric (seeds 000 + 001, issue 16): four named components of a `ContextRecord`
and their weighted sum. Penalties are negative numbers, so the reward is
`sum(weight * component)`.

- answer_quality: mean answer score over the questions (`values.VERDICT_SCORES`: the right
  value 1, "I don't know" or no value 0, a wrong value -0.25); 0 when the episode asked
  nothing. A stated departure from seed 001, which scores answers by ROUGE-L: ROUGE-L pays an
  echo of the question ("your locker code is") and a stale value most of the credit. ROUGE-L
  stays as a metric.
- oom_penalty: minus the fraction of turns on which the engine had to evict by itself because
  active blocks exceeded `MAX_BLOCKS` (seed 001's OOM), in [-1, 0].
- memory_saving: blocks saved under the budget, measured against a lean oracle (the system
  prompt, the answer-bearing statements still to be asked and the newest message), capped at
  the lean oracle's saving, and scaled by the share of right answers: in [0, 1]. An empty
  cache saves nothing when it answers nothing.
- recall_cost: minus the latency recalls added, in time-to-first-token budgets per question,
  uncapped: `sum(recall_latency_s) / (RECALL_SLO_S * questions)`. One recall's latency is
  `RECALL_SEARCH_S + tokens_returned / RECALL_PREFILL_TOKENS_PER_S` (`episode.recall_latency_s`:
  0.1 s of search, then the returned tokens prefilled at 4096 tokens/s), so a recall costs what
  it brings back: a 200-token turn 0.15 s, 0.74 of one 0.2 s budget. A recall that spends a
  whole budget costs as much as one right answer earns. The recalled blocks themselves count
  against the cache budget like any others (an OOM if they do not fit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kv_cache_env.context.episode import ContextRecord

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


def memory_saving(record: ContextRecord) -> float:
    if not record.active_blocks or not record.questions:
        return 0.0
    mean = sum(record.active_blocks) / len(record.active_blocks)
    lean = sum(record.lean_blocks) / len(record.lean_blocks) if record.lean_blocks else 0.0
    room = record.max_blocks - min(lean, record.max_blocks - 1)
    saved = max(0.0, min(1.0, (record.max_blocks - mean) / room))
    right = sum(q.value_correct for q in record.questions) / len(record.questions)
    return saved * right


def recall_cost(record: ContextRecord) -> float:
    return -record.recall_latency_s / (RECALL_SLO_S * max(1, len(record.questions)))


CONTEXT_COMPONENTS: Mapping[str, ComponentFn] = {
    "answer_quality": answer_quality,
    "oom_penalty": oom_penalty,
    "memory_saving": memory_saving,
    "recall_cost": recall_cost,
}
CONTEXT_WEIGHTS: Mapping[str, float] = {
    "answer_quality": 1.0,
    "oom_penalty": 0.15,
    "memory_saving": 0.2,
    "recall_cost": 1.0,
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


def context_metrics(record: ContextRecord) -> dict[str, float]:
    """What results show beside the reward: answer quality, OOM events, blocks, recalls."""
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
