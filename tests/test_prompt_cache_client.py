"""The prompt-cache client path end to end: `kvarena eval` against the keyless policy server's
Anthropic-shaped `/v1/messages` route (real HTTP on loopback, the official `anthropic` SDK),
checking the breakpoints the server receives, the usage recorded, and `cache-replay`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.prompt_cache.provider import Prices
from evals.prompt_cache.render import anthropic_request, count_marks, openai_cached_messages
from evals.prompt_cache.replay import Transcript, load_transcript, replay, requests_of
from evals.prompt_cache.strategies import HybridPlanner, make_planner, tools_tokens
from evals.servers.policy_server import PolicyServer
from evals.serving.jobs import EpisodeJob
from evals.serving.model_eval import ModelSpec, run_model_jobs
from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.llm.tools import tool_schemas

runner = CliRunner()


def run_episode(spec: ModelSpec, scenario: str = "easy", seed: int = 3) -> tuple[dict, dict]:
    got: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    job = EpisodeJob(agent=spec.agent, episode=EpisodeSpec(scenario=scenario, seed=seed))
    asyncio.run(
        run_model_jobs([job], spec, concurrency=1, on_result=lambda r, t: got.append((r, t)))
    )
    ((result, transcript),) = got
    assert result["status"] == "ok", result["error"]
    assert transcript is not None
    return result, transcript


def test_render_merges_tool_results_and_marks_the_right_blocks() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "obs 1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "evict", "arguments": '{"seq_id": "r1"}'},
                },
                {"id": "b", "type": "function", "function": {"name": "noop", "arguments": "{"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
        {"role": "tool", "tool_call_id": "b", "content": "bad json"},
        {"role": "user", "content": "obs 2"},
    ]
    request = anthropic_request(messages, tool_schemas(), [0, 4])
    assert request["system"][0]["cache_control"] == {"type": "ephemeral"}
    roles = [m["role"] for m in request["messages"]]
    assert roles == ["user", "assistant", "user", "user"]
    assistant = request["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["tool_use", "tool_use"]
    assert assistant[0]["input"] == {"seq_id": "r1"}
    assert assistant[1]["input"] == {"_unparsed_arguments": "{"}
    results = request["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results] == ["a", "b"]
    assert "cache_control" not in results[0] and results[1]["cache_control"]
    assert count_marks(request) == 2
    assert [t["name"] for t in request["tools"]] == [t["function"]["name"] for t in tool_schemas()]
    marked = openai_cached_messages(messages, [5])
    assert marked[5]["content"] == [
        {"type": "text", "text": "obs 2", "cache_control": {"type": "ephemeral"}}
    ]
    unmarked = openai_cached_messages(messages, [])
    assert marked[:5] == unmarked[:5]  # a mark changes nothing but its own part
    assert unmarked[2]["content"] == [{"type": "text", "text": "(no text)"}]
    assert unmarked[2]["tool_calls"] == messages[2]["tool_calls"]
    blank = [messages[0], {"role": "user", "content": "  "}, {**messages[2], "content": "\n\n"}]
    rendered = anthropic_request([*blank, *messages[3:]], tool_schemas(), [])
    assert rendered["messages"][0]["content"][0]["text"] == "(no text)"
    assert [b["type"] for b in rendered["messages"][1]["content"]] == ["tool_use", "tool_use"]


def test_anthropic_client_sends_the_hybrid_plan_on_a_full_episode() -> None:
    with PolicyServer("lru") as server:
        spec = ModelSpec(name="lru", base_url=server.anthropic_base_url, api="anthropic")
        assert spec.uses_tiers
        result, transcript = run_episode(spec)
        log = list(server.anthropic_log)
    requests = list(requests_of(load_like(transcript)))
    assert len(log) == len(requests)
    planner = HybridPlanner()
    tool_tokens = tools_tokens(tool_schemas())
    marked_history = 0
    for entry, shape in zip(log, requests, strict=True):
        expected = planner.plan(shape, tool_tokens)
        # The server sees the tier plan: unit 0 = tools, unit 1 = system, then messages (tool
        # results of one turn merged into one user message by the renderer).
        assert count_marks(entry["body"]) == len(expected) <= 4
        body_marks = _message_marks(entry["body"])
        assert body_marks == _expected_body_marks(shape.messages, expected)
        marked_history += sum(1 for m in expected if m > 0)
    assert marked_history > 0, "history was never cached in a full episode"
    usage = result["usage"]
    served = [e["usage"] for e in log]
    assert usage["cached_input_tokens"] == sum(u.read for u in served) > 0
    assert usage["cache_write_input_tokens"] == sum(u.written for u in served) > 0
    assert usage["input_tokens"] == sum(u.total for u in served)
    assert transcript["prompt_cache"] == "hybrid" and transcript["api"] == "anthropic"


def test_anthropic_path_plays_like_the_openai_path_and_can_turn_caching_off() -> None:
    with PolicyServer("lru") as server:
        openai_result, _ = run_episode(ModelSpec(name="lru", base_url=server.base_url))
        off = ModelSpec(
            name="lru", base_url=server.anthropic_base_url, api="anthropic", prompt_cache=False
        )
        off_result, off_transcript = run_episode(off)
        assert all(count_marks(e["body"]) == 0 for e in server.anthropic_log)
    assert off_result["record"] == openai_result["record"]
    assert off_result["reward"] == openai_result["reward"]
    assert off_result["usage"]["cached_input_tokens"] == 0
    assert off_transcript["prompt_cache"] == "off"


def test_openai_compatible_path_sends_cache_control_on_the_hybrid_plan() -> None:
    with PolicyServer("lru") as server:
        plain, _ = run_episode(ModelSpec(name="lru", base_url=server.base_url))
        assert all(marks == [] for marks in server.chat_marks)
        server.chat_marks.clear()
        tiered, transcript = run_episode(
            ModelSpec(name="lru", base_url=server.base_url, prompt_cache=True)
        )
        sent = list(server.chat_marks)
    assert tiered["record"] == plain["record"]
    assert transcript["prompt_cache"] == "hybrid"
    planner = HybridPlanner()
    shapes = list(requests_of(load_like(transcript)))
    assert sent == [planner.plan(shape, tools_tokens(tool_schemas())) for shape in shapes]
    assert any(len(marks) > 1 for marks in sent)  # history cached as it grows


def test_prompt_cache_defaults() -> None:
    assert not ModelSpec(name="m").uses_tiers
    assert ModelSpec(name="m", base_url="https://openrouter.ai/api/v1").uses_tiers
    assert not ModelSpec(name="m", api="anthropic", prompt_cache=False).uses_tiers
    assert ModelSpec(name="m", prompt_cache=True).uses_tiers
    with pytest.raises(ValueError, match="unknown prompt-cache strategy"):
        make_planner("sometimes")  # type: ignore[arg-type]


def test_cache_replay_command_on_served_transcripts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with PolicyServer("lru") as server:
        args = ["eval", "--model", "lru", "--base-url", server.base_url, "-s", "easy,hard"]
        done = runner.invoke(app, [*args, "-n", "2", "-o", str(out)])
    assert done.exit_code == 0, done.output
    prices = ["--price-in", "3", "--price-cached", "0.3", "--price-write", "3.75"]
    table = runner.invoke(app, ["cache-replay", str(out), *prices])
    assert table.exit_code == 0, table.output
    for label in ("none:", "system:", "rolling:", "tiers:", "hybrid:"):
        assert label in table.output
    as_json = runner.invoke(app, ["cache-replay", str(out / "transcripts"), *prices, "--json"])
    assert as_json.exit_code == 0, as_json.output
    payload = json.loads(as_json.stdout)  # (the status line goes to stderr)
    rows = {row["strategy"]: row for row in payload["strategies"]}
    assert payload["transcripts"] == 4
    assert rows["none"]["cached_fraction"] == 0 and rows["none"]["cost_vs_none"] == 1
    assert rows["tiers"]["cost"] < rows["system"]["cost"] < rows["none"]["cost"]
    assert rows["tiers"]["breakpoints_per_request"] <= 4
    assert len({row["input_tokens"] for row in rows.values()}) == 1  # same requests for all
    bad = runner.invoke(app, ["cache-replay", str(tmp_path / "missing"), *prices])
    assert bad.exit_code == 2 and "no such file" in " ".join(bad.output.split())


def test_replay_of_a_windowed_transcript_rebuilds_the_window(tmp_path: Path) -> None:
    with PolicyServer("lru") as server:
        spec = ModelSpec(name="lru", base_url=server.base_url, history_turns=2)
        _, transcript = run_episode(spec)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(transcript))
    loaded = load_transcript(path)
    shapes = list(requests_of(loaded))
    assert max(len(s.turns) for s in shapes) == 2
    rows = {r.strategy: r for r in replay([loaded], Prices(3, 0.3, 3.75))}
    assert [r.requests for r in rows.values()] == [len(shapes)] * 5
    # A sliding window changes history every request: the tiers cache only the fixed L0.
    assert rows["tiers"].cost == rows["system"].cost < rows["none"].cost


def load_like(transcript: dict[str, Any]) -> Transcript:
    return Transcript(
        Path("mem"), transcript["messages"], transcript["history_turns"], tool_schemas()
    )


def _message_marks(body: dict[str, Any]) -> list[int]:
    """Indices of Anthropic messages (system = -1) that carry a marker."""
    marks = [-1] if any("cache_control" in b for b in body["system"]) else []
    for i, message in enumerate(body["messages"]):
        if any(isinstance(b, dict) and "cache_control" in b for b in message["content"]):
            marks.append(i)
    return marks


def _expected_body_marks(messages: list[dict[str, Any]], plan: list[int]) -> list[int]:
    """Where the renderer must put each planned breakpoint: OpenAI message i -> its Anthropic
    message (consecutive tool messages share one)."""
    position: dict[int, int] = {}
    index = -1
    previous_role = None
    for i, message in enumerate(messages):
        if i == 0:
            position[0] = -1
            continue
        if not (message["role"] == "tool" and previous_role == "tool"):
            index += 1
        position[i] = index
        previous_role = message["role"]
    return sorted({position[m] for m in plan})
