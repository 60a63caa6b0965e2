"""`kvarena validate --out DIR`: the serving checks' finished episodes kept on disk, so that a
stopped run continues with `--resume` (the mechanism: `common.job_store`).

`DIR/run.json` holds the run's sizes (seeds per part, the proof block's start) and the digest of
the code every episode depends on (`reference_table.episode_digest`). `DIR/episodes.jsonl` holds
one line per finished job: its kind and its `EpisodeResult`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..common.job_store import JobStore as _JobStore
from .reference_table import episode_digest
from .validate_results import EpisodeResult

StoreKey = tuple[str, str, str, int]
"""(kind, agent label, scenario, seed): a job's identity."""


class JobStore(_JobStore[StoreKey, EpisodeResult]):
    """The finished episodes of one serving validation run (module doc)."""

    def __init__(self, path: Path, identity: dict[str, Any], *, resume: bool) -> None:
        super().__init__(path, {**identity, "code": episode_digest()}, resume=resume)

    def encode(self, key: StoreKey, result: EpisodeResult) -> dict[str, Any]:
        return {"kind": key[0], "result": result.to_dict()}

    def decode(self, line: dict[str, Any]) -> tuple[StoreKey, EpisodeResult]:
        result = EpisodeResult.from_dict(line["result"])
        return (str(line["kind"]), result.agent, result.scenario, result.seed), result

    def add(self, kind: str, result: EpisodeResult) -> None:
        self.keep((kind, result.agent, result.scenario, result.seed), result)


__all__ = ["JobStore", "StoreKey"]
