"""`kvarena report` against hostile results: names that are markup, Markdown structure, control
characters or megabytes long; numbers out of range; duplicated lines; and 2,000 agents (the
figures stay bounded; the timing itself is `scripts/bench_report.py`'s)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.results import dumps
from evals.report.display import display_name, markdown_cell
from evals.report.figures import FIGURE_AGENTS
from evals.serving.jobs import EpisodeJob, run_job
from kv_cache_env.episodes import EpisodeSpec

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def line() -> dict:
    return run_job(EpisodeJob("lru", EpisodeSpec("easy", 0, steps=3)))


def _report(tmp_path: Path, lines: list[dict], *extra: str):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(dumps(x) + "\n" for x in lines))
    return runner.invoke(app, ["report", str(path), "-o", str(tmp_path / "rep"), *extra])


NAMES = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "a|b|c",
    "x\n# pwned",
    "[click](javascript:alert(1))",
    "`code` and \\ back",
    "nul\x00byte",
]


def test_names_are_escaped_for_markdown_and_html(tmp_path, line):
    done = _report(tmp_path, [dict(line, agent=name) for name in NAMES])
    assert done.exit_code == 0, done.output
    board = (tmp_path / "rep" / "leaderboard.md").read_text()
    page = (tmp_path / "rep" / "index.html").read_text()
    for raw in ("<script>", "<img", "\n# pwned", "[click]", "`code`", "\x00"):
        assert raw not in board, raw
    for raw in ("<script>alert", "<img src", "\x00"):
        assert raw not in page, raw
    # every row of a table has its header's cells: a | in a name adds none
    for table in re.split(r"\n\n+", board):
        rows = [r for r in table.splitlines() if r.startswith("| ")]
        assert len({r.count(" | ") for r in rows}) <= 1, table[:200]
    assert "a&#124;b&#124;c" in board and "a|b|c" in page


def test_long_names_are_cut_for_display_only(tmp_path, line):
    long_a, long_b = "a" * 100_000, "a" * 99_999 + "b"
    done = _report(tmp_path, [dict(line, agent=long_a), dict(line, agent=long_b)])
    assert done.exit_code == 0, done.output
    board = (tmp_path / "rep" / "leaderboard.md").read_text()
    page = (tmp_path / "rep" / "index.html").read_text()
    assert display_name(long_a) in board and display_name(long_b) in board
    assert display_name(long_a) != display_name(long_b)  # cut names stay apart
    assert len(board) < 20_000 and len(page) < 200_000
    assert len(display_name(long_a)) == 80


def test_markdown_cell_escapes_structure():
    assert markdown_cell("a|b") == "a&#124;b"
    assert markdown_cell("x\ny") == "x y"
    assert markdown_cell("<b>&") == "&lt;b&gt;&amp;"
    assert markdown_cell("+0.123 ± 0.010") == "+0.123 ± 0.010"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"usage": {"input_tokens": 10**40, "cached_input_tokens": 0, "output_tokens": 1}},
            "usage must be an object of integers between 0 and 2^53",
        ),
        ({"reward": 1e300}, "reward must be a finite number of size at most 1e12"),
        ({"seed": 10**30}, "seed must be between 0 and 2^63 - 1"),
        ({"seed": -1}, "seed must be between 0 and 2^63 - 1"),
    ],
    ids=["usage-huge", "reward-huge", "seed-huge", "seed-negative"],
)
def test_numbers_out_of_range_are_refused_before_arithmetic(tmp_path, line, change, message):
    prices = ("--price-in", "1", "--price-cached", "1", "--price-write", "1")
    done = _report(tmp_path, [dict(line, **change)], *prices)
    assert done.exit_code == 2, done.output
    assert message in " ".join(done.output.split()), done.output
    assert "unexpected" not in done.output


def test_an_integer_of_thousands_of_digits_is_refused(tmp_path, line):
    text = dumps(line).replace('"usage":null', '"usage":{"input_tokens":' + "9" * 5000 + "}")
    (tmp_path / "results.jsonl").write_text(text + "\n")
    done = runner.invoke(app, ["report", str(tmp_path / "results.jsonl"), "-o", "x"])
    assert done.exit_code == 2 and "an integer of more than 4,300 digits" in done.output


def test_prices_must_be_finite_and_in_range(tmp_path, line):
    prices = ("--price-in", "inf", "--price-cached", "1", "--price-write", "1")
    done = _report(tmp_path, [line], *prices)
    assert done.exit_code == 2 and "--price-in: must be a finite number" in done.output


def test_identical_duplicates_count_once_and_differing_ones_are_refused(tmp_path, line):
    done = _report(tmp_path, [line] * 50)
    assert done.exit_code == 0, done.output
    assert "49 duplicate line(s)" in " ".join(done.output.split())
    board = (tmp_path / "rep" / "leaderboard.md").read_text()
    assert "| easy | lru | 1 | 0 |" in board  # n = 1, not 50
    other = dict(line, reward=line["reward"] + 0.1)
    other["components"] = dict(line["components"])
    other["components"]["throughput_reward"] += 0.1 / line["weights"]["throughput_reward"]
    done = _report(tmp_path, [line, other])
    assert done.exit_code == 2, done.output
    flat = done.output.replace("\n", "")
    assert re.search(r"results.jsonl:2: lru on easy seed 0 is also at .*results.jsonl:1", flat)


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "scripts/bench_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_thousand_agents_finish_with_bounded_figures(tmp_path):
    """2,000 agents x 5 scenarios (the benchmark script's data): the report finishes (a hang
    guard of 10 minutes, far above its time) and each figure draws at most FIGURE_AGENTS
    agents, whatever the number of agents."""
    results = tmp_path / "results.jsonl"
    assert _bench_module().synthetic_results(results, agents=2000, scenarios=5) == 10_000
    done = subprocess.run(
        [sys.executable, "-m", "evals.cli", "report", str(results), "-o", str(tmp_path / "rep")],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    page = (tmp_path / "rep" / "index.html").read_text()
    figures = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert figures, "the figures are drawn"
    for svg in figures:
        assert len(svg) < 200_000
        assert len(set(re.findall(r"agent-\d{4}", svg))) <= FIGURE_AGENTS
    assert "1,980 more agents" in page  # said in the figure titles
    assert page.count("<tr") > 10_000  # every agent x scenario row is in the table


@pytest.mark.parametrize("run_json", ["[" * 100_000, '{"arguments": 5}', "\x00\xff", "[]"])
def test_a_hostile_run_json_beside_the_results_is_ignored(tmp_path, line, run_json):
    """The report reads a run's run.json to match the shipped reference table: whatever it
    holds, the report goes on without the table."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(dumps(line) + "\n")
    (run / "run.json").write_bytes(run_json.encode("utf-8", "surrogateescape"))
    done = runner.invoke(app, ["report", str(run), "-o", str(tmp_path / "rep")])
    assert done.exit_code == 0, done.output


def test_a_line_with_an_unknown_status_is_refused_not_a_crash(tmp_path, line):
    done = _report(tmp_path, [dict(line, status="maybe", components=None, metrics=None)])
    assert done.exit_code == 2, done.output
    assert "status must be 'ok' or 'failed', got 'maybe'" in " ".join(done.output.split())


# --- context lines: the same guarantees ------------------------------------------------------


@pytest.fixture(scope="module")
def context_line() -> dict:
    """A context result as `kvarena context-eval` writes it (the golden run's first line)."""
    return json.loads((ROOT / "tests/golden/context.jsonl").read_bytes().splitlines()[0])


def test_context_names_are_escaped_for_markdown_and_html(tmp_path, context_line):
    lines = [dict(context_line, agent=name) for name in NAMES]
    lines += [dict(context_line, reader=name) for name in NAMES]
    lines += [dict(context_line, level=name) for name in NAMES]
    done = _report(tmp_path, lines)
    assert done.exit_code == 0, done.output
    board = (tmp_path / "rep" / "leaderboard.md").read_text()
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "## Context family: every agent on every level" in board
    for raw in ("<script>", "<img", "\n# pwned", "[click]", "`code`", "\x00"):
        assert raw not in board, raw
    for raw in ("<script>alert", "<img src", "\x00"):
        assert raw not in page, raw
    for table in re.split(r"\n\n+", board):
        rows = [r for r in table.splitlines() if r.startswith("| ")]
        assert len({r.count(" | ") for r in rows}) <= 1, table[:200]
    assert "### Reader a&#124;b&#124;c" in board  # a reader's heading, escaped


def test_long_context_names_are_cut_for_display_only(tmp_path, context_line):
    long_a, long_b = "r" * 100_000, "r" * 99_999 + "s"
    done = _report(tmp_path, [dict(context_line, reader=long_a), dict(context_line, reader=long_b)])
    assert done.exit_code == 0, done.output
    board = (tmp_path / "rep" / "leaderboard.md").read_text()
    page = (tmp_path / "rep" / "index.html").read_text()
    assert display_name(long_a) in board and display_name(long_b) in board
    assert len(board) < 20_000 and len(page) < 200_000


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"components": {"answer_quality": 1.0}}, "components must be exactly"),
        ({"metrics": {"rouge_l": 1.0}}, "metrics must be exactly"),
        ({"reward": 1e300}, "reward must be a finite number of size at most 1e12"),
        ({"seed": -1}, "seed must be between 0 and 2^63 - 1"),
        ({"level": 5}, "level must be a string, got number"),
        ({"reader": None}, "reader must be a string, got null"),
        ({"suite_version": ["3"]}, "suite_version must be a string, got array"),
        ({"status": "maybe", "components": None}, "status must be 'ok' or 'failed'"),
        ({"status": "failed"}, "a failed episode has no reward"),
        ({"usage": {"input_tokens": 1}}, "usage must hold"),
        ({"record": "x"}, "record must be an object, got string"),
    ],
    ids=[
        "components",
        "metrics",
        "reward-huge",
        "seed-negative",
        "level-number",
        "reader-null",
        "suite-array",
        "status-unknown",
        "failed-with-reward",
        "usage-short",
        "record-string",
    ],
)
def test_bad_context_lines_are_refused_naming_file_and_line(
    tmp_path, context_line, change, message
):
    done = _report(tmp_path, [context_line, dict(context_line, seed=1) | change])
    assert done.exit_code == 2, done.output
    flat = " ".join(done.output.split())
    assert "results.jsonl:2:" in flat.replace(" ", "") and message in flat, done.output
    assert "unexpected" not in done.output


def test_a_line_of_neither_family_is_refused_saying_why(tmp_path):
    (tmp_path / "results.jsonl").write_text('{"agent": "x", "seed": 0}\n')
    done = runner.invoke(app, ["report", str(tmp_path), "-o", str(tmp_path / "rep")])
    assert done.exit_code == 2
    assert (
        "results.jsonl:1: neither a serving result (no schema_version or scenario) nor a "
        "context result (no level or reader)"
    ) in "".join(done.output.split("\n"))


def test_context_duplicates_count_once_and_differing_ones_are_refused(tmp_path, context_line):
    done = _report(tmp_path, [context_line] * 3)
    assert done.exit_code == 0, done.output
    assert "2 duplicate line(s)" in " ".join(done.output.split())
    other = dict(context_line, reader="hf:some-model")  # another reader: another episode
    done = _report(tmp_path, [context_line, other])
    assert done.exit_code == 0, done.output
    changed = dict(context_line, reward=context_line["reward"] - 0.5)
    done = _report(tmp_path, [context_line, changed])
    assert done.exit_code == 2, done.output
    flat = done.output.replace("\n", "")
    assert re.search(
        r"results.jsonl:2: noop \(reader extractive\) on easy seed 0 is also at .*results.jsonl:1",
        flat,
    )


def test_context_figures_stay_bounded_however_many_readers(tmp_path, context_line):
    from evals.report.context_board import FIGURE_READERS

    lines = [
        dict(context_line, reader=f"reader-{i:03d}", agent=agent, reward=reward)
        for i in range(50)
        for agent, reward in (("noop", 0.1), ("oracle", 0.9), ("trt-lru", 0.5))
    ]
    done = _report(tmp_path, lines)
    assert done.exit_code == 0, done.output
    page = (tmp_path / "rep" / "index.html").read_text()
    assert page.count("<svg") == 2 * FIGURE_READERS  # score by level, components
    assert f"{50 - FIGURE_READERS} more reader(s) in the tables" in page
    assert page.count("<table class='sortable compact' id='context-ranking-") == 50
