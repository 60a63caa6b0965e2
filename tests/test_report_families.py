"""The results of both families: the line reader recognises each family's results as they are
written today (the golden runs)."""

from __future__ import annotations

from pathlib import Path

from evals.common.result_check import family_of, parse_line

GOLDEN = Path(__file__).parent / "golden"


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
