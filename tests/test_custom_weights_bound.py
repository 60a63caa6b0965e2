"""The defect the one weights value fixes, end to end through `kvarena eval`: under custom
weights the bound searched (or was taken from the shipped table) under the default weights, so
the 1.0 of a custom-weights normalized score was no reference. Written against the command line
only, so that the same file runs on the code before the fix (where it fails) and after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.serving.normalize import normalized_scores
from kv_cache_env.policies import available

LATENCY_FIRST = {"latency_penalty": 3.0, "failure_penalty": 0.1}
"""Weights that favour latency: with them the default weights' bound scored below a policy of
its own pool on 4 of the 6 episodes of agent-tools and chat-human, seeds 0-2."""


@pytest.mark.long_running
def test_under_weights_that_favour_latency_the_bound_searches_under_them(tmp_path: Path):
    """`kvarena eval --weights` with latency-first weights on agent-tools and chat-human, seeds
    0-2, every registered policy: no policy's mean reward is above the bound's (its normalized
    score is at most 1), and the bound plays otherwise than under the default weights. Before
    the weights reached the planners, the bound was the default weights' (taken from the shipped
    table, or searched under them) and scored below a policy of its own pool on 4 of the 6."""
    runner = CliRunner()
    suite = ["-s", "agent-tools,chat-human", "-n", "3", "-j", "1"]
    weights = ["--weights", json.dumps(LATENCY_FIRST)]
    everyone = ["-p", ",".join(available())]
    custom = runner.invoke(
        app, ["eval", *everyone, *suite, *weights, "-o", str(tmp_path / "custom")]
    )
    assert custom.exit_code == 0, custom.output
    default = runner.invoke(app, ["eval", "-p", "bound", *suite, "-o", str(tmp_path / "default")])
    assert default.exit_code == 0, default.output

    def results(run: str) -> list[dict]:
        lines = (tmp_path / run / "results.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    played = results("custom")
    assert len(played) == 2 * 3 * len(available()) and all(r["status"] == "ok" for r in played)
    assert all(r["weights"] | LATENCY_FIRST == r["weights"] for r in played)
    default_bound = {(r["scenario"], r["seed"]): r["record"] for r in results("default")}
    for scenario in ("agent-tools", "chat-human"):
        rewards: dict[str, list[float]] = {}
        for r in played:
            if r["scenario"] == scenario:
                rewards.setdefault(r["agent"], []).append(r["reward"])
        means = {agent: sum(v) / len(v) for agent, v in rewards.items()}
        above = {a: m for a, m in means.items() if m > means["bound"] + 1e-12}
        assert not above, (scenario, means["bound"], above)
        bound = {r["seed"]: r["record"] for r in played if r["scenario"] == scenario}
        assert sum(bound[s] != default_bound[scenario, s] for s in range(3)) >= 1, scenario
    normalized = normalized_scores(played)  # noop 0, the bound 1: nothing above it
    assert all(n.score is None or n.score <= 1 + 1e-9 for n in normalized.values())
    # and the console said the reference was played, not taken from the table
    assert "bound played under the given --weights" in " ".join(custom.output.split())
