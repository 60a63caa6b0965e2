"""The context family's results schema: one JSON object per episode, written one per line to
`results.jsonl` by `kvarena context-eval` (and `validate --family context`'s runs), with the
same canonical line as the serving family's (`results.dumps`). This module writes the object
(`context_result`) and checks one read back (`validate_context`); the serving family's schema
is `results`. `result_check.family_of` tells the two apart by the fields only one of them has:
a context line has `level` and `reader`, and no `schema_version` or `scenario`.

    suite_version   str     the context suite of the episode (`CONTEXT_SUITE_VERSION`)
    agent           str     context policy name, or model name for an LLM agent
    reader          str     who answered the questions: "extractive", "hf:PATH", a model name
    level           str     the level played (`kv_context_env.generator.levels`)
    seed            int
    status          "ok" | "failed"   (a failed episode is recorded, never dropped)
    error           str | null
    reward          float | null      weighted sum of the components; null when failed
    components      {component: value} (`rubrics.context.CONTEXT_COMPONENTS`; null when failed)
    metrics         {name: value}      (`rubrics.context.CONTEXT_METRIC_NAMES`; null when failed)
    record          the full `ContextRecord` (`as_dict`); null when failed
    usage           (LLM agents only: absent for policies) model tokens, as in the serving
                    schema's `usage`

Unlike a serving line, a context line has no `schema_version` (the suite version is its only
version), no `weights` (the run's `--weights` are in its `run.json`, so a reader cannot re-derive
the reward from the components) and no per-turn `series`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kv_context_env import CONTEXT_SUITE_VERSION
from kv_context_env.sim.episode import ContextRecord
from rubrics.context import (
    CONTEXT_COMPONENTS,
    CONTEXT_METRIC_NAMES,
    CONTEXT_WEIGHTS,
    ContextWeights,
    context_metrics,
    context_score,
)

from .results import OPTIONAL_USAGE_FIELDS, USAGE_FIELDS, status_problems

CONTEXT_FIELDS: tuple[str, ...] = (
    "suite_version",
    "agent",
    "reader",
    "level",
    "seed",
    "status",
    "error",
    "reward",
    "components",
    "metrics",
    "record",
)
"""Every context line has these; `usage` is added for LLM agents."""


def context_result(
    *,
    agent: str,
    reader: str,
    level: str,
    seed: int,
    record: ContextRecord | None,
    error: str | None = None,
    weights: ContextWeights = CONTEXT_WEIGHTS,
) -> dict[str, Any]:
    """The result object of one episode, scored under `weights` (the run's); `record=None`
    (with an `error`) marks a failed one."""
    result: dict[str, Any] = {
        "suite_version": CONTEXT_SUITE_VERSION,
        "agent": agent,
        "reader": reader,
        "level": level,
        "seed": seed,
        "status": "failed",
        "error": error,
        "reward": None,
        "components": None,
        "metrics": None,
        "record": None,
    }
    if record is None:
        return result
    components, reward = context_score(record, weights)
    result.update(
        status="ok",
        error=None,
        reward=reward,
        components=components,
        metrics=context_metrics(record),
        record=record.as_dict(),
    )
    return result


def validate_context(result: Mapping[str, Any]) -> list[str]:
    """Problems with a context result object (empty when it conforms); like
    `results.validate`, it assumes the types are right (`result_check` checks them first).
    The components and metrics are checked against this suite's rubric only: a line of
    another context suite is refused by its version where results are read together."""
    problems = [f"missing field {name!r}" for name in CONTEXT_FIELDS if name not in result]
    if problems:
        return problems
    if result["status"] != "ok":
        return problems + status_problems(result)
    if str(result["suite_version"]) != CONTEXT_SUITE_VERSION:
        return problems
    if set(result["components"]) != set(CONTEXT_COMPONENTS):
        problems.append(f"components must be exactly {sorted(CONTEXT_COMPONENTS)}")
    if set(result["metrics"]) != set(CONTEXT_METRIC_NAMES):
        problems.append(f"metrics must be exactly {sorted(CONTEXT_METRIC_NAMES)}")
    usage = result.get("usage")
    if usage is not None and not (
        set(USAGE_FIELDS) - OPTIONAL_USAGE_FIELDS <= set(usage) <= set(USAGE_FIELDS)
    ):
        problems.append(f"usage must hold {list(USAGE_FIELDS)}")
    return problems
