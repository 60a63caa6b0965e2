"""The CLI explains itself: every option has help text, `eval`'s options come in panels, choices
are listed, names a user must type are never cut at any terminal width, an unknown name gets
a "did you mean", result tables fit the terminal unless `--wide`, and a missing `norm` says
why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from evals.cli import app
from kv_cache_env.policies import available
from kv_cache_env.sim import SCENARIOS
from kv_cache_env.traces.trace_data import BUILTIN_TRACES


def kvarena(*args: str, columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "evals.cli", *args], capture_output=True, text=True, env=env
    )


def test_every_option_of_every_command_has_help_text() -> None:
    group = typer.main.get_command(app)
    silent = [
        f"{name} {param.opts[0]}"
        for name, command in group.commands.items()
        for param in command.params
        if param.param_type_name == "option" and not getattr(param, "help", None)
    ]
    assert silent == []


def test_eval_help_groups_its_options_in_panels_and_lists_choices() -> None:
    done = kvarena("eval", "--help", columns=100)
    assert done.returncode == 0
    for panel in ("What to run", "Model endpoint (with --model)", "Output and execution"):
        assert panel in done.stdout
    assert "openai|anthropic" in done.stdout
    assert "<str>" not in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 100
    validate = kvarena("validate", "--help")
    assert "serving|context|all" in validate.stdout


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_names_a_user_types_are_never_cut(columns: int) -> None:
    for command, names in (
        ("traces", list(BUILTIN_TRACES)),
        ("scenarios", list(SCENARIOS)),
        ("policies", available()),
    ):
        done = kvarena(command, columns=columns)
        assert done.returncode == 0, done.stderr
        words = {w.strip("│┃ ") for line in done.stdout.splitlines() for w in line.split()}
        missing = [n for n in names if n not in words]
        assert missing == [], f"kvarena {command} at {columns} columns cut {missing}"


def test_an_unknown_name_gets_a_did_you_mean() -> None:
    for args, hint in (
        (("-p", "lur"), "did you mean 'lru'?"),
        (("-s", "hrad"), "did you mean 'hard'?"),
        (("-p", "lru", "--trace", "mooncake-conv"), "did you mean 'mooncake-conversation'?"),
    ):
        done = kvarena("eval", *args, "-n", "1")
        assert done.returncode == 2
        assert hint in done.stderr.replace("\n", " ")


def test_result_tables_fit_100_columns_unless_wide(tmp_path) -> None:
    # --steps 5: the shipped reference table does not apply, so nothing to normalize by
    args = [
        "eval",
        "-p",
        "discard-paused+compress-all,lru",
        "-s",
        "easy",
        "-n",
        "2",
        "--steps",
        "5",
    ]
    narrow = kvarena(*args, "-o", str(tmp_path / "a"), columns=100)
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "discard-paused+compress-all" in narrow.stdout
    # noop and the bound were not run: the caption says why norm is missing and what to do
    assert "norm: - (the reference, noop and bound, was not run" in " ".join(lines)
    assert "2 of 4" not in narrow.stderr and "4 episodes played in" in narrow.stderr  # summary line
    wide = kvarena(*args, "--wide", "-o", str(tmp_path / "b"), columns=100)
    for column in ("bound-agent", "throughput", "eviction q.", "risky", "invalid"):
        assert column in wide.stdout


def test_norm_comes_from_the_shipped_table_when_the_run_lacks_the_reference(tmp_path) -> None:
    from evals.serving import reference_table

    table = reference_table.shipped()
    done = kvarena("eval", "-p", "lru", "-s", "hard", "-n", "2", "-o", str(tmp_path / "a"))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    if table is not None and table.current:
        assert "(noop and bound from the shipped reference table)" in text
        assert "│ lru │ 2 │ -" not in done.stdout.replace("  ", " ")
    else:
        assert "norm: - (the reference" in text
