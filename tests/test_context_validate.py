"""`kvarena validate`'s context section at CI size (5 paired seeds per level, the probe trained
on 30 seeds): every check runs; those that need no more episodes pass; the evict-all margins,
whose 95% CI needs the full 50 episodes, already show a paired mean below -0.3."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from evals.cli import app
from evals.context.validate import (
    RULES,
    context_validation_jobs,
    echo_reader,
    run_context_validation,
)

EPISODES = 5


def test_echo_reader_rephrases_the_question() -> None:
    assert echo_reader(None, "What is my locker code?") == "your locker code is"  # type: ignore[arg-type]
    assert echo_reader(None, "Can you remind me what Maria's flight number is?") == (  # type: ignore[arg-type]
        "Maria's flight number is"
    )


def test_context_section_runs_at_ci_size() -> None:
    ticks: list[int] = []
    checks = run_context_validation(
        EPISODES, 1, lambda: ticks.append(1), probe_seeds=range(1000, 1030)
    )
    assert len(ticks) == len(context_validation_jobs(EPISODES))
    names = [c.name for c in checks]
    for level in ("medium", "hard"):
        for rule in RULES:
            assert f"context {rule} closes <= 70% of noop->oracle on {level}" in names
    margins = [c for c in checks if "evict-all" in c.name]
    assert len(margins) == 4
    for check in margins:
        match = re.search(r"paired difference ([-+]\d\.\d+)", check.detail)
        assert match and float(match.group(1)) <= -0.3, check
    failed = [c for c in checks if not c.passed and c not in margins]
    assert failed == [], failed


def test_validate_rejects_an_unknown_family() -> None:
    result = CliRunner().invoke(app, ["validate", "--family", "both", "-n", "2"])
    assert result.exit_code == 2 and "--family" in result.output
