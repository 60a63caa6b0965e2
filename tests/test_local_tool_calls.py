"""The constrained tool-call format of `local:` models (`evals.servers.local_tool_calls`), without a
model: the grammar built from the tools, the lines -> OpenAI `tool_calls` conversion, and the
request routing (a fake engine stands in for llama.cpp; the real one, and llama.cpp compiling
these grammars, are in test_local_model.py)."""

import json

import pytest

from evals.servers import local_tool_calls as ltc
from kv_cache_env.llm.tools import call_tool, tool_schemas
from kv_cache_env.llm.valid_calls import valid_targets
from kv_cache_env.sim import ACTIONS, Simulator, get_scenario, render


def test_without_an_observation_the_grammar_constrains_the_shape_of_an_id_only():
    grammar = ltc.reply_grammar(tool_schemas())
    for name in ("evict", "compress", "swap"):
        assert f'"{name}(" arg ")"' in grammar
    assert '"noop()"' in grammar
    assert grammar.startswith("root ::= (call") and ")?" in grammar.splitlines()[0]  # may be empty
    sim = Simulator(get_scenario("hard"), 0)
    ids = [e.seq_id for e in sim.observe().entries]
    assert ids and not any(f'"{i}"' in grammar or f"{i}(" in grammar for i in ids)


def test_with_an_observation_each_tool_names_only_the_ids_it_is_valid_on():
    sim = Simulator(get_scenario("hard"), 0)
    for _ in range(6):
        sim.step()
    obs = sim.observe()
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": render(obs)}]
    targets = ltc.observation_targets(messages)
    assert targets == valid_targets(obs) and targets["evict"]
    grammar = ltc.reply_grammar(tool_schemas(), targets)
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    for tool in ("evict", "compress", "swap"):
        if targets[tool]:
            assert f'"{tool}(" {tool}-arg ")"' in rules["call"]
            assert rules[f"{tool}-id"] == " | ".join(f'"{i}"' for i in targets[tool])
        else:
            assert f'"{tool}(' not in rules["call"]
    assert "[A-Za-z] [0-9]" in rules["id"]  # the shape rule stays, unused
    # a tool valid on nothing is left out; noop stays
    only_noop = ltc.reply_grammar(tool_schemas(), {t.name: [] for t in ACTIONS.targeted})
    assert dict(line.split(" ::= ", 1) for line in only_noop.splitlines())["call"] == '"noop()"'
    # not an observation (the context family's messages): shape only
    assert ltc.observation_targets([{"role": "user", "content": "hello"}]) is None


def test_tools_the_grammar_cannot_express_are_refused():
    two = {
        "type": "function",
        "function": {
            "name": "move",
            "parameters": {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
        },
    }
    with pytest.raises(ltc.UnsupportedTools):
        ltc.reply_grammar([*tool_schemas(), two])


def test_lines_become_openai_tool_calls_that_the_dispatcher_applies():
    calls = ltc.tool_calls_from(
        'compress(r1)\nevict("r0")\nswap(r999)\nnoop()\n', tool_schemas(), "c1"
    )
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("compress", {"seq_id": "r1"}),
        ("evict", {"seq_id": "r0"}),
        ("swap", {"seq_id": "r999"}),
        ("noop", {}),
    ]
    assert len({c["id"] for c in calls}) == 4
    sim = Simulator(get_scenario("easy"), 0)
    outcomes = [call_tool(sim, c["function"]["name"], c["function"]["arguments"]) for c in calls]
    # an invented id is the model's mistake, scored like any other model's
    assert outcomes[2].ok is False and "r999" in outcomes[2].message
    assert outcomes[3].ok is True
    assert ltc.tool_calls_from("", tool_schemas(), "c") == []
    assert ltc.tool_calls_from("evict(r1", tool_schemas(), "c") is None  # cut off mid-call
    assert ltc.tool_calls_from("drop(r1)", tool_schemas(), "c") is None


def test_earlier_calls_are_shown_to_the_model_in_its_own_format():
    messages = [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "obs 1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": ltc.tool_calls_from("evict(r3)\nnoop()", tool_schemas(), "a"),
        },
        {"role": "tool", "tool_call_id": "call_0_a", "content": "evicted r3"},
        {"role": "user", "content": "obs 2"},
    ]
    prompt = ltc.render_prompt(messages, tool_schemas())
    assert prompt.startswith("<|im_start|>system\nSYS\n\nReply with tool calls only")
    assert "<|im_start|>assistant\nevict(r3)\nnoop()<|im_end|>" in prompt
    assert prompt.endswith("obs 2<|im_end|>\n<|im_start|>assistant\n")


class FakeEngine:
    """llama.cpp's server API (`local_tool_calls.Engine`) answering with fixed text."""

    def __init__(self, text):
        self.text = text
        self.completions = []
        self.chats = []

    def handle_completions(self, request):
        self.completions.append(request)
        return {
            "id": "cmpl-1",
            "created": 0,
            "model": "fake",
            "choices": [{"text": self.text, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        }

    def handle_chat_completions(self, request):
        self.chats.append(request)
        return {"choices": [{"message": {"role": "assistant", "content": self.text}}]}


def _body(messages, tools=None, **extra):
    return {"messages": messages, **({"tools": tools} if tools else {}), **extra}


def test_requests_with_tools_are_answered_with_tool_calls_under_the_grammar():
    engine = FakeEngine("evict(r5)\ncompress(r2)")
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    body = _body(messages, tool_schemas(), temperature=0.0, seed=3, max_tokens=7)
    reply = ltc.chat_completion(engine, body)
    message = reply["choices"][0]["message"]
    assert message["content"] is None and reply["choices"][0]["finish_reason"] == "tool_calls"
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["evict", "compress"]
    assert reply["usage"]["prompt_tokens"] == 10 and engine.chats == []
    (request,) = engine.completions
    assert request["grammar"] == ltc.reply_grammar(tool_schemas())  # "U" is no observation
    assert request["prompt"] == ltc.render_prompt(messages, tool_schemas())
    assert request["temperature"] == 0.0 and request["seed"] == 3
    assert request["stop"] == [ltc.END] and "max_tokens" not in request  # the grammar bounds it
    empty = ltc.chat_completion(FakeEngine(""), _body(messages, tool_schemas()))
    assert "tool_calls" not in empty["choices"][0]["message"]  # no call: the loop counts a noop


def test_llama_cpp_errors_pass_through():
    class Refusing(FakeEngine):
        def handle_completions(self, request):
            return {"error": {"code": 400, "message": "failed to parse grammar"}}

    messages = [{"role": "user", "content": "U"}]
    reply = ltc.chat_completion(Refusing(""), _body(messages, tool_schemas()))
    assert reply["error"]["code"] == 400


def test_requests_without_tools_or_unconstrained_are_llama_cpp_chat():
    messages = [{"role": "user", "content": "hi"}]
    for body, constrain in (
        (_body(messages), True),
        (_body(messages, tool_schemas(), tool_choice="none"), True),
        (_body(messages, tool_schemas()), False),
    ):
        engine = FakeEngine("plain reply")
        reply = ltc.chat_completion(engine, body, constrain=constrain)
        assert reply["choices"][0]["message"]["content"] == "plain reply"
        assert engine.chats == [body] and engine.completions == []
