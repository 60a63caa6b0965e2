"""The shipped reference table: the `bound`'s and `noop`'s episode records for the evaluation
seeds of every suite scenario, stored as package data so that `kvarena eval` and
`kvarena report` need not recompute the leaderboard's floor and ceiling (D4RL ships its
reference scores the same way).

An entry is the full `EpisodeRecord`, not a reward, so `--weights` re-scores it exactly as a
computed record would be scored: the result line built from a table entry is byte-identical
to the one built from the episode played now (tested). But the bound's records are those of the
bound that searched under the default weights: under other weights its play differs, so the
table answers the bound (any policy that `optimises` the rubric) only for the default weights;
`noop`'s record does not depend on them.

The table is used only when everything that changes a record matches:
- the serving suite's version (`SUITE_VERSION`);
- the episode: a suite scenario, an evaluation seed the table holds, the scenario's own number
  of turns (no `--steps`), no trace, the scenario's own block size;
- the code: a digest of the simulator, the rubric (the bound searches by reward), the policies
  (the bound's pool is every registered policy but a few) and the episode runner — of their code
  tokens, so comments and docstrings do not count (`source_digest`). The honest `expert`'s own
  modules, the rule grid it draws from and what its worlds read of the renderer
  (`sim/hidden.py`) are left out (`NOT_SOURCES`): neither `noop` nor `bound` runs them
  (tested), so changing the expert does not stale the table.
Anything else is computed as before. `kvarena validate` fails when the table is stale (the
digest differs) or has drifted (an entry no longer equals a recomputed one).

Regenerate it with `scripts/reference_table.py` (see its docstring) whenever the suite, the
simulator, the rubric or a policy changes.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.sim import SUITE, SUITE_VERSION, EpisodeRecord
from rubrics import DEFAULT_WEIGHTS, Weights

from ..common.job_store import code_digest

ROOT = Path(__file__).resolve().parents[2]
TABLE_PATH = Path(__file__).resolve().parent / "reference_data" / "reference.jsonl.gz"
AGENTS: tuple[str, ...] = ("noop", "bound")
"""The leaderboard's floor and ceiling (`normalize.FLOOR`, `policies.REFERENCE`)."""
SEEDS = range(100)
"""Evaluation seeds 0-99: `kvarena eval`'s default 10 and `validate -n 100` alike."""
FORMAT = 1

SOURCES: tuple[str, ...] = (
    "environments/kv_cache_env/sim/*.py",
    "environments/kv_cache_env/rl/features.py",
    "environments/kv_cache_env/episodes.py",
    "rubrics/__init__.py",
    "rubrics/serving.py",
    "rubrics/weights.py",
    "rubrics/metrics.py",
    "environments/kv_cache_env/policies/*.py",
    "environments/kv_cache_env/policies/*.json",
    "evals/serving/runner.py",
)
"""What produces a record: the files whose code the digest covers (relative to the project)."""

NOT_SOURCES: tuple[str, ...] = (
    "environments/kv_cache_env/policies/expert.py",
    "environments/kv_cache_env/policies/worlds.py",
    "environments/kv_cache_env/sim/hidden.py",
)
"""Files matched by `SOURCES` that no table record depends on: the `expert` planner, its world
sampler, and the derivation of what the observation shows of each request that its worlds check
themselves against (not in the bound's pool, never imported by a pooled policy or the
simulator; tested). The rule grid is a source: `regime-rule`, in the bound's pool, plays its
regime winners."""

REGENERATE = "nice -n 10 uv run --no-sync python scripts/reference_table.py -j 2"
"""The command that rebuilds the table (told in every message about a stale table)."""


def source_files() -> list[Path]:
    files = {p for pattern in SOURCES for p in ROOT.glob(pattern)}
    return sorted(files - {ROOT / name for name in NOT_SOURCES})


@lru_cache(maxsize=1)
def episode_digest() -> str:
    """sha256 (16 hex digits) of the code of every file in `SOURCES`, the planners' of
    `NOT_SOURCES` included: the code any `validate` episode depends on (its resumable store)."""
    return code_digest(ROOT, (p for pattern in SOURCES for p in ROOT.glob(pattern)))


@lru_cache(maxsize=1)
def raw_digest() -> str:
    """sha256 (16 hex digits) of the bytes of every file in `SOURCES`: a quick first test (a
    match means the code is the table's; a mismatch may be a reworded comment)."""
    digest = hashlib.sha256()
    for path in source_files():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def source_digest() -> str:
    """sha256 (first 16 hex digits) of the code of every file in `SOURCES`: the shipped
    table's where its `raw_digest` is this code's (the same bytes, so the same code; the
    tokenizing takes a run ~0.3 s of CPU)."""
    table = shipped()
    if table is not None and table.raw and table.raw == raw_digest():
        return table.digest
    return code_digest(ROOT, source_files())


@dataclass(frozen=True)
class ReferenceTable:
    """The table as loaded: its key, and the records by (agent, scenario, seed)."""

    suite_version: str
    digest: str
    records: Mapping[tuple[str, str, int], Mapping[str, Any]]
    raw: str = ""
    """`raw_digest()` when it was made."""

    @property
    def current(self) -> bool:
        """Made by this code, for this suite: safe to use."""
        if self.suite_version != SUITE_VERSION:
            return False
        return self.raw == raw_digest() or self.digest == source_digest()

    def covers(self, agent: str, episode: EpisodeSpec, weights: Weights) -> bool:
        """Whether the record of `agent` on `episode`, played under `weights`, is in the table
        and may be used (`played_alike`: the table's bound searched under the default weights)."""
        return (
            self.current
            and played_alike(agent, weights)
            and episode.trace is None
            and episode.steps is None
            and episode.block_size is None
            and (agent, episode.scenario, episode.seed) in self.records
        )

    def record(self, agent: str, scenario: str, seed: int) -> EpisodeRecord:
        return EpisodeRecord.from_dict(dict(self.records[agent, scenario, seed]))


def played_alike(agent: str, weights: Weights) -> bool:
    """Whether `agent` under `weights` plays what the table's record of it holds (played under
    the default weights): always under the default weights, and under others only an agent
    that does not search by the rubric (`noop`: its record is re-scored under any weights; the
    bound's play depends on them)."""
    from kv_cache_env.policies import optimises

    return weights.is_default or not optimises(agent)


def load(path: Path = TABLE_PATH) -> ReferenceTable | None:
    """The shipped table, or None where there is none (or it cannot be read)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            header = json.loads(handle.readline())
            if header.get("format") != FORMAT:
                return None
            lines: dict[tuple[str, str, int], str] = {}
            for line in handle:
                lines[_entry_key(line)] = line
    except (OSError, ValueError, KeyError, EOFError):
        return None
    records = _Records(lines)
    return ReferenceTable(
        header["suite_version"], header["digest"], records, header.get("raw_digest", "")
    )


def _entry_key(line: str) -> tuple[str, str, int]:
    """(agent, scenario, seed) of a table line as `write` makes it (sorted keys, the record
    between the agent and the scenario), read without parsing the record; ValueError (or
    KeyError) for any other line."""
    head = json.loads(line[: line.index(',"record":')] + "}")
    tail = json.loads("{" + line[line.rindex('},"scenario":') + 2 :])
    agent, scenario, seed = head["agent"], tail["scenario"], tail["seed"]
    if not (isinstance(agent, str) and isinstance(scenario, str) and type(seed) is int):
        raise ValueError(f"not a table entry: {line[:80]!r}")
    return agent, scenario, seed


class _Records(Mapping[tuple[str, str, int], Mapping[str, Any]]):
    """The table's records by (agent, scenario, seed), each parsed when first read: a run
    reads its own seeds' (an eval's ten of the hundred), and parsing them all took ~0.5 s."""

    def __init__(self, lines: dict[tuple[str, str, int], str]) -> None:
        self._lines = lines
        self._parsed: dict[tuple[str, str, int], Mapping[str, Any]] = {}

    def __getitem__(self, key: tuple[str, str, int]) -> Mapping[str, Any]:
        record = self._parsed.get(key)
        if record is None:
            record = self._parsed[key] = json.loads(self._lines[key])["record"]
        return record

    def __contains__(self, key: object) -> bool:
        return key in self._lines

    def __iter__(self) -> Iterator[tuple[str, str, int]]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)


@lru_cache(maxsize=1)
def shipped() -> ReferenceTable | None:
    """The shipped table, loaded once per process."""
    return load()


def status() -> str:
    """One line on whether `eval` and `report` can use the shipped table."""
    table = shipped()
    if table is None:
        return f"no shipped reference table at {TABLE_PATH} (build it: {REGENERATE})"
    if table.suite_version != SUITE_VERSION:
        return (
            f"the shipped reference table is for suite v{table.suite_version}, not "
            f"v{SUITE_VERSION}: the reference is computed (regenerate it: {REGENERATE})"
        )
    if not table.current:
        return (
            "the shipped reference table was made by other simulator, rubric or policy code "
            f"(digest {table.digest}, now {source_digest()}): the reference is computed "
            f"(regenerate it: {REGENERATE})"
        )
    return f"the shipped reference table is current ({len(table.records)} records)"


def play_entry(agent: str, scenario: str, seed: int) -> dict[str, Any]:
    """The record of `agent` on evaluation episode (`scenario`, `seed`), as `kvarena eval`
    plays it under the default weights, as a dict (what the table stores)."""
    from kv_cache_env.policies import create
    from kv_cache_env.sim import get_scenario

    from .runner import run_policy_episode

    policy = create(agent, DEFAULT_WEIGHTS)
    return run_policy_episode(policy, get_scenario(scenario), seed).to_dict()


def write(
    path: Path,
    entries: Iterable[tuple[str, str, int, Mapping[str, Any]]],
    seeds: range = SEEDS,
) -> int:
    """Write a table of (agent, scenario, seed, record dict) for this suite and code; `seeds`
    says which evaluation seeds it holds."""
    rows = sorted(entries, key=lambda e: (AGENTS.index(e[0]), SUITE.index(e[1]), e[2]))
    header = {
        "format": FORMAT,
        "suite_version": SUITE_VERSION,
        "digest": source_digest(),
        "raw_digest": raw_digest(),
        "agents": list(AGENTS),
        "scenarios": list(SUITE),
        "seeds": [seeds.start, seeds.stop],
        "made_by": "scripts/reference_table.py",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same entries give the same bytes
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write((json.dumps(header, sort_keys=True) + "\n").encode())
        for agent, scenario, seed, record in rows:
            line = {"agent": agent, "scenario": scenario, "seed": seed, "record": record}
            handle.write((json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n").encode())
    return len(rows)
