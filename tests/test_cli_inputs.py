"""Malformed inputs to `kvarena`, table-driven: each case must exit 2 with its own message (the
option's name or FILE:LINE), never a traceback and never the catch-all "unexpected" line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.results import dumps
from evals.serving.jobs import EpisodeJob, run_job
from kv_cache_env.episodes import EpisodeSpec

runner = CliRunner()
GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}'


def _mooncake(line: str) -> str:
    return GOOD + "\n" + line + "\n"


def _azure(row: str) -> str:
    return "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,100,5\n" + row + "\n"


TRACE_CASES = {
    "binary": (b"\x00\x01\xff\xfe" * 40, "t.jsonl:1: not UTF-8 text"),
    "binary-line-3": (
        (GOOD + "\n" + GOOD + "\n").encode() + b"\xff\n",
        "t.jsonl:3: not UTF-8 text",
    ),
    "nan-ts": (
        _mooncake(GOOD.replace('"timestamp": 0', '"timestamp": NaN')),
        "t.jsonl:2: timestamp must be finite",
    ),
    "inf-ts": (
        _mooncake(GOOD.replace('"timestamp": 0', '"timestamp": Infinity')),
        "t.jsonl:2: timestamp must be finite",
    ),
    "huge-ts": (
        _mooncake(GOOD.replace('"timestamp": 0', '"timestamp": 1e300')),
        "t.jsonl:2: timestamp is 1e+297 s",
    ),
    "1e12-ms": (
        _mooncake(GOOD.replace('"timestamp": 0', '"timestamp": 1e12')),
        "t.jsonl:2: timestamp is 1e+09 s",
    ),
    "negative-ts": (
        _mooncake(GOOD.replace('"timestamp": 0', '"timestamp": -5')),
        "t.jsonl:2: timestamp is -0.005 s",
    ),
    "string-ts": (
        _mooncake(GOOD.replace('"timestamp": 0', '"timestamp": "soon"')),
        "t.jsonl:2: timestamp must be a number",
    ),
    "bool-ts": (
        _mooncake(GOOD.replace('"timestamp": 0', '"timestamp": true')),
        "t.jsonl:2: timestamp must be a number",
    ),
    "huge-input": (
        _mooncake(
            '{"timestamp": 1, "input_length": 1000000000000000, "output_length": 5, "hash_ids": []}'
        ),
        "t.jsonl:2: input_length 1000000000000000 exceeds the largest request",
    ),
    "huge-output": (
        _mooncake(GOOD.replace('"output_length": 5', '"output_length": 2000000')),
        "t.jsonl:2: output_length 2000000 exceeds",
    ),
    "nan-length": (
        _mooncake(GOOD.replace('"output_length": 5', '"output_length": NaN')),
        "t.jsonl:2: output_length must be an integer",
    ),
    "float-length": (
        _mooncake(GOOD.replace('"output_length": 5', '"output_length": 1e300')),
        "t.jsonl:2: output_length must be an integer",
    ),
    "not-object": (_mooncake("[1, 2]"), "t.jsonl:2: not a JSON object"),
    "missing-field": (_mooncake('{"timestamp": 1}'), "t.jsonl:2: missing field 'input_length'"),
    "empty": ("\n\n", "t.jsonl: the trace holds no requests"),
}
AZURE_CASES = {
    "azure-binary": (
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n\x00\x00\n",
        "t.csv:2: not UTF-8 text",
    ),
    "azure-span": (_azure("9999-01-01 00:00:00,100,5"), "t.csv:3: TIMESTAMP is"),
    "azure-huge": (
        _azure("2023-11-16 18:15:47.00,1000000000000000,5"),
        "t.csv:3: ContextTokens 1000000000000000 exceeds",
    ),
    "azure-negative": (
        _azure("2023-11-16 18:15:47.00,-4,5"),
        "t.csv:3: ContextTokens must be >= 0",
    ),
    "azure-nan": (
        _azure("2023-11-16 18:15:47.00,nan,5"),
        "t.csv:3: ContextTokens must be an integer",
    ),
    "azure-columns": (_azure("2023-11-16 18:15:47.00,4"), "t.csv:3: expected 3 columns"),
    "azure-header": ("TIME,A,B\n", "t.csv:1: expected header"),
    "azure-field": (_azure('"' + "x" * 200_000 + '"'), "t.csv:3: a line longer than 64 KiB"),
}


@pytest.mark.parametrize("case", [*TRACE_CASES, *AZURE_CASES])
def test_bad_trace_files(tmp_path, case):
    content, expected = {**TRACE_CASES, **AZURE_CASES}[case]
    path = tmp_path / ("t.csv" if case.startswith("azure") else "t.jsonl")
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _expect_error(["eval", "-p", "lru", "--trace", str(path), "-o", str(tmp_path / "o")], expected)
    assert not (tmp_path / "o").exists(), "nothing may run or be written"


EVAL_OPTION_CASES = {
    "timeout-nan": (["--timeout", "nan"], "--timeout: must be a finite number"),
    "timeout-inf": (["--timeout", "inf"], "--timeout: must be a finite number, got inf"),
    "timeout-huge": (["--timeout", "1e300"], "--timeout: must be between 1 and 3600"),
    "temperature-nan": (["--temperature", "nan"], "--temperature: must be a finite number"),
    "temperature-high": (["--temperature", "7"], "--temperature: must be between 0 and 2"),
    "seed-negative": (["--seed", "-1"], "--seed: must be between 0"),
    "steps-huge": (["--steps", "1000000000000"], "--steps: must be between 1 and 10000,"),
    "episodes-huge": (["-n", "1000000000"], "--episodes: must be between 1 and 100000"),
    "concurrency-huge": (["-c", "100000"], "--concurrency: must be between 1 and 256"),
    "max-tokens-huge": (["--max-tokens", "100000000000"], "--max-tokens: must be between"),
    "weights-nan": (["--weights", '{"failure_penalty": NaN}'], "--weights: NaN is not a number"),
    "weights-inf": (
        ["--weights", '{"failure_penalty": -Infinity}'],
        "--weights: -Infinity is not a number",
    ),
    "weights-huge": (
        ["--weights", '{"failure_penalty": 1e300}'],
        "--weights: failure_penalty must be finite and at most 1e+06",
    ),
    "weights-string": (
        ["--weights", '{"failure_penalty": "x"}'],
        '--weights: failure_penalty must be a number, got "x"',
    ),
    "weights-null": (
        ["--weights", '{"failure_penalty": null}'],
        "--weights: failure_penalty must be a number, got null",
    ),
    "weights-list": (["--weights", "[1]"], "--weights: expected a JSON object"),
    "weights-unknown": (
        ["--weights", '{"speed": 1}'],
        "--weights: unknown rubric component 'speed'; known: failure_penalty,",
    ),
    "weights-broken": (["--weights", "{"], "--weights: not JSON"),
    "weights-deep": (["--weights", "[" * 5000], "--weights: not JSON"),
    "resume-force": (["--resume", "--force", "-o", "x"], "give --resume or --force, not both"),
}


@pytest.mark.parametrize("case", list(EVAL_OPTION_CASES))
def test_bad_eval_options(tmp_path, case):
    extra, expected = EVAL_OPTION_CASES[case]
    args = ["eval", "-p", "noop", "-s", "easy", "-n", "1", *extra]
    if "-o" not in extra:
        args += ["-o", str(tmp_path / "o")]
    _expect_error(args, expected)


def test_bad_out_directories(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for command in (
        ["eval", "-p", "noop", "-s", "easy", "-n", "1"],
        ["context-eval", "-p", "noop", "-l", "easy", "-n", "1"],
    ):
        _expect_error(
            [*command, "-o", str(a_file)], f"--out {a_file}: exists and is not a directory"
        )
        _expect_error(
            [*command, "-o", str(a_file / "sub")], f"--out {a_file / 'sub'}: cannot create it"
        )


def test_context_eval_options(tmp_path):
    out = ["-o", str(tmp_path / "c")]
    base = ["context-eval", "-p", "noop", "-l", "easy", "-n", "1", *out]
    _expect_error(
        [*base, "--weights", '{"oom_penalty": "x"}'],
        '--weights: oom_penalty must be a number, got "x"',
    )
    _expect_error([*base, "--weights", '{"oom_penalty": NaN}'], "--weights: NaN is not a number")
    _expect_error(
        [*base, "--weights", '{"latency": 1}'], "--weights: unknown context component 'latency'"
    )
    _expect_error([*base, "--seed", "-3"], "--seed: must be between 0")
    _expect_error([*base, "--max-blocks", "1e9"], "'--max-blocks'")  # click: not an integer


def test_resume_refuses_a_different_run_and_force_starts_fresh(tmp_path):
    out = tmp_path / "run"
    args = ["eval", "-p", "noop", "-s", "easy", "-n", "2", "--steps", "3", "-o", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    _expect_error([*args], f"--out {out} already holds results.jsonl")
    _expect_error(
        [*args, "--resume", "--weights", '{"failure_penalty": 3}'],
        "--resume: "
        + str(out / "run.json")
        + ' differs in weights: {} -> {"failure_penalty": 3.0}',
    )
    _expect_error([*args, "--resume", "--seed", "4"], "differs in seed: 0 -> 4")
    _expect_error([*args, "--resume", "-n", "1"], "episodes: 2 -> 1 (-n may only grow)")
    grown = runner.invoke(app, [*args, "--resume", "-n", "3", "-j", "2"])
    assert grown.exit_code == 0, grown.output
    assert len((out / "results.jsonl").read_text().splitlines()) == 3
    assert json.loads((out / "run.json").read_text())["arguments"]["episodes"] == 3
    fresh = runner.invoke(app, [*args, "--force", "--weights", '{"failure_penalty": 3}'])
    assert fresh.exit_code == 0, fresh.output
    assert len((tmp_path / "run.old-1" / "results.jsonl").read_text().splitlines()) == 3
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(r["weights"]["failure_penalty"] == 3 for r in lines)
    (out / "run.json").unlink()
    _expect_error(
        [*args, "--resume", "--weights", '{"failure_penalty": 3}'],
        "run.json is missing or unreadable",
    )


@pytest.fixture(scope="module")
def good_line() -> dict:
    return run_job(EpisodeJob("noop", EpisodeSpec("easy", 0, steps=3)))


def _edit(result: dict, path: str, value: object) -> dict:
    copy = json.loads(json.dumps(result))
    *head, last = path.split(".")
    target = copy
    for key in head:
        target = target[key]
    target[last] = value
    return copy


REPORT_CASES = {
    "components-null": (
        "components",
        None,
        "results.jsonl:2: components must be an object, got null",
    ),
    "reward-string": (
        "reward",
        "high",
        "results.jsonl:2: reward must be a finite number of size at most 1e12, got string",
    ),
    "series-string": (
        "series.usage",
        "abc",
        "results.jsonl:2: series.usage must be an array of finite numbers",
    ),
    "seed-string": ("seed", "3", "results.jsonl:2: seed must be an integer, got string"),
    "metrics-list": ("metrics", [1], "results.jsonl:2: metrics must be an object, got array"),
    "usage-negative": (
        "usage",
        {"input_tokens": -1},
        "results.jsonl:2: usage must be an object of integers between 0 and 2^53",
    ),
    "weights-missing": ("weights", {}, "results.jsonl:2: weights lack"),
    "status-odd": ("status", "maybe", "results.jsonl:2: status must be 'ok' or 'failed'"),
}


@pytest.mark.parametrize("case", [*REPORT_CASES, "nan", "binary", "not-json", "array", "out-file"])
def test_bad_results_for_report(tmp_path, good_line, case):
    runs = tmp_path / "results.jsonl"
    out = ["-o", str(tmp_path / "rep")]
    if case in REPORT_CASES:
        path, value, expected = REPORT_CASES[case]
        second = dumps(_edit(good_line, path, value))
    elif case == "nan":
        second = dumps(good_line).replace('"reward":', '"reward":NaN,"x":', 1)
        expected = "results.jsonl:2: NaN is not a finite number"
    elif case == "binary":
        second = "\udcff\udcfe"
        expected = "results.jsonl:2: not UTF-8 text"
    elif case == "not-json":
        second = '{"agent": '
        expected = "results.jsonl:2: not JSON"
    elif case == "array":
        second = "[1, 2]"
        expected = "results.jsonl:2: not a JSON object"
    else:
        second = dumps(good_line)
        (tmp_path / "f").write_text("x")
        out = ["-o", str(tmp_path / "f")]
        expected = f"--out {tmp_path / 'f'}: exists and is not a directory"
    runs.write_bytes((dumps(good_line) + "\n" + second + "\n").encode("utf-8", "surrogateescape"))
    _expect_error(["report", str(runs), *out], expected)


def test_report_on_a_missing_run(tmp_path):
    _expect_error(["report", str(tmp_path / "nope")], "no results.jsonl here")


def _expect_error(args: list[str], expected: str) -> None:
    done = runner.invoke(app, args)
    flat = "".join(done.output.split())
    assert done.exit_code == 2, (args, done.exit_code, done.output)
    assert "".join(expected.split()) in flat, (expected, done.output)
    assert "Traceback" not in done.output and "unexpected" not in done.output


def test_an_unexpected_error_is_one_line_and_run_json_says_error(tmp_path, monkeypatch):
    import evals.serving.eval_run

    calls = []

    def flaky(job):
        calls.append(job)
        if len(calls) == 2:
            raise RuntimeError("boom\nsecond line")
        return run_job(job)

    monkeypatch.setattr(evals.serving.eval_run, "run_job", flaky)
    out = tmp_path / "run"
    args = [
        "eval",
        "-p",
        "noop",
        "-s",
        "easy",
        "-n",
        "3",
        "--steps",
        "2",
        "-j",
        "1",
        "-o",
        str(out),
    ]
    done = runner.invoke(app, args)
    assert done.exit_code == 1
    assert done.output.strip().splitlines()[-1:] == [
        "error: unexpected RuntimeError: boom second line (a bug; rerun with --debug for the "
        "traceback)"
    ]
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "error" and info["episodes_run"] == 1
    assert len((out / "results.jsonl").read_text().splitlines()) == 1
    calls.clear()
    debug = runner.invoke(app, ["--debug", *args, "--force"])
    assert isinstance(debug.exception, RuntimeError)


def test_a_closed_output_pipe_is_no_bug(monkeypatch):
    """`kvarena scenarios | head -1`: when the reader has gone, writing raises BrokenPipeError.
    That ends the command with status 1 and no "unexpected ... (a bug" line (typer's own
    handler silences the streams), as `git log | head` ends."""
    import errno

    import rich.console

    def closed_pipe(*args, **kwargs):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(rich.console.Console, "print", closed_pipe)
    done = runner.invoke(app, ["scenarios"])
    assert done.exit_code == 1
    assert "unexpected" not in done.output and "Traceback" not in done.output
