"""`kvarena report` over both families: serving and context runs given together make one
leaderboard with a section per family; a directory of context runs alone reports too; the line
reader recognises each family's results as they are written today (the golden runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.result_check import family_of, parse_line
from evals.report.build import ReportError, build_report, load_results, to_dataset
from kv_cache_env.sim import SUITE_VERSION
from kv_context_env import CONTEXT_SUITE_VERSION

runner = CliRunner()
GOLDEN = Path(__file__).parent / "golden"

# one worker plays both runs (about 6 s) for every test of the module
pytestmark = pytest.mark.xdist_group("report-families")


@pytest.fixture(scope="module")
def serving_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serving") / "run"
    done = runner.invoke(
        app, ["eval", "-p", "noop,lru,bound", "-s", "easy,hard", "-n", "2", "-o", str(out)]
    )
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture(scope="module")
def context_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("context") / "run"
    done = runner.invoke(
        app,
        ["context-eval", "-p", "noop,trt-lru,oracle", "-l", "easy", "-n", "2", "-o", str(out)],
    )
    assert done.exit_code == 0, done.output
    return out


def _report(tmp_path: Path, *runs: Path) -> tuple[str, str]:
    out = tmp_path / "rep"
    done = runner.invoke(app, ["report", *map(str, runs), "-o", str(out)])
    assert done.exit_code == 0, done.output
    return (out / "leaderboard.md").read_text(), (out / "index.html").read_text()


def test_serving_and_context_runs_make_one_leaderboard(tmp_path, serving_run, context_run):
    board, page = _report(tmp_path, serving_run, context_run)
    # the serving section first, as a report of the serving run alone shows it
    alone, _ = _report(tmp_path / "alone", serving_run)
    assert board.startswith(alone)
    context = board[len(alone) :]
    assert context.index("## Context family: ranking") < context.index(
        "## Context family: every agent on every level"
    )
    assert f"Context suite version {CONTEXT_SUITE_VERSION}" in context
    for agent in ("noop", "trt-lru", "oracle"):
        assert f"| {agent} |" in context
    # both families' ranking tables are on the page, the serving one first
    assert page.index("id='ranking'") < page.index("id='context-ranking-1'")
    assert page.index("id='leaderboard'") < page.index("id='context-leaderboard'")
    assert (
        f"Serving suite v{SUITE_VERSION}, context suite v{CONTEXT_SUITE_VERSION}; 2 run(s)" in page
    )


def test_context_runs_alone_are_ranked_between_noop_and_the_oracle(tmp_path, context_run):
    results = load_results([context_run])
    rows = build_report(results, tmp_path, [str(context_run)])
    assert len(rows) == 3  # one level x three agents, readers all extractive
    by = {row.agent: row for row in rows}

    def mean(agent: str) -> float:
        rewards = [r["reward"] for r in results if r["agent"] == agent]
        assert len(rewards) == 2
        return sum(rewards) / 2

    assert by["noop"].normalized == pytest.approx(0.0)
    assert by["oracle"].normalized == pytest.approx(1.0)
    share = (mean("trt-lru") - mean("noop")) / (mean("oracle") - mean("noop"))
    assert by["trt-lru"].normalized == pytest.approx(share)
    assert by["trt-lru"].to_top[0] == pytest.approx(mean("oracle") - mean("trt-lru"))
    board = (tmp_path / "leaderboard.md").read_text()
    assert "## Ranking" not in board  # no serving section without serving results
    ranking = board.split("## Context family: ranking")[1].split("## Context family: every")[0]
    ranked = [line.split(" | ")[2] for line in ranking.splitlines() if line.startswith("| ")]
    assert ranked[1:] == ["oracle", "trt-lru", "noop"]  # after the header, best first
    assert "(oracle − noop)" in board and "### Reader extractive" in board
    detail = board.split("## Context family: every agent on every level")[1]
    assert "| easy | oracle | extractive | 2 | 0 |" in detail
    assert "answer_quality" in detail and "recalls" in detail


def test_golden_results_of_both_families_are_recognised():
    """Every golden results file, as the commands write them today: policies, planners, trace
    replays, a model run with token usage (prompt-cache) and the context baselines."""
    files = sorted(GOLDEN.glob("*.jsonl"))
    assert {f.stem for f in files} >= {"serving", "trace-azure", "prompt-cache", "context"}
    for file in files:
        family = "context" if file.stem == "context" else "serving"
        lines = file.read_bytes().splitlines()
        assert lines
        for line in lines:
            result, problems = parse_line(line, families=("serving", "context"))
            assert result is not None, (file.name, problems)
            assert family_of(result) == family


def test_a_context_line_is_not_a_serving_result_where_only_serving_is_read():
    line = (GOLDEN / "context.jsonl").read_bytes().splitlines()[0]
    result, problems = parse_line(line)  # resuming a serving run reads serving lines only
    assert result is None and problems == [
        "a context result (it has level and reader), where serving results are read"
    ]


def test_a_results_file_with_both_families_and_the_dataset(tmp_path, serving_run, context_run):
    mixed = tmp_path / "results.jsonl"
    mixed.write_bytes(
        (serving_run / "results.jsonl").read_bytes() + (context_run / "results.jsonl").read_bytes()
    )
    results = load_results([mixed])
    assert {family_of(r) for r in results} == {"serving", "context"}
    dataset = to_dataset(results)
    assert dataset.num_rows == len(results)
    context = [row for row in dataset if row["family"] == "context"]
    assert len(context) == 6 and {row["reader"] for row in context} == {"extractive"}
    assert all(row["scenario"] is None and row["level"] == "easy" for row in context)
    assert set(context[0]["components"]) >= {"answer_quality", "recall_cost"}
    serving = next(row for row in dataset if row["family"] == "serving")
    assert serving["level"] is None and json.loads(serving["record"])["turns"] == 15


def test_context_suite_versions_are_not_mixed(tmp_path, context_run):
    lines = (context_run / "results.jsonl").read_text().splitlines()
    older = json.loads(lines[0]) | {"suite_version": "2.1"}
    (tmp_path / "results.jsonl").write_text(json.dumps(older) + "\n")
    with pytest.raises(ReportError, match=r"context results of different suite versions"):
        load_results([context_run, tmp_path])
    with pytest.raises(ReportError, match=r"results of context suite v2\.1: this kvarena reports"):
        load_results([tmp_path])


def test_a_context_model_run_is_priced_from_its_usage(tmp_path):
    line = json.loads((GOLDEN / "context.jsonl").read_bytes().splitlines()[0])
    usage = {
        "input_tokens": 2_000_000,
        "cached_input_tokens": 1_000_000,
        "cache_write_input_tokens": 0,
        "output_tokens": 5,
    }
    model = dict(line, agent="some-model", reader="some-model", usage=usage)
    (tmp_path / "results.jsonl").write_text(json.dumps(line) + "\n" + json.dumps(model) + "\n")
    prices = ("--price-in", "1", "--price-cached", "0.1", "--price-write", "2")
    done = runner.invoke(app, ["report", str(tmp_path), "-o", str(tmp_path / "rep"), *prices])
    assert done.exit_code == 0, done.output
    board = (tmp_path / "rep" / "leaderboard.md").read_text()
    assert "input $/episode" in board
    row = next(r for r in board.splitlines() if r.startswith("| easy | some-model |"))
    assert row.endswith("| 1.1000 |")  # 1 M fresh at $1 + 1 M cached at $0.10
    # its own reader: ranked apart, with no noop and oracle read by it, so no range
    mine = board.split("### Reader some-model")[1]
    assert mine.lstrip().startswith("Not in the mean (easy): no noop and oracle with this reader")
