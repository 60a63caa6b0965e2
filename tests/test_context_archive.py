"""TurnArchive: idempotent archival, FTS5 recall ranking and query sanitising, transactions,
and a real SIGKILL of a writer process in the middle of an archival run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _archive_writer import turn

from kv_context_env.sim.archive import TurnArchive, fts_query
from kv_context_env.vocabulary import ArchivedTurn

WRITER = Path(__file__).with_name("_archive_writer.py")


def t(u: int, user: str, assistant: str) -> ArchivedTurn:
    return ArchivedTurn(u, u + 1, user, assistant)


CAT = t(1, "where did I leave the cat", "the cat sleeps on the red sofa")
DOG = t(3, "my dog is called Rex", "noted: your dog Rex")
TRIP = t(5, "we fly to Lisbon on the 12th", "Lisbon on the 12th, got it (flight TP1234)")


@pytest.fixture
def archive() -> TurnArchive:
    a = TurnArchive(":memory:", "ep")
    for step, turn_ in enumerate([CAT, DOG, TRIP]):
        assert a.archive(turn_, step)
    return a


def test_archive_is_idempotent_per_user_index(archive: TurnArchive) -> None:
    assert not archive.archive(CAT, step=9)
    assert not archive.archive(t(1, "different", "text"), step=9)
    assert archive.count() == 3
    assert archive.turns() == [CAT, DOG, TRIP]
    (step,) = archive._db.execute("SELECT archived_step FROM turns WHERE user_index = 1").fetchone()
    assert step == 0


def test_recall_ranks_by_bm25(archive: TurnArchive) -> None:
    assert archive.recall("what is my dog's name?") == [DOG]
    assert archive.recall("cat") == [CAT]
    # "the": 3 times in CAT's 13 words, twice in TRIP's 15, never in DOG
    assert archive.recall("the", k=5) == [CAT, TRIP]
    # "rex" is in one turn of three, "the" in two (idf ~ 0): the rare word wins
    assert archive.recall("the rex", k=3) == [DOG, CAT, TRIP]
    assert archive.recall("lisbon flight", k=2) == [TRIP]
    assert archive.recall("nothing matches here") == []
    with pytest.raises(ValueError, match="k must be"):
        archive.recall("cat", k=0)


def test_recall_is_scoped_to_the_episode(tmp_path: Path) -> None:
    db = tmp_path / "rag.db"
    with TurnArchive(db, "a") as a, TurnArchive(db, "b") as b:
        a.archive(CAT, 0)
        b.archive(DOG, 0)
        b.archive(t(1, "a cat in episode b", "cat"), 1)
        assert a.recall("cat dog", k=5) == [CAT]
        assert sorted(x.user_index for x in b.recall("cat dog", k=5)) == [1, 3]
        assert a.count() == 1 and b.count() == 2


@pytest.mark.parametrize(
    ("query", "users"),
    [
        ('the "cat', {1, 5}),
        ('"unbalanced quote', set()),
        ("(cat OR", {1}),
        ("cat AND dog) NEAR(", {1, 3}),
        ("NEAR(cat dog, 2)", {1, 3}),
        ("cat*", {1}),
        ("^cat", {1}),
        ("user_text: cat", {1}),  # not a column filter
        ("cat - dog + {rex}", {1, 3}),
        ("NOT cat", {1}),
        ("AND", set()),
        ("OR rex", {3}),
        ("tp1234?", {5}),
    ],
)
def test_recall_treats_fts_syntax_as_plain_words(
    archive: TurnArchive, query: str, users: set[int]
) -> None:
    assert {x.user_index for x in archive.recall(query, k=3)} == users


@pytest.mark.parametrize("query", ["", "   ", "***", '"()"', "^-:"])
def test_empty_queries_recall_nothing(archive: TurnArchive, query: str) -> None:
    assert fts_query(query) == ""
    assert archive.recall(query) == []


def test_fts_query_quotes_dedupes_and_ors() -> None:
    assert fts_query('Cat AND cat "dog" NEAR(x*)') == '"cat" OR "and" OR "dog" OR "near" OR "x"'


def test_failed_archival_rolls_back_and_leaves_the_archive_usable(archive: TurnArchive) -> None:
    bad = ArchivedTurn(7, 8, None, "x")  # type: ignore[arg-type]  # NOT NULL fails
    with pytest.raises(sqlite3.IntegrityError):
        archive.archive(bad, step=1)
    assert archive.count() == 3
    assert archive.archive(t(7, "a fresh ferret question", "ferret answer"), step=2)
    assert archive.recall("ferret") == [t(7, "a fresh ferret question", "ferret answer")]


def test_file_archive_uses_wal_and_closes(tmp_path: Path) -> None:
    with TurnArchive(tmp_path / "rag.db", "ep") as a:
        assert a._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert a._db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        a.archive(CAT, 0)
    with pytest.raises(sqlite3.ProgrammingError):
        a.count()
    with TurnArchive(tmp_path / "rag.db", "ep") as again:
        assert again.turns() == [CAT]


# ------------------------------------------------------------------------ kill test


def run_writer(db: Path, n: int, sleep_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(db), "killed", str(n), str(sleep_s)],
        stdout=subprocess.PIPE,
        text=True,
    )


def reported(lines: list[str]) -> list[tuple[int, bool]]:
    out = []
    for line in lines:
        word, user, stored = line.split()
        assert word == "archived"
        out.append((int(user), stored == "True"))
    return out


def check_consistent(db: Path, n_turns: int) -> list[int]:
    """Integrity, no partial turn, FTS index = table; returns the archived user indices."""
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # FTS5 checks its index against the external content table
        con.execute("INSERT INTO turns_fts(turns_fts) VALUES ('integrity-check')")
        (fts_rows,) = con.execute("SELECT count(*) FROM turns_fts").fetchone()
        (rows,) = con.execute("SELECT count(*) FROM turns").fetchone()
        assert fts_rows == rows
    finally:
        con.close()
    with TurnArchive(db, "killed") as archive:
        turns = archive.turns()
        for got in turns:
            i = got.user_index // 2
            assert got == turn(i), "partial or altered turn"
            assert archive.recall(f"zq{i}x") == [got], "row missing from the FTS index"
        users = [x.user_index for x in turns]
    assert users == [2 * i for i in range(len(users))], "archived turns are not a prefix"
    assert len(users) <= n_turns
    return users


@pytest.mark.parametrize(("kill_after", "n", "sleep_s"), [(3, 40, 0.02), (40, 3000, 0.0)])
def test_sigkill_mid_run_loses_nothing_reported_and_resumes_idempotently(
    tmp_path: Path, kill_after: int, n: int, sleep_s: float
) -> None:
    """The second case never sleeps, so the kill lands while the child is writing."""
    db = tmp_path / "rag.db"
    child = run_writer(db, n, sleep_s)
    assert child.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 10
    while len(lines) < kill_after and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        lines.append(line)
    os.kill(child.pid, signal.SIGKILL)
    lines += child.stdout.readlines()  # anything it printed before it died
    assert child.wait(timeout=5) == -signal.SIGKILL
    done = reported(lines)
    assert len(done) >= kill_after and all(stored for _, stored in done)
    assert len(done) < n, "the child finished before the kill; nothing was tested"

    users = check_consistent(db, n)
    # exactly the reported turns, plus at most one committed before its line was printed
    assert users[: len(done)] == [u for u, _ in done]
    assert len(done) <= len(users) <= len(done) + 1

    rerun = run_writer(db, n, 0.0)
    out, _ = rerun.communicate(timeout=30)
    assert rerun.returncode == 0
    second = reported(out.splitlines())
    assert [u for u, stored in second if not stored] == users  # already there: not rewritten
    assert len(second) == n
    assert check_consistent(db, n) == [2 * i for i in range(n)]
