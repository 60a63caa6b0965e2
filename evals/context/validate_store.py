"""`kvarena validate --out DIR`: the context checks' finished episodes kept in `DIR/context`, so
that a stopped run continues with `--resume` (the mechanism: `common.job_store`).

`run.json` holds the run's sizes (episodes per level, the block's first seed, the probe's
training episodes), the suite's version and the digest of the code every episode depends on
(`context_digest`). `episodes.jsonl` holds one line per finished job: the job (agent, reader,
level, seed) and its result line (`common.context_results`). The probe is trained again on a
resume (its training is deterministic); only played episodes are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kv_context_env import CONTEXT_SUITE_VERSION

from ..common.job_store import JobStore, code_digest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "environments/kv_context_env/**/*.py",
    "environments/kv_context_env/generator/data/*",
    "rubrics/context.py",
    "rubrics/metrics.py",
    "evals/common/context_results.py",
    "evals/context/*.py",
)
"""What a context validation episode depends on: the family's package (generator, lexicon,
simulator, policies, readers), its rubric, its result line and the validate code."""

ContextKey = tuple[str, str, str, int]
"""(agent, reader, level, seed): a job's identity (`validate.ContextJob.key`)."""


def context_digest() -> str:
    """sha256 (16 hex digits) of the code of every file in `SOURCES`."""
    return code_digest(ROOT, (p for pattern in SOURCES for p in ROOT.glob(pattern)))


class ContextJobStore(JobStore[ContextKey, dict[str, Any]]):
    """The finished episodes of one context validation run (module doc)."""

    def __init__(self, path: Path, identity: dict[str, Any], *, resume: bool) -> None:
        identity = {**identity, "suite_version": CONTEXT_SUITE_VERSION, "code": context_digest()}
        super().__init__(path, identity, resume=resume)

    def encode(self, key: ContextKey, result: dict[str, Any]) -> dict[str, Any]:
        return {"job": list(key), "result": result}

    def decode(self, line: dict[str, Any]) -> tuple[ContextKey, dict[str, Any]]:
        agent, reader, level, seed = line["job"]
        result = line["result"]
        key = (str(agent), str(reader), str(level), int(seed))
        if not isinstance(result, dict):
            raise TypeError("a result is a JSON object")
        if (result["agent"], result["reader"], result["level"], result["seed"]) != key:
            raise ValueError(f"a result that is not job {key}'s")
        return key, result


__all__ = ["ContextJobStore", "ContextKey", "context_digest"]
