"""A long run's finished jobs kept on disk, so that a stopped run (Ctrl-C, a kill, a proof run
cut short) continues with `--resume` without playing them again. Each family's `validate --out
DIR` uses it, stating only how one of its jobs is written as a line and read back
(`JobStore.encode` / `JobStore.decode`).

`DIR/run.json` says what the run is: its sizes and the digest of the code every job depends on
(`code_digest`); a resume with other sizes or other code is refused, naming what differs (jobs
of two codes never mix). `DIR/episodes.jsonl` holds one line per finished job, appended and
fsynced as each finishes (`durable.LineLog`); a line cut by a kill is skipped and its job played
again. `DIR/checks.json` holds the checks when the run ends (`write_checks`).
"""

from __future__ import annotations

import hashlib
import io
import json
import tokenize
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from kv_cache_env.bounded_read import RESULTS_LIMITS, SMALL_JSON_LIMITS, iter_line_bytes, read_json

from .checks import Check, checks_json
from .durable import LineLog, write_atomic
from .edge import InputError
from .results import dumps

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


def code_text(path: Path) -> str:
    """The file's code tokens: comments, blank lines and docstrings (a string that is a whole
    statement) left out, so rewording them does not change a digest (a file other than Python
    counts whole)."""
    if path.suffix != ".py":
        return path.read_text()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        if t.type not in skip
    ]
    kept: list[str] = []
    boundary = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        alone = (i == 0 or tokens[i - 1].type in boundary) and (
            i + 1 < len(tokens) and tokens[i + 1].type == tokenize.NEWLINE
        )
        if token.type == tokenize.STRING and alone:
            i += 2  # the docstring and its NEWLINE
            continue
        kept.append(f"{token.type}:{token.string}")
        i += 1
    return "\n".join(kept)


def code_digest(root: Path, files: Iterable[Path]) -> str:
    """sha256 (16 hex digits) of the code of `files` (`code_text`), each named relative to
    `root`, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(set(files)):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(code_text(path).encode() + b"\0")
    return digest.hexdigest()[:16]


class JobStore(Generic[K, R]):
    """The finished jobs of one run (module doc). A family subclasses it with `encode` and
    `decode`; `identity` must hold its code digest under "code"."""

    def __init__(self, path: Path, identity: Mapping[str, Any], *, resume: bool) -> None:
        self.path = path
        self.done: dict[K, R] = {}
        self.skipped_lines = 0
        run_file, episodes = path / "run.json", path / "episodes.jsonl"
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
            write_atomic(run_file, json.dumps(dict(identity), indent=1) + "\n")
        self._log = LineLog(episodes)

    def encode(self, key: K, result: R) -> dict[str, Any]:
        """The line (a JSON object) that keeps `result`, the result of job `key`."""
        raise NotImplementedError

    def decode(self, line: dict[str, Any]) -> tuple[K, R]:
        """The job and result a line holds; ValueError, KeyError or TypeError if it is not
        one (a line cut by a kill)."""
        raise NotImplementedError

    def _load(self, episodes: Path) -> None:
        if not episodes.exists():
            return
        for _, raw in iter_line_bytes(episodes, RESULTS_LIMITS):
            try:
                key, result = self.decode(json.loads(raw))
            except (ValueError, KeyError, TypeError):
                self.skipped_lines += 1  # a line cut by a kill: its job is played again
                continue
            self.done[key] = result

    def get(self, key: K) -> R | None:
        return self.done.get(key)

    def keep(self, key: K, result: R) -> None:
        """Hold `result` and append its line."""
        self.done[key] = result
        self._log.append(dumps(self.encode(key, result)))

    def close(self) -> None:
        self._log.close()


def write_checks(directory: Path, checks: list[Check]) -> Path:
    """`directory/checks.json`: a run's checks, written when it ends."""
    out = directory / "checks.json"
    write_atomic(out, checks_json(checks))
    return out


__all__ = ["JobStore", "code_digest", "code_text", "write_checks"]
