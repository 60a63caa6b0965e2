"""The results schema: one JSON object per episode, written one per line to `results.jsonl`.

Every writer (policy runs, hosted-model runs, verifiers traces converted) produces exactly this
shape, so one table holds policies and models alike. No wall-clock field is part of it: equal
arguments give byte-identical files (`dumps` sorts keys and fixes separators).

    schema_version  int     SCHEMA_VERSION (4: the serving metrics; 3: serving suite v3 - a
                            drain with no clock edge). Both are read: a version-3 line lacks the
                            serving metrics and its record the `serving` part
    suite_version   str     the serving suite of the episode (`kv_cache_env.sim.SUITE_VERSION`)
    agent           str     policy name, or model name for LLM runs
    scenario        str
    seed            int
    status          "ok" | "failed"   (a failed rollout is recorded, never dropped)
    error           str | null
    reward          float | null      weighted sum of the components; null when failed
    weights         {component: weight}
    components      {component: value} (the seven rubric components; null when failed)
    metrics         {name: value}      (METRIC_NAMES; null when failed; a serving metric, one of
                                        SERVING_METRIC_NAMES, is null where it has no value)
    series          {"usage": [...], "queue": [...], "failures": [...]} per turn (null when failed)
    usage           {"input_tokens" (all prompt tokens), "cached_input_tokens" (read from the
                    provider's cache), "output_tokens", "cache_write_input_tokens"} | null
                    (policies)
    record          the full episode record (re-scorable with other weights); null when failed
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kv_cache_env.sim import SUITE_VERSION, EpisodeRecord
from rubrics import COMPONENTS, DEFAULT_WEIGHTS, METRIC_NAMES, Weights, episode_metrics, score
from rubrics.metrics import BASE_METRIC_NAMES, SERVING_METRIC_NAMES

SCHEMA_VERSION = 4
READ_VERSIONS: Mapping[int, tuple[str, ...]] = MappingProxyType(
    {3: BASE_METRIC_NAMES, SCHEMA_VERSION: METRIC_NAMES}
)
"""The schema versions read, each with the metrics its lines hold (version 3's lack the serving
metrics: a reader shows them blank)."""

USAGE_FIELDS: tuple[str, ...] = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "cache_write_input_tokens",
)
OPTIONAL_USAGE_FIELDS = frozenset({"cache_write_input_tokens"})
"""Added after version 1's first files: results written before it lack this field."""
FIELDS: tuple[str, ...] = (
    "schema_version",
    "suite_version",
    "agent",
    "scenario",
    "seed",
    "status",
    "error",
    "reward",
    "weights",
    "components",
    "metrics",
    "series",
    "usage",
    "record",
)


def episode_result(
    *,
    agent: str,
    scenario: str,
    seed: int,
    record: EpisodeRecord | None,
    error: str | None = None,
    usage: Mapping[str, int] | None = None,
    weights: Weights = DEFAULT_WEIGHTS,
) -> dict[str, Any]:
    """The result object of one episode, scored under `weights` (the run's); `record=None`
    (with an `error`) marks a failed one."""
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "suite_version": SUITE_VERSION,
        "agent": agent,
        "scenario": scenario,
        "seed": seed,
        "status": "failed",
        "error": error,
        "reward": None,
        "weights": dict(weights),
        "components": None,
        "metrics": None,
        "series": None,
        "usage": dict(usage) if usage is not None else None,
        "record": None,
    }
    if record is None:
        if not error:
            raise ValueError("a failed episode needs an error message")
        return result
    scored = score(record, weights)
    result.update(
        status="ok",
        reward=scored.reward,
        components=scored.components,
        metrics=episode_metrics(record),
        series={
            "usage": list(record.usage),
            "queue": list(record.queue),
            "failures": list(record.failures),
        },
        record=record.to_dict(),
    )
    return result


def dumps(result: Mapping[str, Any]) -> str:
    """One canonical JSON line (sorted keys, fixed separators)."""
    return json.dumps(result, sort_keys=True, separators=(",", ":"), allow_nan=False)


def status_problems(result: Mapping[str, Any]) -> list[str]:
    """Problems of a line whose status is not "ok" (either family's schema): an unknown status
    (nothing else can be checked: which fields may be null depends on it), or a failed episode
    without its error or with a reward."""
    if result["status"] != "failed":
        return [f"status must be 'ok' or 'failed', got {result['status']!r}"]
    problems = []
    if not result["error"]:
        problems.append("a failed episode needs an error")
    if result["reward"] is not None:
        problems.append("a failed episode has no reward")
    return problems


def validate(result: Mapping[str, Any]) -> list[str]:
    """Problems with a result object (empty when it conforms)."""
    problems = [f"missing field {name!r}" for name in FIELDS if name not in result]
    if problems:
        return problems
    version = result["schema_version"]
    names = READ_VERSIONS.get(version)
    if names is None:
        known = " or ".join(map(str, READ_VERSIONS))
        problems.append(f"schema_version {version!r} is not {known}")
    if result["status"] != "ok":
        return problems + status_problems(result)
    if set(result["components"]) != set(COMPONENTS):
        problems.append(f"components must be exactly {sorted(COMPONENTS)}")
    elif (
        abs(
            sum(result["weights"][k] * result["components"][k] for k in COMPONENTS)
            - result["reward"]
        )
        > 1e-9
    ):
        problems.append("reward is not the weighted sum of the components")
    if names is not None and set(result["metrics"]) != set(names):
        problems.append(f"metrics must be exactly {sorted(names)}")
    blank = sorted(k for k, v in result["metrics"].items() if v is None)
    if set(blank) - set(SERVING_METRIC_NAMES):
        problems.append(f"only serving metrics may be null, not {', '.join(blank)}")
    if set(result["series"]) != {"usage", "queue", "failures"}:
        problems.append("series must hold usage, queue and failures")
    usage = result["usage"]
    if usage is not None and not (
        set(USAGE_FIELDS) - OPTIONAL_USAGE_FIELDS <= set(usage) <= set(USAGE_FIELDS)
    ):
        problems.append(f"usage must hold {list(USAGE_FIELDS)}")
    return problems


def rescore(result: Mapping[str, Any], weights: Weights = DEFAULT_WEIGHTS) -> float | None:
    """Recompute an ok result's reward from its stored record under `weights`."""
    if result["status"] != "ok":
        return None
    return score(EpisodeRecord.from_dict(result["record"]), weights).reward
