"""`kvarena validate --out DIR`: the finished episodes of a validation kept on disk, so that a
stopped run (Ctrl-C, a kill, a full day's proof run cut short) continues with `--resume`.

`DIR/run.json` says what the run is: its sizes (seeds per part, the proof block's start) and the
digest of the code every episode depends on (`reference_table.episode_digest`); a resume with
other sizes or other code is refused, naming what differs (episodes of two codes never mix).
`DIR/episodes.jsonl` holds one line per finished job (its kind, and its `EpisodeResult`),
appended and fsynced as each finishes (`durable.LineLog`); a line cut by a kill is skipped and
its job played again. `DIR/checks.json` holds the checks when the run ends.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kv_cache_env.bounded_read import RESULTS_LIMITS, SMALL_JSON_LIMITS, iter_line_bytes, read_json

from ..common.checks import Check
from ..common.durable import LineLog, write_atomic
from ..common.edge import InputError
from ..common.results import dumps
from .reference_table import episode_digest
from .validate_results import EpisodeResult

StoreKey = tuple[str, str, str, int]
"""(kind, agent label, scenario, seed): a job's identity."""


class JobStore:
    """The finished episodes of one validation run (module doc)."""

    def __init__(self, path: Path, identity: dict[str, Any], *, resume: bool) -> None:
        self.path = path
        self.done: dict[StoreKey, EpisodeResult] = {}
        self.skipped_lines = 0
        run_file, episodes = path / "run.json", path / "episodes.jsonl"
        identity = {**identity, "code": episode_digest()}
        if run_file.exists() or episodes.exists():
            if not resume:
                raise InputError(
                    f"{path} already holds a validation run: add --resume to continue it, or "
                    "choose another --out"
                )
            kept = read_json(run_file, SMALL_JSON_LIMITS)
            differ = sorted(k for k in {*identity, *kept} if kept.get(k) != identity.get(k))
            if differ:
                what = "; ".join(f"{k}: {kept.get(k)} there, {identity.get(k)} now" for k in differ)
                raise InputError(f"cannot resume {path}: its run differs ({what})")
            self._load(episodes)
        else:
            path.mkdir(parents=True, exist_ok=True)
            write_atomic(run_file, json.dumps(identity, indent=1) + "\n")
        self._log = LineLog(episodes)

    def _load(self, episodes: Path) -> None:
        if not episodes.exists():
            return
        for _, raw in iter_line_bytes(episodes, RESULTS_LIMITS):
            try:
                line = json.loads(raw)
                result = EpisodeResult.from_dict(line["result"])
                key = (str(line["kind"]), result.agent, result.scenario, result.seed)
            except (ValueError, KeyError, TypeError):
                self.skipped_lines += 1  # a line cut by a kill: its job is played again
                continue
            self.done[key] = result

    def get(self, key: StoreKey) -> EpisodeResult | None:
        return self.done.get(key)

    def add(self, kind: str, result: EpisodeResult) -> None:
        key = (kind, result.agent, result.scenario, result.seed)
        self.done[key] = result
        self._log.append(dumps({"kind": kind, "result": result.to_dict()}))

    def write_checks(self, checks: list[Check]) -> Path:
        out = self.path / "checks.json"
        write_atomic(out, json.dumps([asdict(c) for c in checks], indent=1) + "\n")
        return out

    def close(self) -> None:
        self._log.close()


__all__ = ["JobStore", "StoreKey"]
