"""A run directory: `results.jsonl` written as episodes finish (so an interrupted run keeps what
it did), resumable, and rewritten in job order at the end (so reruns are byte-identical).

Writes go through `durable`: each episode is appended as one whole line and fsynced; the
rewrites (the kept lines when resuming, the job order at the end, `run.json`, transcripts)
replace the file whole by rename. None of `RUN_ENTRIES` may be a symbolic link (`--out` itself
may be one). A full disk or an I/O error stops the run with `OutputError` (one line), leaving
`results.jsonl` on a whole line and `run.json` saying `error` with the reason.

Resuming keeps every `ok` episode already in the file and runs the rest again, failed ones
included; the final file has exactly one line per job. A line cut short by a kill is ignored,
and a line of another schema or suite version than this checkout writes is dropped and run
again (`dropped` counts them, for the run to say so). Both families' runs use it (`family`:
serving lines are keyed by scenario, context lines by level).

`run.json` is written when the run starts (status "running") and again when it ends, however
it ends ("complete"; "interrupted" on Ctrl-C or SIGTERM; "error", with the reason in `error`),
with the episodes on disk by then.
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

from kv_cache_env.bounded_read import (
    RESULTS_LIMITS,
    SMALL_JSON_LIMITS,
    FileReadError,
    iter_line_bytes,
    read_json,
)

from .durable import LineLog, OutputError, describe, refuse_links, write_atomic
from .edge import InputError, check_out_dir
from .processes import interrupts_deferred
from .result_check import Family, parse_line
from .results import dumps

CHANGEABLE_ARGUMENTS = frozenset({"concurrency", "workers", "backend", "resume", "episodes"})
"""Arguments a resumed run may change: concurrency, where episodes play, display, and
`episodes` (which may only grow). Every other argument changes results."""

Key = tuple[str, str, int]


def result_key(result: dict[str, Any]) -> Key:
    """(scenario or level, agent, seed): one job's result in either family."""
    where = result["scenario"] if "scenario" in result else result["level"]
    return (str(where), str(result["agent"]), int(result["seed"]))


def suite_version(family: Family) -> str:
    """The suite version this checkout writes into a `family` line."""
    if family == "context":
        from kv_context_env import CONTEXT_SUITE_VERSION

        return str(CONTEXT_SUITE_VERSION)
    from kv_cache_env.sim import SUITE_VERSION

    return str(SUITE_VERSION)


def transcript_name(scenario: str, agent: str, seed: int) -> str:
    """The file name of an episode's transcript in a run's `transcripts/` (names sanitized:
    two agents whose names differ only in other characters share it, so a reader checks the
    transcript's own `model`, `scenario` and `seed`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{scenario}__{agent}__{seed}") + ".json"


class RunDir:
    def __init__(self, path: Path, *, resume: bool = False, family: Family = "serving") -> None:
        self.path = path
        self.results_path = path / "results.jsonl"
        self.transcripts = path / "transcripts"
        self.kept: dict[Key, dict[str, Any]] = {}
        self.skipped_lines = 0
        """Lines that could not be read (the last line of a killed run): run again."""
        self.dropped = 0
        """Lines of another schema or suite version than this checkout's: run again."""
        path.mkdir(parents=True, exist_ok=True)
        refuse_links(path, RUN_ENTRIES)
        if resume and self.results_path.exists():
            current = suite_version(family)
            try:
                for _, line in iter_line_bytes(self.results_path, RESULTS_LIMITS):
                    result, problems = parse_line(line, (family,))
                    if result is None:
                        if any(p.startswith("schema_version") for p in problems):
                            self.dropped += 1
                        else:
                            self.skipped_lines += 1
                        continue
                    if str(result["suite_version"]) != current:
                        self.dropped += 1
                        continue
                    if result.get("status") == "ok":
                        self.kept[result_key(result)] = result
            except FileReadError as error:
                raise InputError(f"--resume: {error}") from None
        self._results: dict[Key, dict[str, Any]] = dict(self.kept)
        self._lines: dict[Key, str] = {key: dumps(r) for key, r in self.kept.items()}
        """Each result's line as written (`finish` writes them again, in order)."""
        # the kept lines replace the file whole (a cut-off last line and failed episodes go)
        write_atomic(self.results_path, "".join(line + "\n" for line in self._lines.values()))
        self._log = LineLog(self.results_path)

    def done(self, key: Key) -> bool:
        return key in self.kept

    def resumed_line(self, total: int) -> str:
        """What `--resume` kept and what it runs again, for the console."""
        line = f"resuming {self.path}: {len(self.kept)} of {total} episodes kept"
        if self.dropped:
            line += (
                f"; dropped {self.dropped} line(s) of another schema or suite version (run again)"
            )
        if self.skipped_lines:
            line += f"; {self.skipped_lines} unreadable line(s) run again"
        return line

    def add(self, result: dict[str, Any]) -> None:
        """Append one episode's line (whole, fsynced); a line too long for any reader to read
        back is recorded as a failed episode saying so."""
        line = dumps(result)
        if len(line) > RESULTS_LIMITS.max_line_bytes:
            result = _too_long(result, len(line))
            line = dumps(result)
        with interrupts_deferred():  # the line and its record together, or neither
            self._log.append(line)
            key = result_key(result)
            self._results[key] = result
            self._lines[key] = line

    def write_transcript(self, result: dict[str, Any], transcript: dict[str, Any]) -> Path:
        refuse_links(self.path, ("transcripts",))
        try:
            self.transcripts.mkdir(exist_ok=True)
        except OSError as error:
            raise OutputError(f"cannot create {self.transcripts}: {describe(error)}") from None
        target = self.transcripts / transcript_name(*result_key(result))
        write_atomic(target, json.dumps(transcript, indent=1) + "\n")
        return target

    @property
    def results(self) -> list[dict[str, Any]]:
        return list(self._results.values())

    def finish(self, order: Iterable[Key]) -> list[dict[str, Any]]:
        """Rewrite the file in job order (whole, by rename); returns the results in that order."""
        self._log.close()
        rank = {key: i for i, key in enumerate(order)}
        keys = sorted(self._results, key=lambda key: rank.get(key, len(rank)))
        write_atomic(self.results_path, "".join(self._lines[key] + "\n" for key in keys))
        return [self._results[key] for key in keys]

    def close(self) -> None:
        self._log.close()


RUN_ENTRIES = ("results.jsonl", "run.json", "transcripts")
"""What a run writes inside its directory; none of them may be a symbolic link."""


def _too_long(result: dict[str, Any], size: int) -> dict[str, Any]:
    from rubrics import Weights

    from .context_results import context_result
    from .results import episode_result

    error = (
        f"the episode's result line is {size:,} bytes, over the "
        f"{RESULTS_LIMITS.max_line_bytes:,}-byte limit of results files (a shorter replay "
        "or fewer steps fits)"
    )
    if "level" in result:  # a context line
        return context_result(
            agent=str(result["agent"]),
            reader=str(result["reader"]),
            level=str(result["level"]),
            seed=int(result["seed"]),
            record=None,
            error=error,
        )
    return episode_result(
        agent=str(result["agent"]),
        scenario=str(result["scenario"]),
        seed=int(result["seed"]),
        record=None,
        error=error,
        usage=result.get("usage"),
        weights=Weights(result["weights"]),  # the run's (this result was scored under them)
    )


def _load_run_info(path: Path) -> dict[str, Any] | None:
    file = path / "run.json"
    if not file.is_file():
        return None
    try:
        info = read_json(file, SMALL_JSON_LIMITS)
    except FileReadError:
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
    for name in RUN_ENTRIES:
        if (path / name).is_symlink():
            raise InputError(
                f"--out {path}: {name} is a symbolic link; a run directory's entries must be "
                "plain files (remove the link, or write the run elsewhere)"
            )
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
    error: str | None = None,
) -> dict[str, Any]:
    """Write `run.json` (whole, by rename; in place when the disk is too full for that):
    `info` plus the run's status, what stopped it (`error`, for status "error") and the
    episode counts so far."""
    full = {
        **info,
        "status": status,
        "wall_time_s": round(time.perf_counter() - started, 3),
        "episodes_run": len(results),
        "episodes_failed": sum(1 for r in results if r.get("status") != "ok"),
    }
    if error is not None:
        full["error"] = error
    write_atomic(path / "run.json", json.dumps(full, indent=2) + "\n", in_place_fallback=True)
    return full
