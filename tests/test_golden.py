"""Golden runs: one small `results.jsonl` per family (and the prompt-cache replay's JSON), compared
byte for byte.

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
    _compare(produced, GOLDEN / f"{name}.jsonl", name)


def _compare(produced: bytes, golden: Path, name: str) -> None:
    if os.environ.get("KVARENA_UPDATE_GOLDEN") == "1":
        golden.write_bytes(produced)
    assert produced == golden.read_bytes(), (
        f"{name}: results differ from {golden} (if intended: KVARENA_UPDATE_GOLDEN=1, and say why)"
    )


def test_prompt_cache_family_matches_the_golden_run(tmp_path: Path) -> None:
    # The prompt-cache family end to end: a keyless model (the `lru` policy behind the policy
    # server's Anthropic Messages endpoint, which models a provider cache) played with the hybrid
    # planner's `cache_control` breakpoints, then `cache-replay` pricing its transcripts under
    # the five strategies. Both outputs are pinned: the recorded usage and the replay's JSON.
    from evals.common.policy_server import PolicyServer

    out = tmp_path / "run"
    model = ["--model", "lru", "--api", "anthropic", "-s", "easy", "-n", "1", "--steps", "8"]
    with PolicyServer("lru") as server:
        url = server.anthropic_base_url
        model_run = subprocess.run(
            [sys.executable, "-m", "evals.cli", "eval", *model, "-o", str(out), "--base-url", url],
            capture_output=True,
            text=True,
            timeout=600,
            env=os.environ | {"ANTHROPIC_API_KEY": "unused-by-the-loopback-server"},
        )
    assert model_run.returncode == 0, model_run.stderr
    _compare((out / "results.jsonl").read_bytes(), GOLDEN / "prompt-cache.jsonl", "prompt-cache")
    prices = ["--price-in", "3", "--price-cached", "0.3", "--price-write", "3.75"]
    replay = subprocess.run(
        [sys.executable, "-m", "evals.cli", "cache-replay", str(out), *prices, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert replay.returncode == 0, replay.stderr
    _compare(replay.stdout.encode(), GOLDEN / "prompt-cache-replay.json", "cache-replay")
