"""A check's outcome is written as JSON (`checks.json`, `validate --json`) whatever made it."""

from __future__ import annotations

import json

import numpy as np

from evals.common.checks import Check, checks_json


def test_a_check_passed_by_a_numpy_comparison_is_written_as_json() -> None:
    share = np.float64(0.43)
    checks = [Check("probe closes at most 50%", share <= 0.5, f"{share:.0%}")]
    assert checks[0].passed is True
    assert json.loads(checks_json(checks)) == [
        {"name": "probe closes at most 50%", "passed": True, "detail": "43%"}
    ]
