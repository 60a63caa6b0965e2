"""An adversarial loopback endpoint (`PolicyServer` with `evals.servers.faults`) against the whole
hosted-model path: every fault class injected, one line per episode, a `run.json`, no crash.
Retry back-off is 0 s here (injected 429/500 ask for a 1 ms retry)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.result_check import parse_line
from evals.servers.faults import REPLY_FAULTS, RESPONSE_FAULTS, TRANSPORT_FAULTS
from evals.servers.policy_server import PolicyServer
from model_client import provider_responses as responses

runner = CliRunner()
EVAL = ("eval", "--model", "lru", "--base-url")


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(responses, "RETRY_BACKOFF_S", 0.0)


def _lines(out: Path) -> list[dict]:
    results = []
    for line in (out / "results.jsonl").read_bytes().splitlines():
        result, problems = parse_line(line)
        assert result is not None, problems
        results.append(result)
    return results


def _tool_messages(out: Path) -> list[str]:
    return [
        m["content"]
        for path in sorted((out / "transcripts").glob("*.json"))
        for m in json.loads(path.read_text(encoding="utf-8"))["messages"]
        if m["role"] == "tool"
    ]


def test_every_fault_class_once_loses_nothing_and_crashes_nothing(tmp_path):
    # A failing request (transport or response fault) is always followed by a good one, or
    # the retries (2) could run out: a retry meets the next fault in the plan.
    failing = [*TRANSPORT_FAULTS, *RESPONSE_FAULTS]
    kinds = [k for pair in zip(failing, REPLY_FAULTS, strict=False) for k in pair]
    kinds += list(REPLY_FAULTS)[len(failing) :]
    faults = {2 + i: kind for i, kind in enumerate(kinds)}
    out = tmp_path / "adv"
    args = [*EVAL, "", "-s", "easy", "-n", "3", "-c", "1", "--max-retries", "2", "-o", str(out)]
    with PolicyServer("lru", faults=faults) as server:
        args[len(EVAL)] = server.base_url
        done = runner.invoke(app, args, env={"OPENAI_API_KEY": ""})
        served = server.requests
    assert done.exit_code == 0, done.output
    assert served > max(faults), "every fault must have been served"
    results = _lines(out)
    assert len(results) == 3 and all(r["status"] == "ok" for r in results), [
        r["error"] for r in results
    ]
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete" and info["episodes_run"] == 3
    invalid = sum(r["metrics"]["invalid_calls"] for r in results)
    # each reply fault is >= 1 invalid call, except the two that are valid calls in another
    # shape (arguments as an object; repeated ids); 300 calls in one reply are 172 over the cap
    assert invalid >= len(REPLY_FAULTS) - 2 + 171
    messages = _tool_messages(out)
    errors = [m for m in messages if m.startswith("error:")]
    assert all(len(m) <= 200 and "\n" not in m for m in errors)
    for m in messages:
        m.encode("utf-8")
    for expected in (
        "not valid JSON (nested too deep)",
        "arguments longer than 4096",
        "unexpected argument 'force'",
        "missing argument 'seq_id'",
        "seq_id must be a string",
        "tool call #0 must be an object, got null",
        "has no function object",
        "tool_calls must be an array",
        "needs a function name string",
        "tool call(s) ignored",
    ):
        assert any(expected in m for m in errors), expected


def test_a_response_fault_that_persists_fails_the_episode_with_its_reason(tmp_path):
    out = tmp_path / "bad"
    faults = dict.fromkeys(range(1, 4), "html")
    with PolicyServer("lru", faults=faults) as server:
        args = [*EVAL, server.base_url, "-s", "easy", "-n", "2", "--steps", "3", "-c", "1"]
        done = runner.invoke(app, [*args, "--max-retries", "2", "-o", str(out)])
    assert done.exit_code == 3, done.output  # finished, with a failed episode
    assert "1 of 2 episode(s) failed" in done.output
    first, second = _lines(out)
    assert first["status"] == "failed" and second["status"] == "ok"
    assert "ProviderError: response is not JSON" in first["error"]
    assert "after 3 attempts" in first["error"] and "<!DOCTYPE" in first["error"]
    assert json.loads((out / "run.json").read_text())["episodes_failed"] == 1


@pytest.mark.long_running
def test_context_eval_survives_every_fault_class(tmp_path):
    kinds = [*RESPONSE_FAULTS, *REPLY_FAULTS]
    faults = {1 + 2 * i: kind for i, kind in enumerate(kinds)}
    out = tmp_path / "ctx"
    with PolicyServer("lru", faults=faults) as server:
        args = ["context-eval", "--model", "text-agent", "--base-url", server.base_url]
        done = runner.invoke(app, [*args, "-l", "easy", "-n", "2", "-o", str(out)])
        served = server.requests
    assert done.exit_code == 0, done.output
    assert served > max(faults)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["status"] == "ok" for r in results), results
    # some faults land on the reader's requests, where tool calls are not read
    assert sum(r["record"]["invalid_actions"] for r in results) >= len(REPLY_FAULTS) // 2
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def _default_sigint() -> None:
    """In the child: Ctrl-C's default action, whatever the test run inherited (a suite started
    in the background by a non-interactive shell ignores SIGINT, and so would the eval)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.long_running
def test_sigint_mid_run_keeps_every_finished_episode_and_writes_run_json(tmp_path):
    out = tmp_path / "int"
    faults = dict.fromkeys(range(7, 13), "timeout")  # slow the middle of the run down
    with PolicyServer("lru", faults=faults, timeout_s=0.5) as server:
        args = [*EVAL, server.base_url, "-s", "easy", "-n", "6", "--steps", "3", "-c", "1"]
        args += ["-o", str(out)]
        env = {**os.environ, "OPENAI_API_KEY": "", "KVARENA_RETRY_BACKOFF_S": "0"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "evals.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=_default_sigint,
        )
        results = out / "results.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if results.exists() and len(results.read_text().splitlines()) >= 2:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "Traceback" not in stderr and "interrupted" in stderr
        kept = _lines(out)
        info = json.loads((out / "run.json").read_text())
        assert info["status"] == "interrupted" and info["episodes_run"] == len(kept)
        assert 2 <= len(kept) < 6, "the interrupt must land mid-run"
        resumed = runner.invoke(
            app, ["eval", *args[1:], "-c", "2", "--resume"], env={"KVARENA_RETRY_BACKOFF_S": "0"}
        )
    assert resumed.exit_code == 0, resumed.output
    assert len(_lines(out)) == 6
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
