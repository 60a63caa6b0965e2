"""Every kind of bad tool call is answered with a one-line error, counted, and harmless."""

import asyncio

import pytest
from conftest import req, steps, tiny_sim

from kv_cache_env.llm.agent_loop import play_episode
from kv_cache_env.llm.tools import call_tool, tool_schemas
from kv_cache_env.sim import Simulator, get_scenario
from model_client.model_output import ToolCall
from model_client.reply import ModelReply


@pytest.fixture
def sim():
    s = tiny_sim(
        [req("r1", prompt=32, output=60, rate=1), req("r2", prompt=8, output=2)], capacity=40
    )
    steps(s, 5)  # r1 running, r2 finished
    return s


def test_tool_schemas_are_openai_functions():
    names = [t["function"]["name"] for t in tool_schemas()]
    assert names == ["evict", "compress", "swap", "noop"]
    for tool in tool_schemas():
        assert tool["type"] == "function" and tool["function"]["description"]
        params = tool["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
    assert tool_schemas()[0]["function"]["parameters"]["required"] == ["seq_id"]


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("delete", '{"seq_id": "r1"}', "unknown tool 'delete'; tools: evict, compress, swap, noop"),
        (None, "{}", "unknown tool 'None'"),
        ("evict", '{"seq_id": "r1"', "arguments are not valid JSON"),
        ("evict", '["r1"]', "arguments must be a JSON object"),
        ("evict", "{}", "evict: missing argument 'seq_id'"),
        ("evict", '{"seq_id": 1}', "evict: seq_id must be a string, got number"),
        ("evict", '{"seq_id": " "}', "evict needs a seq_id string"),
        ("evict", '{"seq_id": "r1", "now": true}', "evict: unexpected argument 'now'"),
        ("noop", '{"seq_id": "r1"}', "noop: unexpected argument 'seq_id'"),
        ("evict", "[" * 100_000, "arguments longer than 4096 characters"),
        ("evict", "[" * 4000, "arguments are not valid JSON"),
        ("evict", '{"seq_id": "' + "x" * 5000 + '"}', "arguments longer than 4096"),
        ("evict", '{"seq_id": "' + "y" * 3000 + '"}', "unknown seq_id 'yyyy"),
        ("evict", '{"seq_id": "\\ud800"}', "unknown seq_id"),
        ("compress", '{"seq_id": "r77"}', "unknown seq_id 'r77'; valid ids: r1"),
        ("evict", '{"seq_id": "r2"}', "r2 already finished"),
    ],
)
def test_bad_calls_are_errors_counted_and_harmless(sim, name, arguments, expected):
    used = sim.engine.kv.pool.used
    outcome = call_tool(sim, name, arguments)
    assert not outcome.ok and expected in outcome.message
    assert outcome.message.startswith("error: ") and "\n" not in outcome.message
    assert len(outcome.message) <= 200
    outcome.message.encode("utf-8")  # no lone surrogate reaches the next request
    assert sim.engine.kv.pool.used == used
    sim.step()
    assert sim.record().invalid_calls == 1


def test_compressing_int4_and_acting_on_an_offloaded_request_are_errors(sim):
    assert call_tool(sim, "compress", '{"seq_id": "r1"}').ok
    assert call_tool(sim, "compress", {"seq_id": "r1"}).ok
    outcome = call_tool(sim, "compress", '{"seq_id": "r1"}')
    assert not outcome.ok and "already int4" in outcome.message
    outcome = call_tool(sim, "swap", '{"seq_id": "r1"}')
    assert outcome.ok and "waits at the queue front to load it back" in outcome.message
    # offloaded: r1 waits in the queue with its KV on CPU; nothing acts on it there
    outcome = call_tool(sim, "swap", '{"seq_id": "r1"}')
    assert not outcome.ok and "waiting in the queue and holds no GPU blocks" in outcome.message
    outcome = call_tool(sim, "evict", '{"seq_id": "r1"}')
    assert not outcome.ok and "waiting in the queue" in outcome.message
    assert call_tool(sim, "noop", "").ok
    sim.step()
    record = sim.record()
    empty_turns = record.turns - 1  # the fixture's set-up turns, each an implicit noop
    assert record.invalid_calls == 3 and record.compress_calls == 2
    assert record.noop_calls == 1 + empty_turns and record.swap_calls == 1


class Scripted:
    """A fake model: replies from a script, recording what it was sent."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.sent = []

    async def __call__(self, messages, tools):
        self.sent.append(messages)
        return self.replies.pop(0) if self.replies else ModelReply("nothing to do", ())


def test_one_reply_is_one_step_with_all_its_calls_applied_in_order():
    # medium-128: an fp16 cache, so a sequence can be compressed twice (fp16 -> int8 -> int4)
    sim = Simulator(get_scenario("medium-128"), 4)
    entries = sim.observe().entries
    big = entries[0].seq_id
    model = Scripted(
        [
            ModelReply(
                "",
                (
                    ToolCall("a", "compress", f'{{"seq_id": "{big}"}}'),
                    ToolCall("b", "compress", f'{{"seq_id": "{big}"}}'),
                    ToolCall("c", "compress", f'{{"seq_id": "{big}"}}'),  # int4 already
                    ToolCall("", "fly", "{}"),
                ),
            )
        ]
    )
    transcript = asyncio.run(play_episode(sim, model))
    assert sim.done and transcript.turns == 15 and len(model.sent) == 15
    record = sim.record()
    assert record.compress_calls == 2 and record.invalid_calls == 2
    assert record.calls_per_turn[0] == 4 and sum(record.calls_per_turn[1:]) == 0
    assert record.noop_calls == 14  # replies without a tool call count as noop
    first_turn = transcript.messages[1:7]
    assert [m["role"] for m in first_turn] == ["user", "assistant", "tool", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in first_turn[2:]] == ["a", "b", "c", "call_0_3"]
    assert "already int4" in first_turn[4]["content"]
    assert transcript.messages[7]["content"].startswith("step done:")


def test_history_window_sends_the_system_prompt_and_the_last_k_turns():
    sim = Simulator(get_scenario("easy"), 1)
    model = Scripted([])
    asyncio.run(play_episode(sim, model, history_turns=2))
    sizes = [len(messages) for messages in model.sent]
    # system + (user, assistant) per kept turn + current user
    assert sizes[:4] == [2, 4, 6, 6] and max(sizes) == 6
    assert all(messages[0]["role"] == "system" for messages in model.sent)
    assert all(messages[1]["role"] == "user" for messages in model.sent)
    full = Scripted([])
    asyncio.run(play_episode(Simulator(get_scenario("easy"), 1), full))
    assert len(full.sent[-1]) == 2 + 2 * 14
