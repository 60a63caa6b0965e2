"""The hybrid breakpoint planner (strategy (e), the hosted client's default): where it puts its
breakpoints on each transcript shape the eval client produces, its limits (at most four, none
below the provider minimum), the per-model minimum, part-level rendering, and that it is never
costlier than the other strategies on replayed transcripts of every shape."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evals.prompt_cache.minimums import DEFAULT_MIN_TOKENS, min_cacheable_tokens
from evals.prompt_cache.provider import Prices, ProviderCache
from evals.prompt_cache.render import anthropic_request, count_marks, openai_cached_messages
from evals.prompt_cache.replay import Transcript, load_transcript, replay, requests_of
from evals.prompt_cache.requests import RequestShape, part_positions, request_units, split_request
from evals.prompt_cache.strategies import HybridPlanner, make_planner
from evals.prompt_cache.tiers import TierConfig
from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.llm.agent import CONTEXT_TOOLS, play_context_episode
from kv_context_env.policies.text_agent import context_text_calls
from kv_context_env.readers.extractive import extractive_reader
from kv_context_env.sim.episode import ContextEpisode
from model_client.model_output import ToolCall
from model_client.reply import ModelReply

Message = dict[str, Any]
SMALL = TierConfig(cache_min_tokens=200, cache_buffer_multiplier=1.0)
"""A 200-token minimum (and tier target), so a few short messages reach it."""
SYSTEM: Message = {"role": "system", "content": "S" * 1000}  # about 256 tokens: over SMALL's


def turn(k: int, calls: int = 1) -> list[Message]:
    """A serving-env turn: observation, assistant with `calls` tool calls, their results."""
    ids = [f"c{k}_{i}" for i in range(calls)]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "noop", "arguments": "{}"}}
            for i in ids
        ],
    }
    return [
        {"role": "user", "content": f"observation {k} " + "o" * 400},
        assistant,
        *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids),
    ]


def serving_requests(n: int, history_turns: int | None, calls: int = 1) -> list[RequestShape]:
    """The requests of an n-turn serving episode sent through a `history_turns` window."""
    turns = [turn(k, calls) for k in range(n)]
    shapes = []
    for k in range(n):
        start = 0 if history_turns is None else max(0, k - history_turns)
        past = [m for t in turns[start:k] for m in t]
        shapes.append(split_request([SYSTEM, *past, turns[k][0]]))
    return shapes


def plans(planner: HybridPlanner, shapes: list[RequestShape]) -> list[list[int]]:
    return [planner.plan(shape, 0) for shape in shapes]


def test_full_history_rolls_with_the_previous_position_as_read_anchor() -> None:
    # Parts: 0 = system, then 3 per past turn (user, assistant, tool), then the observation.
    got = plans(HybridPlanner(SMALL), serving_requests(4, None))
    assert got == [[0, 1], [0, 1, 4], [0, 4, 7], [0, 7, 10]]


def test_a_window_rolls_only_while_it_fills() -> None:
    # --history-turns 1: request 1 still extends request 0 (anchor on its rolling position),
    # request 1's window is full, so nothing past the system prompt is written from then on.
    assert plans(HybridPlanner(SMALL, history_turns=1), serving_requests(4, 1)) == [
        [0, 1],
        [0, 1],
        [0],
        [0],
    ]
    # --history-turns 3: rolls on requests 0-2, anchors once more on request 3, then L0 only.
    got = plans(HybridPlanner(SMALL, history_turns=3), serving_requests(6, 3))
    assert got == [[0, 1], [0, 1, 4], [0, 4, 7], [0, 7], [0], [0]]


def test_no_history_caches_the_system_prompt_only() -> None:
    got = plans(HybridPlanner(SMALL, history_turns=0), serving_requests(3, 0))
    assert got == [[0], [0], [0]]


def test_no_breakpoint_below_the_minimum() -> None:
    # Default 1024-token minimum: the ~256-token system prompt alone is not marked; the
    # rolling breakpoint appears once its prefix reaches 1024 tokens (about 110 tokens a turn).
    planner = HybridPlanner(history_turns=None)
    shapes = serving_requests(10, None)
    for shape, marks in zip(shapes, plans(planner, shapes), strict=True):
        units, ends = request_units(shape.messages, [])
        prefix = [sum(u.tokens for u in units[: ends[m] + 1]) for m in marks]
        assert all(p >= 1024 for p in prefix), (marks, prefix)
        assert 0 not in marks
    assert plans(HybridPlanner(history_turns=None), shapes)[-1] != []


def observation(lines: list[str], t: int) -> Message:
    """A context-family observation: stable blocks, then the volatile block last."""
    volatile = f"#{t} user/chat <- new: message {t}\nTurn {t}. Active blocks {t}/60.\n"
    return {
        "role": "user",
        "content": [{"type": "text", "text": x} for x in [*lines, volatile]],
    }


def line(i: int) -> str:
    return f"#{i} user/chat b{i}-{i} resident: " + "x" * 100 + "\n"  # about 32 tokens


def context_plans(evict_at: int, evict: int, turns: int) -> list[tuple[list[int], list[int]]]:
    """(plan, cached-tier part indices) per request of an observation growing by one line a
    turn; before request `evict_at` the line of message `evict` is evicted (gone)."""
    planner = HybridPlanner(SMALL, history_turns=0)
    lines = ["Messages (index role/kind blocks state: text):\n"]
    out = []
    for t in range(turns):
        if t == evict_at:
            lines.remove(line(evict))
        marks = planner.plan(split_request([SYSTEM, observation(lines, t)]), 0)
        cached = sorted(k for k, tier in planner.last_tiers.items() if tier != "active")
        out.append((marks, cached))
        lines.append(line(t))
    return out


def test_context_observation_tiers_and_rolling_inside_the_message() -> None:
    # Parts: 0 = system, 1 = legend, 2.. = message lines, last = volatile (never marked).
    # The rolling breakpoint sits on the last stable part. Once more than the 200-token target
    # waits in active (request 6: legend + 6 lines of 39 tokens), the oldest graduate to L3
    # (legend + lines 0-5 = parts 1-7), whose end keeps a breakpoint from then on.
    got = context_plans(evict_at=11, evict=6, turns=13)
    assert [marks for marks, _ in got[:3]] == [[0, 1], [0, 2], [0, 3]]
    assert got[5] == ([0, 6], [])
    l3 = [1, 2, 3, 4, 5, 6, 7]
    assert got[6] == ([0, 7], l3)
    assert got[10] == ([0, 7, 11], l3)
    # Request 11: message 6's line (part 8, in active) is gone; L3 is untouched, the rolling
    # breakpoint is on the last of the 11 stable parts left.
    assert got[11] == ([0, 7, 11], l3)
    assert got[12] == ([0, 7, 12], l3)


def test_tier_breakpoints_keep_the_prefix_before_an_eviction_readable() -> None:
    """Through the provider model: after an eviction just past L3 the hybrid plan still reads
    the L3 prefix, where a rolling breakpoint alone (or with the system prompt) would read
    nothing past the system prompt."""
    reads: dict[str, list[int]] = {}
    l3_end = 0
    for name in ("hybrid", "rolling"):
        cache = ProviderCache(min_tokens=SMALL.cache_min_tokens)
        planner = make_planner(name, SMALL, history_turns=0)  # type: ignore[arg-type]
        lines = ["Messages (index role/kind blocks state: text):\n"]
        reads[name] = []
        for t in range(13):
            if t == 11:
                lines.remove(line(6))
            shape = split_request([SYSTEM, observation(lines, t)])
            units, ends = request_units(shape.messages, [])
            usage = cache.serve(units, [ends[m] for m in planner.plan(shape, 0)])
            reads[name].append(usage.read)
            if t == 11:
                l3_end = sum(u.tokens for u in units[: ends[7] + 1])
            lines.append(line(t))
    assert reads["hybrid"][11] == l3_end > 0
    assert reads["hybrid"][12] > reads["hybrid"][11]  # rolling is read again the turn after
    assert reads["rolling"] == [0] * 13  # its breakpoint is on the volatile block


@settings(max_examples=40, deadline=None)
@given(
    history_turns=st.one_of(st.none(), st.integers(0, 4)),
    calls=st.integers(1, 30),
    minimum=st.sampled_from([0, 200, 1024, 4096]),
)
def test_never_more_than_four_breakpoints_nor_one_below_the_minimum(
    history_turns: int | None, calls: int, minimum: int
) -> None:
    config = TierConfig(cache_min_tokens=minimum, cache_buffer_multiplier=1.0)
    planner = HybridPlanner(config, history_turns=history_turns)
    cache = ProviderCache(min_tokens=minimum)
    for shape in serving_requests(6, history_turns, calls):
        marks = planner.plan(shape, 0)
        units, ends = request_units(shape.messages, [])
        usage = cache.serve(units, [ends[m] for m in marks])  # raises past four
        assert usage.honoured == usage.breakpoints == len(marks) <= 4


def test_more_than_twenty_blocks_a_turn_read_through_the_anchor() -> None:
    """The provider looks back 20 content blocks: a turn of 25 tool calls (51 blocks) puts the
    previous rolling entry out of reach of a lone rolling breakpoint, not of the anchor."""
    shapes = serving_requests(4, None, calls=25)
    costs = {}
    for name in ("rolling", "hybrid"):
        planner = make_planner(name, SMALL)  # type: ignore[arg-type]
        cache = ProviderCache(min_tokens=SMALL.cache_min_tokens)
        read = 0
        for shape in shapes:
            units, ends = request_units(shape.messages, [])
            read += cache.serve(units, [ends[m] for m in planner.plan(shape, 0)]).read
        costs[name] = read
    assert costs["rolling"] == 0 < costs["hybrid"]


def test_parts_are_marked_in_both_renderings() -> None:
    messages = [SYSTEM, observation(["legend\n", line(0), line(1)], 2)]
    assert part_positions(messages) == [(0, 0), (1, 0), (1, 1), (1, 2), (1, 3)]
    request = anthropic_request(messages, [], [0, 3])
    blocks = request["messages"][0]["content"]
    assert [b["text"] for b in blocks] == [p["text"] for p in messages[1]["content"]]
    assert ["cache_control" in b for b in blocks] == [False, False, True, False]
    assert count_marks(request) == 2
    sent = openai_cached_messages(messages, [2])
    assert ["cache_control" in p for p in sent[1]["content"]] == [False, True, False, False]
    assert openai_cached_messages(messages, [])[1] == {
        "role": "user",
        "content": [{"type": "text", "text": p["text"]} for p in messages[1]["content"]],
    }


def test_minimum_cacheable_prefix_per_model() -> None:
    assert min_cacheable_tokens("claude-opus-4-5-20251101") == 4096
    assert min_cacheable_tokens("anthropic/claude-opus-4.6") == 4096
    assert min_cacheable_tokens("claude-haiku-4-5") == 4096
    assert min_cacheable_tokens("claude-sonnet-4-6") == 2048
    assert min_cacheable_tokens("claude-sonnet-4-5-20250929") == 1024
    assert min_cacheable_tokens("claude-opus-4-1") == 1024
    assert min_cacheable_tokens("claude-sonnet-4-20250514") == 1024
    assert min_cacheable_tokens("claude-3-7-sonnet-latest") == 1024
    assert min_cacheable_tokens("claude-3-5-haiku-20241022") == 2048
    assert min_cacheable_tokens("claude-3-haiku-20240307") == 2048
    assert min_cacheable_tokens("some-other-model") == DEFAULT_MIN_TOKENS == 1024
    assert min_cacheable_tokens(None) == 1024


def text_agent_transcript(level: str, seed: int, max_blocks: int | None = None) -> dict[str, Any]:
    """A kv-context-env episode played in-process by the keyless text agent (the policy
    server's), through the real agent loop: its transcript as `context-eval` writes it."""

    async def chat(messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        text = "".join(p["text"] for p in messages[-1]["content"])
        calls = context_text_calls(text)
        return ModelReply(
            None,
            tuple(ToolCall(f"c{i}", n, json.dumps(a)) for i, (n, a) in enumerate(calls)),
        )

    with ContextEpisode(generate_conversation(seed, level), max_blocks=max_blocks) as episode:

        async def read(context: str, question: str) -> str:
            return extractive_reader(episode, question)

        transcript = asyncio.run(play_context_episode(episode, chat, read))
    return {"history_turns": 0, "tools": CONTEXT_TOOLS, "messages": transcript.messages}


def test_replayed_context_transcripts_hybrid_beats_rolling_and_system(tmp_path: Path) -> None:
    # v2's budgets (40-48 blocks) keep a whole context request under the 1,024-token minimum,
    # so nothing past the tools is cacheable there; a 160-block budget makes one that is.
    paths = []
    for seed in (0, 1):
        path = tmp_path / f"easy_{seed}.json"
        path.write_text(json.dumps(text_agent_transcript("easy", seed, max_blocks=160)))
        paths.append(path)
    loaded = [load_transcript(p) for p in paths]
    shape = next(iter(requests_of(loaded[0])))
    assert len(shape.current["content"]) > 1  # the observation arrives as content blocks
    rows = {r.strategy: r.cost for r in replay(loaded, Prices(3, 0.3, 3.75))}
    assert rows["hybrid"] <= 0.9 * min(rows["rolling"], rows["system"])
    assert rows["hybrid"] <= min(rows.values()) * 1.02


def test_replayed_serving_shapes_hybrid_is_never_costlier() -> None:
    for history_turns in (None, 3, 1, 0):
        shapes_turns = serving_requests(8, None, calls=2)
        messages = [*shapes_turns[-1].messages[:-1], shapes_turns[-1].current]
        transcript = Transcript(Path("mem"), messages, history_turns, [])
        rows = {r.strategy: r.cost for r in replay([transcript], Prices(3, 0.3, 3.75))}
        others = min(cost for name, cost in rows.items() if name != "hybrid")
        assert rows["hybrid"] <= others * 1.02, (history_turns, rows)


def test_report_shows_input_dollars_per_episode(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evals.cli import app
    from evals.common.results import dumps
    from evals.serving.jobs import EpisodeJob, run_job
    from kv_cache_env.episodes import EpisodeSpec

    policy = run_job(EpisodeJob("lru", EpisodeSpec("easy", 0)))
    usages = [
        {
            "input_tokens": 3_000_000,
            "cached_input_tokens": 1_000_000,
            "output_tokens": 5,
            "cache_write_input_tokens": 1_000_000,
        },
        {
            "input_tokens": 1_000_000,
            "cached_input_tokens": 0,
            "output_tokens": 5,
            "cache_write_input_tokens": 0,
        },
    ]
    model = [policy | {"agent": "m", "seed": i, "usage": u} for i, u in enumerate(usages)]
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(dumps(r) + "\n" for r in [policy, *model]))
    prices = ["--price-in", "3", "--price-cached", "0.3", "--price-write", "3.75"]
    runner = CliRunner()
    done = runner.invoke(app, ["report", str(run), "-o", str(tmp_path / "r"), *prices])
    assert done.exit_code == 0, done.output
    markdown = (tmp_path / "r" / "leaderboard.md").read_text()
    detail = markdown.split("## Every agent on every scenario")[1]
    table = [line for line in detail.splitlines() if line.startswith("|")]
    assert table[0].endswith("| input $/episode |")
    rows = {line.split(" | ")[1]: line for line in table[2:]}
    # m: (1M fresh x 3 + 1M read x 0.3 + 1M written x 3.75 = 7.05) and 3.00: mean 5.025
    assert rows["m"].endswith("| 5.0250 |") and rows["lru"].endswith("| – |")
    plain = runner.invoke(app, ["report", str(run), "-o", str(tmp_path / "p")])
    assert "$" not in (tmp_path / "p" / "leaderboard.md").read_text()
    partial = runner.invoke(app, ["report", str(run), "--price-in", "3"])
    assert plain.exit_code == 0 and partial.exit_code == 2


def test_plain_openai_path_sends_observation_blocks_as_one_string() -> None:
    """Endpoints without explicit caching (local llama.cpp, verifiers) get the observation as
    one text, exactly the blocks joined; the caching path keeps the parts."""
    from types import SimpleNamespace

    from model_client.openai_chat import openai_chat

    sent: list[Any] = []

    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

    async def create(**kwargs: Any) -> Any:
        # the raw-response path openai_chat reads (the reply boundary parses the body itself)
        sent.append(kwargs["messages"])
        return SimpleNamespace(http_response=SimpleNamespace(content=body.encode()))

    raw = SimpleNamespace(create=create)
    completions = SimpleNamespace(with_raw_response=raw)
    client = SimpleNamespace(chat=SimpleNamespace(completions=completions), max_retries=0)
    messages = [SYSTEM, observation(["legend\n", line(0)], 1)]
    asyncio.run(openai_chat(client, "m")(messages, []))  # type: ignore[arg-type]
    text = "".join(p["text"] for p in messages[1]["content"])
    assert sent[0] == [SYSTEM, {"role": "user", "content": text}]
    asyncio.run(openai_chat(client, "m", None, lambda m, t: m)(messages, []))  # type: ignore[arg-type]
    assert sent[1] == messages
