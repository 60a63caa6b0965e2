"""Every help screen and every table the commands print, at 80, 100 and 120 columns: no line
wider than the terminal (in characters), no number cut with an ellipsis, no name a user types
cut or broken across lines, no word broken mid-word. The commands run in this process (one
eval and one context-eval, at 80 columns); their tables are then drawn again from the same
results, by the same functions, at the other widths. Also: the progress bar, the summary line
and run.json count the same episodes, and a missing optional extra names its install
command."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from evals.cli import app
from evals.common import console as console_module
from evals.common.checks import Check
from evals.common.columns import Fitted
from evals.context.eval_run import context_tables
from evals.report.build import assemble, load_results
from evals.report.terminal import rankings
from evals.serving.normalize import normalized_scores
from evals.serving.summary import summarize
from evals.serving.tables import scenario_tables
from evals.validation import validation_table
from kv_cache_env.policies import available
from kv_cache_env.sim import SCENARIOS
from kv_cache_env.traces.trace_data import BUILTIN_TRACES
from kv_context_env.generator.conversation import LEVELS
from kv_context_env.policies.baselines import CONTEXT_POLICIES

WIDTHS = (80, 100, 120)
GROUP = typer.main.get_command(app)
NAMES = {
    *available(),
    *SCENARIOS,
    *BUILTIN_TRACES,
    *LEVELS,
    *CONTEXT_POLICIES,
    *GROUP.commands,
    *(opt for command in GROUP.commands.values() for p in command.params for opt in p.opts),
}
"""Every name a user types: policies, scenarios, traces, levels, commands, options."""
EVAL_POLICIES = ("discard-paused+compress-all", "offload-or-discard", "noop", "bound")
CONTEXT_AGENTS = ("noop", "oracle", "sliding-window", "window-recall")


def _vocabulary() -> set[str]:
    """Every word of every help text and docstring of the app (what a help line may hold)."""
    texts = [GROUP.help or ""]
    for command in GROUP.commands.values():
        texts.append(command.help or "")
        texts += [getattr(p, "help", None) or "" for p in command.params]
    return {word for text in texts for word in text.split()} | NAMES


WORDS = _vocabulary()


def problems(text: str, width: int, names: Iterable[str] = ()) -> list[str]:
    """What is wrong with `text` printed at `width` columns (empty: nothing)."""
    found = []
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if len(line) > width:
            found.append(f"line {number} is {len(line)} characters: {line!r}")
        if re.search(r"[\d±.]…|…[\d.]", line):
            found.append(f"a number cut on line {number}: {line!r}")
        for match in re.finditer(r"([\w@+.\-]+)…", line):
            stem = match.group(1)
            cut = [n for n in NAMES if n.startswith(stem) and n != stem]
            if cut:
                found.append(f"{cut[0]} cut on line {number}: {line!r}")
    for number, (this, after) in enumerate(itertools.pairwise(lines), 1):
        ends, starts = this.split(), after.split()
        if ends and starts:
            last, first = ends[-1].strip("│┃"), starts[0].strip("│┃")
            if last + first in WORDS and last not in WORDS and first not in WORDS:
                found.append(f"{last + first!r} broken after line {number}")
    tokens = {t.strip("│┃,;()") for line in lines for t in line.split()}
    found += [f"{name} missing or broken" for name in names if name not in tokens]
    return found


@contextmanager
def terminal(width: int) -> Iterator[None]:
    """The commands' consoles, and help, at `width` columns."""
    consoles = (console_module.console, console_module.out_console)
    before = [c._width for c in consoles]
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    for c in consoles:
        c.width = width
    try:
        yield
    finally:
        for c, old in zip(consoles, before, strict=True):
            c._width = old
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def kvarena(*args: str, width: int = 80) -> str:
    with terminal(width):
        done = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


def drawn(tables: Iterable[Fitted], width: int) -> str:
    file = StringIO()
    printer = Console(file=file, width=width, highlight=False)
    for fitted in tables:
        fitted.print(printer)
    return file.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_help_screen_fits(width: int) -> None:
    for command in [None, *GROUP.commands]:
        args = [command, "--help"] if command else ["--help"]
        text = kvarena(*args, width=width)
        assert problems(text, width) == [], (args, text)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_listing_fits(width: int) -> None:
    for command, names in (
        ("policies", available()),
        ("scenarios", list(SCENARIOS)),
        ("traces", list(BUILTIN_TRACES)),
    ):
        text = kvarena(command, width=width)
        assert problems(text, width, names) == [], text
        one = names[-1]
        text = kvarena(command, one, width=width)
        assert problems(text, width, [one]) == [], text


def test_listings_print_json_a_script_reads() -> None:
    policies = json.loads(kvarena("policies", "--json"))
    assert [p["name"] for p in policies] == available()
    scenarios = json.loads(kvarena("scenarios", "--json"))
    assert [s["name"] for s in scenarios["scenarios"]] == list(SCENARIOS)
    hard = json.loads(kvarena("scenarios", "hard", "--json"))
    assert hard["name"] == "hard" and hard["steps"] == SCENARIOS["hard"].steps


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    """Run from `folder`, so that output paths are short (the closing `kvarena report` command
    is printed on one line, to be copied, however long its paths)."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A small eval (noop and the bound included, on 3 seeds: enough to be ranked) run at 80
    columns."""
    folder = tmp_path_factory.mktemp("eval")
    args = ["eval", "-p", ",".join(EVAL_POLICIES), "-s", "easy,hard", "-n", "3", "--steps", "5"]
    with inside(folder):
        text = kvarena(*args, "-j", "1", "-o", "run")
    return folder / "run", text


@pytest.fixture(scope="module")
def context_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("context")
    args = ["context-eval", "-p", ",".join(CONTEXT_AGENTS), "-l", "easy", "-n", "1"]
    with inside(folder):
        text = kvarena(*args, "-o", "run")
    return folder / "run", text


def test_eval_prints_tables_that_fit_and_ends_with_its_ranking(eval_run) -> None:
    out, text = eval_run
    assert problems(text, 80, EVAL_POLICIES) == [], text
    ranking = text.rindex("ranking")
    assert ranking > text.rindex("hard: mean")  # the ranking comes after every table
    assert "score (95% CI)" in text[ranking:]
    assert "report: kvarena report run -o run/report\n" in text
    results = load_results([out])
    rows, normalized = summarize(results), normalized_scores(results)
    for width in WIDTHS:
        tables = [*scenario_tables(rows, normalized, width=width)]
        tables += rankings(assemble(results), width=width)
        shown = drawn(tables, width)
        assert problems(shown, width, EVAL_POLICIES) == [], shown
    wide = drawn(scenario_tables(rows, normalized, wide=True), 80)
    assert problems(wide, 1000, EVAL_POLICIES) == []  # --wide: as wide as it takes
    assert "eviction q." in wide


def test_report_prints_the_ranking_it_wrote(eval_run, tmp_path) -> None:
    out, _ = eval_run
    for width in WIDTHS:
        text = kvarena("report", str(out), "-o", str(tmp_path / f"r{width}"), width=width)
        assert problems(text, width, EVAL_POLICIES) == [], text
        assert "score (95% CI)" in text
        board = (tmp_path / f"r{width}" / "leaderboard.md").read_text()
        best = board.split("## Ranking")[1].splitlines()[4].split("|")[3].strip()
        first_row = text.split("───")[-1].split("\n")[1].split()
        assert first_row[0] == "1" and best in first_row  # the same agent first


def test_context_eval_prints_tables_that_fit_and_ends_with_its_ranking(context_run) -> None:
    out, text = context_run
    assert problems(text, 80, CONTEXT_AGENTS) == [], text
    assert "context ranking (reader extractive)" in text
    assert "report: kvarena report run -o run/report\n" in text
    results = load_results([out])
    for width in WIDTHS:
        tables = [*context_tables(results, width=width), *rankings(assemble(results), width=width)]
        shown = drawn(tables, width)
        assert problems(shown, width, CONTEXT_AGENTS) == [], shown


@pytest.mark.parametrize("width", WIDTHS)
def test_the_validate_table_fits(width: int) -> None:
    checks = [
        Check(
            "the bound beats every rule on every scenario of the suite (paired, 95%)",
            True,
            "hard: bound 0.374 vs best rule 0.335 (+0.039 ± 0.012, n=100); medium-128: "
            "0.382 vs 0.344 (+0.038 ± 0.011)",
        ),
        Check("noop stays below the bound", False, "easy: range 0.027 < 0.05"),
    ]
    shown = drawn([validation_table(checks, width=width)], width)
    assert problems(shown, width) == [], shown
    assert "FAIL" in shown and "0.374" in shown


def test_progress_totals_rates_and_run_json_agree(tmp_path, monkeypatch) -> None:
    """noop's episodes answered before the bar starts (as from the shipped reference table):
    the bar's total, the summary line and run.json all count the same episodes."""
    from evals.serving import eval_run as module
    from evals.serving.jobs import run_job

    def answer_noop(jobs):
        answered = [job for job in jobs if job.agent == "noop"]
        return [run_job(job) for job in answered], [j for j in jobs if j not in answered]

    monkeypatch.setattr(module, "reference_from_table", answer_noop)
    out = tmp_path / "run"
    text = kvarena("eval", "-p", "noop,lru", "-s", "easy", "-n", "3", "-j", "1", "-o", str(out))
    text = " ".join(text.split())
    info = json.loads((out / "run.json").read_text())
    assert info["episodes_run"] == 6
    bar = re.search(r"(\d+)/(\d+) (\S+/s)", text)
    summary = re.search(
        r"(\d+) episodes played in [\d.]+ s \((\S+/s)\), none failed; (\d+) from", text
    )
    assert bar and summary, text
    assert bar.group(1) == bar.group(2) == "6"  # the run's total, noop's 3 counted from the start
    assert summary.group(1) == "3" and summary.group(3) == "3"  # played + answered = run.json's
    assert bar.group(3) == summary.group(2)  # one rate: the episodes played over the bar's time
    assert f"{info['episodes_run']} episodes, {info['wall_time_s']:.1f} s from start" in text


def test_a_missing_gymnasium_names_the_command_that_installs_it() -> None:
    script = "import sys; sys.modules['gymnasium'] = None; import kv_cache_env.rl.gym"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 1
    assert "uv sync --extra gym" in done.stderr.splitlines()[-1]
