"""Hostile files, generated here, through `kvarena eval --trace` and `kvarena report`: each must
end in one line naming FILE[:LINE] and exit status 2 (never a traceback, the "unexpected" line
or a long stall), and legitimate files at the size limits must still read."""

from __future__ import annotations

import gzip
import json
import os
import time
import zlib

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.results import dumps
from evals.report.build import load_results
from evals.serving.jobs import EpisodeJob, run_job
from kv_cache_env import bounded_read
from kv_cache_env.bounded_read import (
    RESULTS_LIMITS,
    FileReadError,
    Limits,
    iter_line_bytes,
    iter_lines,
    loads,
    read_json,
    too_deep,
)
from kv_cache_env.episodes import EpisodeSpec

runner = CliRunner()
GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'
TRACE = (GOOD * 40).encode()


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _garbage_after_header() -> bytes:
    whole = _gz(TRACE)
    # the 10-byte header, then deflate data that is not deflate data
    return whole[:10] + bytes(range(256)) * 4


TRACE_CORPUS: dict[str, tuple[str, bytes, str]] = {
    "gzip-truncated": (
        "t.jsonl.gz",
        _gz(TRACE)[:-30],
        "t.jsonl.gz: the compressed data ends early",
    ),
    "gzip-plain-file": ("t.jsonl.gz", TRACE, "t.jsonl.gz: not a gzip file"),
    "gzip-garbage": ("t.jsonl.gz", _garbage_after_header(), "t.jsonl.gz: corrupt gzip data"),
    "gzip-binary": (
        "t.jsonl.gz",
        _gz(TRACE[:80] + bytes(range(128, 256)) * 8),
        "t.jsonl.gz:2: not UTF-8 text",
    ),
    "gzip-nul": ("t.jsonl.gz", _gz(TRACE[:80] + b"\0\0\0\n"), "t.jsonl.gz:2: not UTF-8 text"),
    "gzip-newline-bomb": ("t.jsonl.gz", _gz(b"\n" * (4 << 20)), "t.jsonl.gz: the trace holds no"),
    "deep-json-long": ("t.jsonl", b"[" * 100_000 + b"\n", "t.jsonl:1: a line longer than 64 KiB"),
    "deep-json": (
        "t.jsonl",
        GOOD.replace("[1, 2]", "[" * 20_000 + "]" * 20_000).encode(),
        "t.jsonl:1: JSON nested too deep",
    ),
    "huge-integer-digits": (
        "t.jsonl",
        GOOD.replace("600", "9" * 5000).encode(),
        "t.jsonl:1: an integer of more than 4,300 digits",
    ),
    "huge-integer": (
        "t.jsonl",
        GOOD.replace("600", str(10**400)).encode(),
        "input_length 1000000000000",
    ),
    "nan": ("t.jsonl", GOOD.replace('"timestamp": 0', '"timestamp": NaN').encode(), "finite"),
    "binary": ("t.jsonl", bytes(range(256)) * 64, "t.jsonl:1: not UTF-8 text"),
    "azure-gzip-truncated": (
        "t.csv.gz",
        _gz(b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + b"2023-11-16 18:15:46.6,100,5\n" * 99)[
            :-20
        ],
        "t.csv.gz: the compressed data ends early",
    ),
}


@pytest.mark.parametrize("case", list(TRACE_CORPUS))
def test_hostile_trace_files(tmp_path, case):
    name, content, expected = TRACE_CORPUS[case]
    path = tmp_path / name
    path.write_bytes(content)
    started = time.perf_counter()
    _expect_error(["eval", "-p", "lru", "--trace", str(path), "-o", str(tmp_path / "o")], expected)
    assert time.perf_counter() - started < 60, "a hostile file must not stall the reader"
    assert not (tmp_path / "o").exists(), "nothing may run or be written"


def test_a_gzip_bomb_stops_at_the_decompressed_limit(tmp_path, monkeypatch):
    """The bound holds whatever the file says: 64 MiB of newlines against a 1 MiB limit stop
    after the limit (the real limit, 1 GiB, works the same way at its own size)."""
    monkeypatch.setattr(
        "kv_cache_env.traces.replay.TRACE_LIMITS",
        Limits("trace", 1 << 20, bounded_read.TRACE_LIMITS.max_line_bytes),
    )
    bomb = tmp_path / "bomb.jsonl.gz"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb.write_bytes(compressor.compress(b"\n" * (64 << 20)) + compressor.flush())
    assert bomb.stat().st_size < 200_000
    args = ["eval", "-p", "lru", "--trace", str(bomb), "-o", str(tmp_path / "o")]
    _expect_error(args, "bomb.jsonl.gz: more than 1 MiB decompressed, the largest trace read")


def _valid_line() -> dict:
    job = EpisodeJob("lru", EpisodeSpec("easy", 0, steps=3))
    return run_job(job)


REPORT_CORPUS: dict[str, tuple[str, object, str]] = {
    "gzip-truncated": ("r.jsonl.gz", "truncated", "r.jsonl.gz: the compressed data ends early"),
    "gzip-plain-file": ("r.jsonl.gz", "plain", "r.jsonl.gz: not a gzip file"),
    "deep-json": ("r.jsonl", b"[" * 100_000, "r.jsonl:2: JSON nested more than 64 deep"),
    "deep-balanced": (
        "r.jsonl",
        b"[" * 100 + b"]" * 100,
        "r.jsonl:2: JSON nested more than 64 deep",
    ),
    "huge-integer-digits": ("r.jsonl", "seed-digits", "r.jsonl:2: not JSON (an integer of more"),
    "nan": ("r.jsonl", "nan", "r.jsonl:2: NaN is not a finite number"),
    "binary": ("r.jsonl", bytes(range(128, 256)), "r.jsonl:2: not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(REPORT_CORPUS))
def test_hostile_results_files(tmp_path, case):
    name, second, expected = REPORT_CORPUS[case]
    good = dumps(_valid_line())
    if second == "truncated":
        data = _gz(((good + "\n") * 3).encode())[:-25]
    elif second == "plain":
        data = (good + "\n").encode()
    else:
        if second == "seed-digits":
            second = good.replace('"seed":0', '"seed":' + "7" * 5000).encode()
        elif second == "nan":
            second = good.replace('"reward":', '"reward":NaN,"x":', 1).encode()
        assert isinstance(second, bytes)
        data = (good + "\n").encode() + second + b"\n"
    path = tmp_path / name
    path.write_bytes(data)
    _expect_error(["report", str(path), "-o", str(tmp_path / "rep")], expected)
    assert not (tmp_path / "rep" / "index.html").exists()


def test_an_over_long_results_line_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr("evals.report.build.RESULTS_LIMITS", Limits("results file", None, 1024))
    path = tmp_path / "results.jsonl"
    path.write_text(dumps(_valid_line()) + "\n")
    _expect_error(
        ["report", str(path), "-o", str(tmp_path / "rep")],
        "results.jsonl:1: a line longer than 1 KiB, the longest results file line read",
    )


def test_a_multi_megabyte_results_line_still_reads(tmp_path):
    """A results line ~30 times the size of a `--full` Mooncake replay's (0.25 MB) reads and
    reports: the line limit (64 MiB) is far above legitimate lines."""
    line = _valid_line()
    turns = 600_000
    line["series"] = {key: [0.5] * turns for key in ("usage", "queue", "failures")}
    text = dumps(line)
    assert len(text) > 5_000_000
    path = tmp_path / "results.jsonl"
    path.write_text(text + "\n")
    (loaded,) = load_results([path])
    assert loaded["series"]["usage"] == line["series"]["usage"]
    assert len(text) < RESULTS_LIMITS.max_line_bytes / 5


# --- the reader itself ----------------------------------------------------------------------


def test_lines_are_numbered_across_chunks_and_blank_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded_read, "CHUNK_BYTES", 7)
    path = tmp_path / "x.txt"
    path.write_bytes(b"alpha\n\n\n  \nbeta gamma delta\r\n\n" + b"\n" * 50 + b"last")
    limits = Limits("text", None, 100)
    assert list(iter_lines(path, limits)) == [(1, "alpha"), (5, "beta gamma delta"), (57, "last")]


def test_a_long_line_is_refused_before_it_is_held_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded_read, "CHUNK_BYTES", 1024)
    path = tmp_path / "x.txt"
    path.write_bytes(b"ok\n" + b"y" * 50_000)
    with pytest.raises(FileReadError, match=r"x.txt:2: a line longer than 4 KiB"):
        list(iter_line_bytes(path, Limits("text", None, 4096)))


def test_whole_file_limits_count_decompressed_bytes(tmp_path):
    path = tmp_path / "x.json.gz"
    path.write_bytes(_gz(b" " * 10_000 + b"{}"))
    assert read_json(path, Limits("doc", 20_000, 20_000)) == {}
    with pytest.raises(FileReadError, match=r"x.json.gz: more than 8 KiB decompressed"):
        read_json(path, Limits("doc", 8192, 8192))


def test_not_a_regular_file(tmp_path):
    with pytest.raises(FileReadError, match="not a regular file"):
        read_json("/dev/zero", Limits("doc", 1024, 1024))
    with pytest.raises(FileReadError, match="cannot read it"):
        read_json(tmp_path, Limits("doc", 1024, 1024))
    with pytest.raises(FileReadError, match="no such file"):
        read_json(tmp_path / "nope.json", Limits("doc", 1024, 1024))


def test_json_depth_is_bounded_exactly():
    assert not too_deep("[" * 64 + "]" * 64)
    assert too_deep("[" * 65 + "]" * 65)
    # brackets inside strings do not count; a wide shallow document is not deep
    assert not too_deep(json.dumps({"a": "[" * 500, "b": [[1]] * 1000}))
    assert loads('{"k": [[["x"]]]}', "doc") == {"k": [[["x"]]]}
    with pytest.raises(FileReadError, match="doc: JSON nested more than 64 deep"):
        loads("[" * 65 + "]" * 65, "doc")
    with pytest.raises(FileReadError, match="doc: JSON nested more than 64 deep"):
        loads("[" * 100_000, "doc")
    with pytest.raises(FileReadError, match="doc:2: not JSON"):
        loads('{\n"a": }', "doc")


def test_the_built_in_traces_fit_their_limits():
    from kv_cache_env.traces.trace_data import BUILTIN_TRACES, DATA_DIR

    for trace in BUILTIN_TRACES.values():
        longest = max(len(line) for _, line in iter_line_bytes(DATA_DIR / trace.file, _no_limit()))
        assert longest < bounded_read.TRACE_LIMITS.max_line_bytes / 20
        size = len(gzip.decompress((DATA_DIR / trace.file).read_bytes()))
        assert size < bounded_read.TRACE_LIMITS.max_bytes / 100  # type: ignore[operator]


def _no_limit() -> Limits:
    return Limits("any", None, 1 << 30)


def _expect_error(args: list[str], expected: str) -> None:
    done = runner.invoke(app, args)
    flat = "".join(done.output.split())
    assert done.exit_code == 2, (args, done.exit_code, done.output)
    assert "".join(expected.split()) in flat, (expected, done.output)
    assert "Traceback" not in done.output and "unexpected" not in done.output
    # the command's status line (what it loads), then the one error line
    lines = done.output.strip().splitlines()
    assert lines[-1].startswith("error: ") and len(lines) <= 2, done.output
    assert len(lines) == 1 or lines[0].startswith(f"{args[0]}: "), done.output
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert os.environ.get("KVARENA_DEBUG", "") in ("", "0")
