"""The turn archive (the TensorRT-LLM design's RAG store): complete user→assistant turns that left
the KV cache, kept in SQLite with an FTS5 index so `recall` can bring one back by its words.

Storage contract:
- WAL journal with `synchronous=NORMAL`. WAL never corrupts on a crash, and a committed turn
  survives the writing process being killed (the WAL is in the OS page cache). Only an OS
  crash or power loss can drop the last few commits. That is acceptable here: an episode is
  deterministic and archiving is idempotent, so rerunning it writes any lost turns again.
  FULL would add an fsync per archival and protect only against power loss.
- One transaction per archival: the row in `turns` and its FTS5 entry (an external-content
  index kept in sync by triggers in the same transaction) are committed together or not at all.
- `UNIQUE(episode, user_index)`: archiving the same turn again is a no-op that returns False.

Columns beyond the TensorRT-LLM design's turn row: `tool_text`, the turn's tool outputs, and
`reasoning_text`, the assistant's reasoning spans in the turn (indexed for recall like the user
and assistant text: a fact read from a file, or worked out in the reasoning, is found again).

Storage failures: a full disk, an I/O error or a file that cannot be opened raises
`ArchiveWriteError` (an OSError naming the file and the reason: "database or disk is full"),
never a bare `sqlite3.OperationalError`, so a caller maps it to its "cannot write FILE" error.

Ranking: `recall` orders turns by the agent's query alone (FTS5 bm25, ties by the older turn).
Nothing hidden from the agent (such as which facts a later turn restated) takes part.
"""

from __future__ import annotations

import errno
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from kv_context_env.vocabulary import ArchivedTurn

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY,
    episode TEXT NOT NULL,
    user_index INTEGER NOT NULL,
    assistant_index INTEGER NOT NULL,
    user_text TEXT NOT NULL,
    assistant_text TEXT NOT NULL,
    tool_text TEXT NOT NULL DEFAULT '',
    reasoning_text TEXT NOT NULL DEFAULT '',
    archived_step INTEGER NOT NULL,
    UNIQUE (episode, user_index)
);
CREATE VIRTUAL TABLE IF NOT EXISTS turns_fts USING fts5(
    user_text, assistant_text, tool_text, reasoning_text, content='turns', content_rowid='id'
);
CREATE TRIGGER IF NOT EXISTS turns_fts_insert AFTER INSERT ON turns BEGIN
    INSERT INTO turns_fts(rowid, user_text, assistant_text, tool_text, reasoning_text)
    VALUES (new.id, new.user_text, new.assistant_text, new.tool_text, new.reasoning_text);
END;
CREATE TRIGGER IF NOT EXISTS turns_fts_delete AFTER DELETE ON turns BEGIN
    INSERT INTO turns_fts(turns_fts, rowid, user_text, assistant_text, tool_text, reasoning_text)
    VALUES (
        'delete', old.id, old.user_text, old.assistant_text, old.tool_text, old.reasoning_text
    );
END;
"""

_TERM = re.compile(r"\w+")


def fts_query(text: str) -> str:
    """Arbitrary text → a safe FTS5 query: its words, each double-quoted (so AND, OR, NEAR,
    `*`, `^`, `:` and parentheses are plain strings), de-duplicated and OR-ed. "" when the text
    has no words."""
    terms = dict.fromkeys(t.lower() for t in _TERM.findall(text))
    return " OR ".join(f'"{t}"' for t in terms)


class ArchiveWriteError(OSError):
    """The archive's file cannot be written or read (see the module docstring)."""


_STORAGE_ERRNOS = {
    sqlite3.SQLITE_FULL: errno.ENOSPC,
    sqlite3.SQLITE_IOERR: errno.EIO,
    sqlite3.SQLITE_CANTOPEN: errno.ENOENT,
    sqlite3.SQLITE_READONLY: errno.EROFS,
}
"""SQLite's primary result codes of a storage failure, with the errno that says it."""


@contextmanager
def storage_errors(path: str | Path) -> Iterator[None]:
    """Turn SQLite's storage failures on `path` into `ArchiveWriteError`; other errors (a bad
    query: a bug) pass unchanged."""
    try:
        yield
    except sqlite3.Error as error:
        code = getattr(error, "sqlite_errorcode", None)
        if code is None or code & 0xFF not in _STORAGE_ERRNOS:
            raise
        raise ArchiveWriteError(_STORAGE_ERRNOS[code & 0xFF], str(error), str(path)) from None


def _turn(row: tuple[int, int, str, str, str, str]) -> ArchivedTurn:
    u, a, user, assistant, tool, reasoning = row
    return ArchivedTurn(u, a, user, assistant, tool, reasoning)


class TurnArchive:
    """Archived turns of one episode in a SQLite file (or `:memory:` for tests).

    Several episodes may share a file; every query is scoped to `episode`.
    """

    def __init__(self, path: str | Path, episode: str) -> None:
        self.path = str(path)
        self.episode = episode
        # Autocommit mode: transactions are the explicit BEGIN ... COMMIT in `archive`.
        with storage_errors(self.path):
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(_SCHEMA)
            except BaseException:
                self._db.close()
                raise

    def archive(self, turn: ArchivedTurn, step: int) -> bool:
        """Store `turn`, archived at `step`, in one transaction. False if this episode already
        has a turn for `turn.user_index` (nothing is written)."""
        with storage_errors(self.path):
            return self._archive(turn, step)

    def _archive(self, turn: ArchivedTurn, step: int) -> bool:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = db.execute(
                "INSERT INTO turns (episode, user_index, assistant_index, user_text,"
                " assistant_text, tool_text, reasoning_text, archived_step)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (episode, user_index) DO NOTHING RETURNING id",
                (
                    self.episode,
                    turn.user_index,
                    turn.assistant_index,
                    turn.user_text,
                    turn.assistant_text,
                    turn.tool_text,
                    turn.reasoning_text,
                    step,
                ),
            ).fetchall()
        except BaseException:
            if db.in_transaction:  # SQLite may have rolled back itself (a full disk)
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return bool(rows)

    def recall(self, query: str, k: int = 1) -> list[ArchivedTurn]:
        """The `k` turns that best match `query` (FTS5 bm25 over user, assistant and tool text,
        best first; ties by user index). Any text is accepted (see `fts_query`); no words → []."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        match = fts_query(query)
        if not match:
            return []
        with storage_errors(self.path):
            rows = self._db.execute(
                "SELECT t.user_index, t.assistant_index, t.user_text, t.assistant_text,"
                " t.tool_text, t.reasoning_text"
                " FROM turns_fts JOIN turns AS t ON t.id = turns_fts.rowid"
                " WHERE turns_fts MATCH ? AND t.episode = ?"
                " ORDER BY bm25(turns_fts), t.user_index LIMIT ?",
                (match, self.episode, k),
            ).fetchall()
        return [_turn(row) for row in rows]

    def count(self) -> int:
        """Turns archived in this episode."""
        (n,) = self._db.execute(
            "SELECT count(*) FROM turns WHERE episode = ?", (self.episode,)
        ).fetchone()
        return int(n)

    def turns(self) -> list[ArchivedTurn]:
        """Every turn of this episode, by user index."""
        rows = self._db.execute(
            "SELECT user_index, assistant_index, user_text, assistant_text, tool_text,"
            " reasoning_text"
            " FROM turns WHERE episode = ? ORDER BY user_index",
            (self.episode,),
        ).fetchall()
        return [_turn(row) for row in rows]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TurnArchive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
