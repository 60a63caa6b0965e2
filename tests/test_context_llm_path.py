"""The conversation-context family through the LLM path over real loopback HTTP: `kvarena
context-eval --model` and `vf-eval kv-context-env` against the keyless policy server (which
answers context observations with its text agent and reader requests with the extractive
reader). Parity: both give the same per-episode components."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.servers.policy_server import PolicyServer
from rubrics.context import CONTEXT_COMPONENTS

BIN = Path(sys.executable).parent
runner = CliRunner()


def test_context_eval_with_policies_writes_results_and_a_table(tmp_path: Path) -> None:
    out = tmp_path / "policies"
    done = runner.invoke(
        app,
        ["context-eval", "-p", "oracle,noop", "-l", "easy", "-n", "2", "-o", str(out)],
    )
    assert done.exit_code == 0, done.output
    assert "ROUGE-L" in done.output and "OOM" in done.output and "oracle" in done.output
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["agent"], r["seed"]) for r in results] == [
        ("oracle", 0),
        ("oracle", 1),
        ("noop", 0),
        ("noop", 1),
    ]
    assert all(r["status"] == "ok" and r["reader"] == "extractive" for r in results)
    by_agent = {r["agent"]: r for r in results if r["seed"] == 0}
    assert by_agent["noop"]["metrics"]["oom_events"] > 0
    assert by_agent["oracle"]["metrics"]["oom_events"] == 0
    bad = runner.invoke(app, ["context-eval", "-p", "nope", "-o", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "unknown context policy" in bad.output
    bad = runner.invoke(app, ["context-eval", "-l", "extreme", "-o", str(tmp_path / "y")])
    assert bad.exit_code == 2 and "unknown level" in bad.output


@pytest.mark.long_running
def test_model_path_and_vf_eval_agree(tmp_path: Path) -> None:
    with PolicyServer("lru") as server:
        out = tmp_path / "model"
        done = runner.invoke(
            app,
            [
                "context-eval",
                "--model",
                "text-agent",
                "--base-url",
                server.base_url,
                "-l",
                "easy",
                "-n",
                "1",
                "-o",
                str(out),
            ],
        )
        assert done.exit_code == 0, done.output
        env = {**os.environ, "KV_TEST_KEY": "not-a-real-key"}
        vf = subprocess.run(
            [
                str(BIN / "vf-eval"),
                "kv-context-env",
                "-m",
                "text-agent",
                "--client.base-url",
                server.base_url,
                "--client.api-key-var",
                "KV_TEST_KEY",
                "-n",
                "1",
                "-r",
                "1",
                "--no-push",
                "--no-rich",
                "-o",
                str(tmp_path),
                "--run.name",
                "ctx",
                "--env.taskset.level",
                "easy",
                "--env.agent.max-turns",
                "200",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env=env,
        )
    assert vf.returncode == 0, vf.stderr[-3000:]
    (result,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "ok" and result["reader"] == "text-agent"
    record = result["record"]
    # it recalls on every user message ending in "?" (the observation shows no kinds)
    assert record["agent_evicted_blocks"] > 0 and record["recalls"] >= len(record["questions"])
    assert record["invalid_actions"] == 0
    assert (out / "transcripts").is_dir()
    traces = [
        t
        for line in (tmp_path / "ctx" / "traces.jsonl").read_text().splitlines()
        for t in json.loads(line)["traces"]
    ]
    assert len(traces) == 1 and traces[0]["ok"]
    scores = {name: r["score"] for name, r in traces[0]["rewards"].items()}
    assert set(scores) == set(CONTEXT_COMPONENTS)
    assert scores == result["components"]
    assert traces[0]["info"]["context_record"] == record


def test_a_failing_reader_fails_its_episodes_not_the_run(tmp_path: Path) -> None:
    out = tmp_path / "down"
    done = runner.invoke(
        app,
        [
            "context-eval",
            "-p",
            "oracle",
            "-l",
            "easy",
            "-n",
            "2",
            "--reader",
            "some-model",
            "--reader-base-url",
            "http://127.0.0.1:9/v1",  # nothing listens on the discard port
            "-o",
            str(out),
        ],
    )
    assert done.exit_code == 3, done.output  # the run finished; its episodes failed
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in results] == ["failed", "failed"]
    assert all("APIConnectionError" in r["error"] for r in results)
    assert json.loads((out / "run.json").read_text())["episodes_failed"] == 2
