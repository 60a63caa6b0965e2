"""A run directory: `results.jsonl` written as episodes finish (so an interrupted run keeps what
it did), resumable, and rewritten in job order at the end (so reruns are byte-identical).

Resuming keeps every `ok` episode already in the file and runs the rest again, failed ones
included; the final file has exactly one line per job. A line cut short by a kill is ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .results import dumps

Key = tuple[str, str, int]


def result_key(result: dict[str, Any]) -> Key:
    return (str(result["scenario"]), str(result["agent"]), int(result["seed"]))


class RunDir:
    def __init__(self, path: Path, *, resume: bool = False) -> None:
        self.path = path
        self.results_path = path / "results.jsonl"
        self.transcripts = path / "transcripts"
        self.kept: dict[Key, dict[str, Any]] = {}
        self.skipped_lines = 0
        path.mkdir(parents=True, exist_ok=True)
        if resume and self.results_path.exists():
            for line in self.results_path.read_text(encoding="utf-8").splitlines():
                try:
                    result = json.loads(line)
                    key = result_key(result)
                except (ValueError, KeyError, TypeError):
                    self.skipped_lines += 1  # e.g. the last line of a killed run
                    continue
                if result.get("status") == "ok":
                    self.kept[key] = result
        self._results: dict[Key, dict[str, Any]] = dict(self.kept)
        self._sink = self.results_path.open("w", encoding="utf-8")
        for result in self.kept.values():
            self._sink.write(dumps(result) + "\n")
        self._sink.flush()

    def done(self, key: Key) -> bool:
        return key in self.kept

    def add(self, result: dict[str, Any]) -> None:
        self._results[result_key(result)] = result
        self._sink.write(dumps(result) + "\n")
        self._sink.flush()

    def write_transcript(self, result: dict[str, Any], transcript: dict[str, Any]) -> Path:
        self.transcripts.mkdir(exist_ok=True)
        scenario, agent, seed = result_key(result)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{scenario}__{agent}__{seed}") + ".json"
        target = self.transcripts / name
        target.write_text(json.dumps(transcript, indent=1) + "\n", encoding="utf-8")
        return target

    @property
    def results(self) -> list[dict[str, Any]]:
        return list(self._results.values())

    def finish(self, order: Iterable[Key]) -> list[dict[str, Any]]:
        """Rewrite the file in job order; returns the results in that order."""
        self._sink.close()
        rank = {key: i for i, key in enumerate(order)}
        ordered = sorted(self._results.values(), key=lambda r: rank.get(result_key(r), len(rank)))
        self.results_path.write_text("".join(dumps(r) + "\n" for r in ordered), encoding="utf-8")
        return ordered

    def close(self) -> None:
        if not self._sink.closed:
            self._sink.close()
