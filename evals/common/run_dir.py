"""A run directory: `results.jsonl` written as episodes finish (so an interrupted run keeps what
it did), resumable, and rewritten in job order at the end (so reruns are byte-identical).

Resuming keeps every `ok` episode already in the file and runs the rest again, failed ones
included; the final file has exactly one line per job. A line cut short by a kill is ignored.

`run.json` is written when the run starts (status "running") and again when it ends, however
it ends ("complete", "interrupted" on Ctrl-C, "error"), with the episodes on disk by then.
`prepare_run_dir` guards a directory that already holds results: `--resume` goes on only when
its `run.json` matches the new run in everything that changes results (`RESULT_ARGUMENTS` and
the package version; `episodes` may grow), and says what differs otherwise; `--force` moves
the old directory aside (`NAME.old-N`) and starts fresh; neither refuses. Runs never mix.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .edge import InputError, check_out_dir
from .result_check import parse_line
from .results import dumps

CHANGEABLE_ARGUMENTS = frozenset({"concurrency", "workers", "resume", "episodes"})
"""Arguments a resumed run may change: concurrency and display, and `episodes` (which may
only grow). Every other argument changes results."""

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
            for line in self.results_path.read_bytes().splitlines():
                result, _ = parse_line(line)
                if result is None:
                    self.skipped_lines += 1  # e.g. the last line of a killed run: run again
                    continue
                key = result_key(result)
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


def _load_run_info(path: Path) -> dict[str, Any] | None:
    file = path / "run.json"
    if not file.is_file():
        return None
    try:
        info = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("arguments"), dict) else None


def resume_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two runs' `run.json` that would change results ("name: a -> b")."""
    old_args, new_args = old.get("arguments", {}), new.get("arguments", {})
    differences = []
    if old.get("command") != new.get("command"):
        differences.append(f"command: {old.get('command')!r} -> {new.get('command')!r}")
    for key in sorted(set(old_args) | set(new_args)):
        if key in CHANGEABLE_ARGUMENTS:
            continue
        a, b = old_args.get(key), new_args.get(key)
        if a != b:
            differences.append(f"{key}: {json.dumps(a)[:60]} -> {json.dumps(b)[:60]}")
    a_n, b_n = old_args.get("episodes"), new_args.get("episodes")
    if isinstance(a_n, int) and isinstance(b_n, int) and b_n < a_n:
        differences.append(f"episodes: {a_n} -> {b_n} (-n may only grow)")
    if old.get("suite_version") != new.get("suite_version"):
        differences.append(
            f"suite_version: {old.get('suite_version')!r} -> {new.get('suite_version')!r}"
        )
    version = "kvcache-arena"
    a_v = old.get("versions", {}).get(version) if isinstance(old.get("versions"), dict) else None
    b_v = new.get("versions", {}).get(version)
    if a_v != b_v:
        differences.append(f"{version} version: {a_v} -> {b_v}")
    return differences


def prepare_run_dir(path: Path, info: dict[str, Any], *, resume: bool, force: bool) -> Path | None:
    """Check `path` for a run described by `info` (see the module docstring); returns where
    old results were moved by `force`, else None. InputError says what to do instead."""
    check_out_dir(path)
    has_results = (path / "results.jsonl").exists()
    old = _load_run_info(path)
    if force and (has_results or old is not None):
        n = 1
        while path.with_name(f"{path.name}.old-{n}").exists():
            n += 1
        aside = path.with_name(f"{path.name}.old-{n}")
        try:
            path.rename(aside)
        except OSError as error:
            raise InputError(f"--force: cannot move {path} aside ({error.strerror})") from None
        check_out_dir(path)
        return aside
    if not has_results:
        return None
    if not resume:
        raise InputError(
            f"--out {path} already holds results.jsonl; --resume finishes that run, --force "
            "moves it aside and starts fresh"
        )
    if old is None:
        raise InputError(
            f"--resume: {path / 'run.json'} is missing or unreadable, so the arguments of the "
            "results there cannot be checked; use --force to start fresh"
        )
    differences = resume_differences(old, info)
    if differences:
        raise InputError(
            f"--resume: {path / 'run.json'} differs in {'; '.join(differences)}; rerun with "
            "the same arguments, or --force to start fresh"
        )
    return None


def write_run_info(
    path: Path,
    info: dict[str, Any],
    results: list[dict[str, Any]],
    status: str,
    started: float,
) -> dict[str, Any]:
    """Write `run.json`: `info` plus the run's status and episode counts so far."""
    full = {
        **info,
        "status": status,
        "wall_time_s": round(time.perf_counter() - started, 3),
        "episodes_run": len(results),
        "episodes_failed": sum(1 for r in results if r.get("status") != "ok"),
    }
    target = path / "run.json"
    partial = target.with_suffix(".json.tmp")
    partial.write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
    partial.replace(target)
    return full
