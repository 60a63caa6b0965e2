"""Numbers, names, paths, keys and versions out of range: each must stop at the edge with exit 2
and a message naming the option and its range (never the "unexpected ... (a bug)" line), or,
for a `--resume` over lines of another version, drop and rerun them and say how many."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common import secrets
from evals.common.edge import InputError, check_path, names_option, parse_weights
from rubrics import Weights
from rubrics.context import ContextWeights

runner = CliRunner()
HUGE = "1" + "0" * 5000
LONG_NAME = "t" * 300


def _expect_error(args: list[str], expected: str, env: dict[str, str] | None = None) -> str:
    done = runner.invoke(app, args, env=env)
    flat = "".join(done.output.split())
    assert done.exit_code == 2, (args[:6], done.exit_code, done.output[-400:])
    assert "".join(expected.split()) in flat, (expected, done.output[-400:])
    assert "Traceback" not in done.output and "unexpected" not in done.output
    return done.output


EVAL = ["eval", "-p", "noop", "-s", "easy", "-n", "1"]
CONTEXT = ["context-eval", "-p", "noop", "-l", "easy", "-n", "1"]
REPLAY = ["cache-replay", ".", "--price-in", "1", "--price-cached", "1", "--price-write", "1"]

CASES = {
    "weights-400-digit-int": (
        [*EVAL, "--weights", '{"latency_penalty": 1' + "0" * 400 + "}"],
        "--weights: a number of 401 characters (at most 400",
    ),
    "weights-5000-digit-int": (
        [*EVAL, "--weights", '{"latency_penalty": ' + HUGE + "}"],
        "--weights: a number of 5,001 characters",
    ),
    "weights-5000-digit-float": (
        [*EVAL, "--weights", '{"latency_penalty": 0.' + "1" * 5000 + "}"],
        "--weights: a number of 5,002 characters",
    ),
    "weights-10-400": (
        [*EVAL, "--weights", '{"latency_penalty": 1' + "0" * 390 + "}"],
        "--weights: latency_penalty must be finite and at most 1e+06",
    ),
    "weights-duplicate-key": (
        [*EVAL, "--weights", '{"latency_penalty": 1, "latency_penalty": 2}'],
        "--weights: 'latency_penalty' is given twice",
    ),
    "weights-long-text": (
        [*EVAL, "--weights", '{"latency_penalty": 1' + " " * 20_000 + "}"],
        "--weights: 20,022 characters of JSON (at most 10,000)",
    ),
    "context-weights-5000-digits": (
        [*CONTEXT, "--weights", '{"oom_penalty": ' + HUGE + "}"],
        "--weights: a number of 5,001 characters",
    ),
    "context-weights-duplicate": (
        [*CONTEXT, "--weights", '{"oom_penalty": 1, "oom_penalty": 1}'],
        "--weights: 'oom_penalty' is given twice",
    ),
    "seed-range-past-max": (
        ["eval", "-p", "noop", "-s", "easy", "-n", "2", "--seed", str(2**62)],
        "--seed: the last episode's seed (--seed + episodes - 1 = 4611686018427387905) must be "
        "at most 4611686018427387904",
    ),
    "context-seed-range-past-max": (
        ["context-eval", "-p", "noop", "-l", "easy", "-n", "3", "--seed", str(2**62 - 1)],
        "--seed: the last episode's seed",
    ),
    "scenario-empty-item": (
        ["eval", "-p", "noop", "-s", "easy,", "-n", "1"],
        "--scenario 'easy,': an empty item",
    ),
    "policy-empty-item": (
        ["eval", "-p", "lru,,noop", "-s", "easy", "-n", "1"],
        "--policy 'lru,,noop': an empty item",
    ),
    "level-empty-item": (
        ["context-eval", "-p", "noop", "-l", ",easy", "-n", "1"],
        "--level ',easy': an empty item",
    ),
    "context-timeout-nan": ([*CONTEXT, "--timeout", "nan"], "--timeout: must be a finite number"),
    "context-timeout-huge": ([*CONTEXT, "--timeout", "1e9"], "--timeout: must be between 1"),
    "context-retries-huge": ([*CONTEXT, "--max-retries", "99"], "--max-retries: must be between"),
    "context-resume-force": (
        [*CONTEXT, "--resume", "--force", "-o", "x"],
        "give --resume or --force, not both",
    ),
    "bench-episodes-huge": (
        ["bench", "-n", "100000000000", "--no-speed"],
        "--episodes: must be between 1 and 100000",
    ),
    "bench-repeats-huge": (["bench", "--repeats", "1000000"], "--repeats: must be between 1"),
    "validate-episodes-huge": (
        ["validate", "-n", "1000000000000"],
        "--episodes: must be between 1 and 100000",
    ),
    "validate-screen-huge": (
        ["validate", "--screen-episodes", "10000000"],
        "--screen-episodes: must be between 1",
    ),
    "serve-header-timeout-nan": (
        ["serve-policy", "lru", "--header-timeout", "nan"],
        "--header-timeout: must be a finite number",
    ),
    "cache-replay-price-nan": (
        ["cache-replay", ".", "--price-in", "nan", "--price-cached", "1", "--price-write", "1"],
        "--price-in: must be a finite number",
    ),
    "cache-replay-min-tokens-huge": (
        [*REPLAY, "--cache-min-tokens", str(10**20)],
        "--cache-min-tokens: must be between 0 and 1048576",
    ),
    "cache-replay-multiplier-inf": (
        [*REPLAY, "--cache-buffer-multiplier", "inf"],
        "--cache-buffer-multiplier: must be a finite number",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_out_of_range_options(tmp_path, case):
    args, expected = CASES[case]
    if "-o" not in args and args[0] in ("eval", "context-eval"):
        args = [*args, "-o", str(tmp_path / "o")]
    _expect_error(args, expected)
    assert not (tmp_path / "o").exists(), "nothing may run or be written"


def _deep(tmp_path: Path, depth: int) -> str:
    return str(tmp_path / "/".join(["d"] * depth))


PATH_CASES = {
    "eval-out-long": (["eval", "-p", "noop", "-s", "easy", "-n", "1", "-o"], "--out"),
    "eval-trace-long": (["eval", "-p", "lru", "-n", "1", "--trace"], "--trace"),
    "context-out-long": (["context-eval", "-p", "noop", "-l", "easy", "-n", "1", "-o"], "--out"),
    "report-out-long": (["report", "RUN", "-o"], "--out"),
    "report-run-long": (["report"], "RUNS"),
    "report-dataset-long": (["report", "RUN", "--dataset"], "--dataset"),
    "bench-trace-long": (["bench", "--no-speed", "--trace"], "--trace"),
    "context-reader-long": (
        ["context-eval", "-p", "noop", "-l", "easy", "-n", "1", "--reader"],
        "--reader",
    ),
}


@pytest.mark.parametrize("case", list(PATH_CASES))
def test_a_path_too_long_is_named(tmp_path, case):
    args, option = PATH_CASES[case]
    args = [str(tmp_path) if a == "RUN" else a for a in args]
    path = str(tmp_path / (LONG_NAME + ".jsonl"))
    if option == "--reader":
        path = "hf:" + path
    _expect_error([*args, path], f"{option} ")
    _expect_error([*args, path], "name too long (a component of")


def test_a_path_too_deep_or_too_long_in_all(tmp_path):
    eval_args = ["eval", "-p", "noop", "-s", "easy", "-n", "1", "-o"]
    _expect_error([*eval_args, _deep(tmp_path, 70)], "components deep; at most 64)")
    _expect_error([*eval_args, _deep(tmp_path, 2100)], "bytes; at most 4,096)")
    assert not (tmp_path / "d").exists()


def test_check_path_reads_the_file_systems_name_limit(tmp_path):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    assert check_path(tmp_path / ("a" * limit), "--out") == tmp_path / ("a" * limit)
    with pytest.raises(InputError, match=f"at most {limit}"):
        check_path(tmp_path / ("a" * (limit + 1)), "--out")


def test_a_name_too_long_elsewhere_is_one_line_exit_2(tmp_path, monkeypatch):
    """A path no check saw (built inside a command) that the system calls too long."""
    import errno

    import evals.serving.eval_run

    def too_long(*args, **kwargs):
        raise OSError(errno.ENAMETOOLONG, "File name too long", "/x/" + LONG_NAME)

    monkeypatch.setattr(evals.serving.eval_run, "prepare_run_dir", too_long)
    output = _expect_error(
        ["eval", "-p", "noop", "-s", "easy", "-n", "1", "-o", str(tmp_path / "o")],
        "name too long",
    )
    assert output.strip().splitlines()[-1].startswith("error: /x/ttt")


def test_repeated_names_run_once_with_a_note(tmp_path):
    out = tmp_path / "run"
    args = ["eval", "-p", "noop,noop", "-p", "noop", "-s", "easy,easy", "-n", "1", "--steps", "2"]
    done = runner.invoke(app, [*args, "-j", "1", "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "--policy names noop more than once; run once" in " ".join(done.output.split())
    assert len((out / "results.jsonl").read_text().splitlines()) == 1
    assert names_option(["a, b", "a"], "--policy") == ["a", "b"]
    with pytest.raises(InputError, match="the list is empty"):
        names_option([" , "], "--policy")


def test_parse_weights_keeps_the_one_constructor():
    assert parse_weights('{"latency_penalty": 0.5}', Weights)["latency_penalty"] == 0.5
    assert parse_weights('{"oom_penalty": 2}', ContextWeights)["oom_penalty"] == 2.0
    assert parse_weights('{"oom_penalty": -1e6}', ContextWeights)["oom_penalty"] == -1e6


# --- API keys ---------------------------------------------------------------------------------
BAD_KEYS = {
    "crlf": ("sk-abc\r\nX-Evil: 1", "holds a line break at position 7"),
    "non-ascii": ("sk-abcdéfghijklmn", "holds character 0x00e9 at position 8"),
    "space": ("sk-abc defghijklmn", "holds character 0x0020 at position 7"),
}


@pytest.mark.parametrize("case", list(BAD_KEYS))
@pytest.mark.parametrize("family", ["eval", "context-eval"])
def test_a_key_no_header_can_carry_is_refused_before_any_request(tmp_path, case, family):
    key, expected = BAD_KEYS[case]
    where = ["-s", "easy"] if family == "eval" else ["-l", "easy"]
    args = [family, "-m", "x", "--base-url", "http://192.0.2.1:9/v1", *where, "-n", "1"]
    output = _expect_error(
        [*args, "-o", str(tmp_path / "o")],
        f"environment variable OPENAI_API_KEY: the API key {expected}",
        env={"OPENAI_API_KEY": key},
    )
    assert key not in output and key[:8] not in output.replace("OPENAI_API_KEY", "")
    secrets.forget_secrets()


def test_the_scrubber_removes_a_key_in_any_letter_case():
    secrets.forget_secrets()
    key = "sk-canary-7Hq2Zt9WmXv4Lp8Rk3Nd6Bf1Jc5Ys0Ga"
    secrets.register_secret(key)
    try:
        for shown in (key, key.upper(), key.lower(), key[5:25].swapcase()):
            scrubbed = secrets.scrub(f"the server said: {shown}!")
            assert scrubbed == "the server said: [REDACTED]!", (shown, scrubbed)
        # offsets stay aligned past non-ASCII text; a piece shorter than 8 stays
        assert secrets.scrub("İstanbul " + key.upper() + " ß") == "İstanbul [REDACTED] ß"
        assert secrets.scrub("İstanbul SK-CANA") == "İstanbul SK-CANA"
        assert secrets.scrub("x" + key.upper()[3:12] + "y") == "x[REDACTED]y"
    finally:
        secrets.forget_secrets()


# --- resume across suite versions -----------------------------------------------------------------
def _rewrite(path: Path, indices: tuple[int, ...], **changes: object) -> None:
    lines = path.read_text().splitlines()
    for i in indices:
        line = json.loads(lines[i])
        line.update(changes)
        lines[i] = json.dumps(line, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("family", "args"),
    [
        ("serving", ["eval", "-p", "noop,lru", "-s", "easy", "-n", "2", "--steps", "3", "-j", "1"]),
        ("context", ["context-eval", "-p", "noop", "-l", "easy", "-n", "3"]),
    ],
)
def test_resume_drops_and_reruns_lines_of_another_suite_version(tmp_path, family, args):
    out = tmp_path / "run"
    first = runner.invoke(app, [*args, "-o", str(out)])
    assert first.exit_code == 0, first.output
    whole = (out / "results.jsonl").read_bytes()
    _rewrite(out / "results.jsonl", (0, 2), suite_version="0")
    if family == "serving":
        _rewrite(out / "results.jsonl", (1,), schema_version=1)
    resumed = runner.invoke(app, [*args, "-o", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    dropped = 3 if family == "serving" else 2
    text = " ".join(resumed.output.split())
    assert f"dropped {dropped} line(s) of another schema or suite version" in text, text
    assert (out / "results.jsonl").read_bytes() == whole, "rerun byte-identically"
    report = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output


def test_context_resume_refuses_other_arguments_and_force_moves_aside(tmp_path):
    out = tmp_path / "run"
    args = ["context-eval", "-p", "noop", "-l", "easy", "-n", "1", "-o", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    _expect_error([*args, "--resume", "--seed", "3"], "differs in seed: 0 -> 3")
    _expect_error(
        ["context-eval", "-p", "noop", "-l", "easy", "-n", "1", "--resume"],
        "--resume needs --out",
    )
    moved = runner.invoke(app, [*args, "--force", "--seed", "3"])
    assert moved.exit_code == 0, moved.output
    assert (tmp_path / "run.old-1" / "results.jsonl").exists()
    info = json.loads((out / "run.json").read_text())
    assert info["arguments"]["seed"] == 3 and info["suite_version"]


# --- context family: recall queries, a full archive disk, a stalled endpoint --------------------
def test_a_recall_query_over_the_limit_is_an_invalid_action():
    from kv_context_env.generator.conversation import generate_conversation
    from kv_context_env.llm.agent import call_context_tool
    from kv_context_env.sim.episode import MAX_RECALL_QUERY_CHARS, ContextEpisode
    from model_client.model_output import ToolCall

    with ContextEpisode(generate_conversation(0, "easy")) as episode:
        query = "x" * (MAX_RECALL_QUERY_CHARS + 1)
        call = ToolCall(id="1", name="recall", arguments=json.dumps({"query": query}))
        assert call_context_tool(episode, call) == (
            "error: a recall query of 2,001 characters; at most 2,000 (a few words of what to find)"
        )
        fits = ToolCall(id="2", name="recall", arguments=json.dumps({"query": "y" * 2000}))
        assert not call_context_tool(episode, fits).startswith("error: a recall query")
        record = episode.record()
        assert record.invalid_actions == 1 and record.recalls == 1
        while not episode.done:  # the episode goes on
            episode.enforce()
            episode.step(answer="" if episode.pending_question else None)


def test_a_full_archive_disk_is_cannot_write_and_resume_finishes(tmp_path, monkeypatch):
    import errno

    from kv_context_env.sim import archive

    # -j 1: the fault is injected into this process's archive
    args = ["context-eval", "-p", "noop,sliding-window", "-l", "easy", "-n", "2", "-j", "1"]
    whole = runner.invoke(app, [*args, "-o", str(tmp_path / "whole")])
    assert whole.exit_code == 0, whole.output
    real = archive.TurnArchive.archive
    calls = {"n": 0}

    def fills_up(self, turn, step):
        calls["n"] += 1
        if calls["n"] > 150:  # past the first episodes' archivals
            raise archive.ArchiveWriteError(errno.ENOSPC, "database or disk is full", self.path)
        return real(self, turn, step)

    monkeypatch.setattr(archive.TurnArchive, "archive", fills_up)
    out = tmp_path / "run"
    done = runner.invoke(app, [*args, "-o", str(out)])
    assert done.exit_code == 1, done.output
    last = done.output.strip().splitlines()[-1]
    assert last.startswith("error: cannot write ") and "(ENOSPC)" in last, done.output
    kept = (out / "results.jsonl").read_bytes()
    assert 0 < kept.count(b"\n") < 4 and kept.endswith(b"\n")
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "error" and "database or disk is full" in info["error"]
    monkeypatch.setattr(archive.TurnArchive, "archive", real)
    resumed = runner.invoke(app, [*args, "-o", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert (out / "results.jsonl").read_bytes() == (
        tmp_path / "whole" / "results.jsonl"
    ).read_bytes()


def test_a_full_tmpdir_fails_the_archive_with_its_path(tmp_path, monkeypatch):
    import errno
    import tempfile

    from kv_context_env.generator.conversation import generate_conversation
    from kv_context_env.sim.archive import ArchiveWriteError
    from kv_context_env.sim.episode import ContextEpisode

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "kvctx-x"))

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    with pytest.raises(ArchiveWriteError) as caught:
        ContextEpisode(generate_conversation(0, "easy"))
    assert caught.value.errno == errno.ENOSPC and caught.value.filename.endswith("kvctx-x")


def test_context_eval_takes_the_client_options_and_stops_a_stalled_stream(tmp_path):
    """A server that sends headers and never ends its body: --timeout cuts each attempt."""
    import socket
    import threading
    import time

    from evals.common.raw_http import read_request, serve_raw

    def stall(conn: socket.socket) -> None:
        with conn:
            if read_request(conn) is None:
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            conn.sendall(b"Content-Length: 1000\r\n\r\n{")
            time.sleep(8)

    listener, port = serve_raw(stall)
    endpoint = [
        "context-eval",
        "-m",
        "x",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "-l",
        "easy",
    ]
    started = time.monotonic()
    try:
        done = runner.invoke(
            app,
            [
                *endpoint,
                "-n",
                "2",
                "--timeout",
                "1",
                "--max-retries",
                "0",
                "-o",
                str(tmp_path / "r"),
            ],
        )
    finally:
        listener.close()
    assert done.exit_code == 3, done.output
    assert time.monotonic() - started < 30
    lines = [
        json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()
    ]
    assert [r["status"] for r in lines] == ["failed", "failed"]
    assert all("APITimeoutError" in r["error"] for r in lines), lines[0]["error"]
    assert threading.active_count() < 50


def test_a_trace_over_the_request_limit_is_refused_where_it_passes(tmp_path, monkeypatch):
    from kv_cache_env import limits
    from kv_cache_env.traces import replay

    monkeypatch.setattr(limits, "MAX_TRACE_REQUESTS", 3)
    monkeypatch.setattr(replay, "MAX_TRACE_REQUESTS", 3)
    good = '{"timestamp": %d, "input_length": 600, "output_length": 5, "hash_ids": [%d, %d]}\n'
    path = tmp_path / "t.jsonl"
    path.write_text("".join(good % (i * 1000, 2 * i + 1, 2 * i + 2) for i in range(5)))
    _expect_error(
        ["eval", "-p", "lru", "--trace", str(path), "-o", str(tmp_path / "o")],
        "t.jsonl:4: more than 3 requests, the most a trace replay accepts",
    )
    csv = tmp_path / "t.csv"
    rows = "".join(f"2023-11-16 18:15:4{i}.00,100,5\n" for i in range(5))
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    _expect_error(
        ["eval", "-p", "lru", "--trace", str(csv), "-o", str(tmp_path / "o")],
        "t.csv:5: more than 3 requests",
    )
    assert limits.MAX_TRACE_REQUESTS == 3
