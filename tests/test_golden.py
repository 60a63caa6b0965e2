"""Golden runs: one small `results.jsonl` per family, compared byte for byte.

They pin behaviour across refactors (the layout issue moves code, the engine-speed work must be
semantics-neutral). A change that is meant to alter results regenerates them deliberately:
`KVARENA_UPDATE_GOLDEN=1 uv run pytest tests/test_golden.py`, and says why in its commit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"

RUNS: dict[str, tuple[str, ...]] = {
    "serving": (
        "eval",
        "-p",
        "noop,lru,compress-all,discard-paused,swap-paused+compress-all",
        "-s",
        "easy,hard,chat-human",
        "-n",
        "1",
    ),
    "trace-mooncake": ("eval", "-p", "lru,compress-all", "--trace", "mooncake-conversation"),
    "trace-azure": ("eval", "-p", "lru,discard-paused", "--trace", "azure-conv-2023", "-s", "hard"),
    "context": ("context-eval", "-n", "1"),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_results_match_the_golden_run(name: str, tmp_path: Path) -> None:
    args = list(RUNS[name])
    if args[0] == "eval":
        args += ["-n", "1"] if "-n" not in args else []
        args += ["-j", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "evals.cli", *args, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    produced = (tmp_path / "results.jsonl").read_bytes()
    golden = GOLDEN / f"{name}.jsonl"
    if os.environ.get("KVARENA_UPDATE_GOLDEN") == "1":
        golden.write_bytes(produced)
    assert produced == golden.read_bytes(), (
        f"{name}: results differ from {golden} (if intended: KVARENA_UPDATE_GOLDEN=1, and say why)"
    )
