"""`kvarena` end to end, through the installed console script."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evals.common.results import validate


def kvarena(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evals.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


def test_eval_writes_schema_results_and_run_info(tmp_path):
    out = tmp_path / "run"
    done = kvarena(
        "eval", "-p", "noop,lru", "-s", "easy,hard", "-n", "3", "-o", str(out), "-j", "2"
    )
    assert done.returncode == 0, done.stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    results = [json.loads(line) for line in lines]
    assert len(results) == 2 * 2 * 3
    assert all(validate(r) == [] for r in results)
    assert [(r["scenario"], r["agent"], r["seed"]) for r in results] == [
        (s, a, seed) for s in ("easy", "hard") for a in ("noop", "lru") for seed in range(3)
    ]
    run = json.loads((out / "run.json").read_text())
    assert run["arguments"]["policies"] == ["noop", "lru"] and run["episodes_run"] == 12
    assert "wall_time_s" in run and "numpy" in run["versions"]
    for header in ("norm", "reward", "failures", "calls/turn"):  # the 100-column table
        assert header in done.stdout


def test_rerun_is_byte_identical_whatever_the_worker_count(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    args = ("eval", "-p", "random,compress-first", "-s", "medium", "-n", "4", "--seed", "9")
    assert kvarena(*args, "-o", str(a), "-j", "1").returncode == 0
    assert kvarena(*args, "-o", str(b), "-j", "2").returncode == 0
    assert (a / "results.jsonl").read_bytes() == (b / "results.jsonl").read_bytes()


def test_unknown_names_fail_cleanly(tmp_path):
    done = kvarena("eval", "-p", "belady", "-o", str(tmp_path))
    assert done.returncode == 2 and "known policies" in done.stderr
    assert "Traceback" not in done.stderr
    done = kvarena("eval", "-s", "extreme", "-o", str(tmp_path))
    assert done.returncode == 2 and "known scenarios" in done.stderr


def test_malformed_trace_exits_nonzero_with_file_and_line(tmp_path):
    trace = tmp_path / "broken.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1]}\n{')
    done = kvarena("eval", "-p", "lru", "--trace", str(trace), "-o", str(tmp_path / "o"))
    assert done.returncode != 0
    assert "broken.jsonl:2:" in done.stderr and "Traceback" not in done.stderr


def test_trace_episodes_run(tmp_path):
    out = tmp_path / "trace"
    done = kvarena("eval", "-p", "lru", "--trace", "azure-conv-2023", "-n", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["scenario"] for r in results} == {"trace:azure-conv-2023"}
    assert all(r["status"] == "ok" for r in results)
    run = json.loads((out / "run.json").read_text())
    assert run["arguments"]["trace"] == "azure-conv-2023"


def test_unknown_trace_name_lists_the_builtin_ones(tmp_path):
    done = kvarena("eval", "-p", "lru", "--trace", "mooncake", "-o", str(tmp_path / "o"))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "no such trace file" in done.stderr and "mooncake-conversation" in done.stderr


@pytest.mark.long_running
def test_bench_prints_figures_as_json():
    done = kvarena("bench", "--episodes", "3", "--json", "--trace", "/nonexistent.jsonl")
    assert done.returncode == 2 and "no such trace file" in done.stderr
    done = kvarena("bench", "--episodes", "3", "--json", "--before", "/nonexistent")
    assert done.returncode == 2 and "not a kvcache-arena worktree" in done.stderr
    done = kvarena("bench", "--episodes", "3", "--json", "--no-speed")  # tests/test_speed_bench.py
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["episodes_per_scenario"] == 3
    assert figures["hard.turns_per_s_median"] > 0
    assert figures["hard.observation_tokens_max"] > 0


def test_policies_and_scenarios_listings():
    assert "lookahead" in kvarena("policies").stdout
    assert "hard" in kvarena("scenarios").stdout
