"""Property-based fuzzing of the two boundaries: provider response -> reply
(`model_client.provider_responses`) and reply -> actions (`model_client.model_output`,
`tools.run_call`, `call_context_tool`). Whatever arrives, nothing raises except `ProviderError`,
every call is answered with one line of at most 200 characters that can be encoded, and each bad
call is counted. CI profile: at most 150 examples per property, no deadline."""

from __future__ import annotations

import json

import hypothesis.strategies as st
from conftest import req, tiny_sim
from hypothesis import HealthCheck, example, given, settings

from kv_cache_env.llm.tools import run_call
from kv_cache_env.sim import ACTIONS
from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.llm.agent import call_context_tool
from kv_context_env.sim.episode import ContextEpisode
from model_client.model_output import MAX_ERROR_CHARS, ToolCall, tool_calls_from_openai
from model_client.provider_responses import ProviderError, anthropic_reply, openai_reply
from model_client.reply import ModelReply, assistant_message

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_plain = st.text(max_size=40)
_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
text = _plain | st.builds(lambda a, c, b: a + c + b, _plain, _surrogate, _plain)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)
names = st.sampled_from([*ACTIONS.names, "evict_blocks", "evict_message", "recall"]) | text
seq_ids = st.sampled_from(["r1", "r2", "r77", "", " "]) | text
arguments = (
    json_values
    | st.builds(lambda v: json.dumps(v), json_values)
    | st.builds(lambda s: json.dumps({"seq_id": s}), seq_ids)
    | st.builds(lambda s, k, v: json.dumps({"seq_id": s, k: v}), seq_ids, text, scalars)
    | st.builds(lambda n: "[" * n + "]" * n, st.integers(0, 5) | st.integers(900, 2048))
    | st.builds(lambda b: json.dumps({"blocks": b}), st.lists(st.integers(), max_size=5))
    | st.builds(lambda i: json.dumps({"index": i}), st.integers() | scalars)
    | text
)
entries = json_values | st.fixed_dictionaries(
    {"id": scalars, "type": st.just("function")},
    optional={
        "function": st.none()
        | st.fixed_dictionaries({"name": names | scalars, "arguments": arguments})
    },
)
tool_calls = st.none() | json_values | st.lists(entries, max_size=6)


def _check_line(message: str) -> None:
    assert "\n" not in message and len(message) <= MAX_ERROR_CHARS
    message.encode("utf-8")


def _sim():
    return tiny_sim(
        [req("r1", prompt=32, output=60, rate=1), req("r2", prompt=8, output=2)], capacity=40
    )


@FUZZ
@given(raw=tool_calls)
def test_any_tool_calls_field_becomes_answered_counted_calls(raw):
    sim = _sim()
    sim.step()
    calls = tool_calls_from_openai(raw)
    message, calls = assistant_message(ModelReply(None, calls), 0)
    json.dumps(message, ensure_ascii=False).encode("utf-8")  # the next request can always be sent
    outcomes = [run_call(sim, call) for call in calls]
    for outcome in outcomes:
        if not outcome.ok:
            _check_line(outcome.message)
    assert len({c.id for c in calls}) == len(calls)
    sim.step()
    expected = sum(c.invalid_count for c in calls if c.problem) + sum(
        1 for c, o in zip(calls, outcomes, strict=True) if not c.problem and not o.ok
    )
    assert sim.record().invalid_calls == expected


NESTED = "[" * 1500 + "]" * 1500


@FUZZ
@given(name=names | scalars, args=arguments)
@example(name="evict", args=NESTED)
@example(name="evict", args={"seq_id": "r1\ud800"})
@example(name="noop", args={"seq_id": "r1"})
def test_any_single_call_is_applied_or_answered(name, args):
    sim = _sim()
    sim.step()
    calls = tool_calls_from_openai([{"id": "a", "function": {"name": name, "arguments": args}}])
    (call,) = calls
    outcome = run_call(sim, call)
    if not outcome.ok:
        _check_line(outcome.message)
    sim.step()
    sim.check_invariants()


_EPISODE = ContextEpisode(generate_conversation(1, "easy"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names, args=arguments)
@example(name="evict_blocks", args=NESTED)
@example(name="recall", args={"query": "x" * 5000})
@example(name="evict_message", args='{"index": true}')
def test_any_context_tool_call_is_applied_or_answered(name, args):
    (call,) = tool_calls_from_openai([{"function": {"name": name, "arguments": args}}])
    before = _EPISODE.record().invalid_actions
    result = call_context_tool(_EPISODE, call)
    if result.startswith("error:"):
        _check_line(result)
        assert _EPISODE.record().invalid_actions == before + 1
    else:
        result.encode("utf-8")


def test_context_tool_call_with_a_problem_is_counted():
    call = ToolCall("x", "invalid", "", "tool call #0 must be an object, got null")
    before = _EPISODE.record().invalid_actions
    assert call_context_tool(_EPISODE, call).startswith("error: tool call #0")
    assert _EPISODE.record().invalid_actions == before + 1


bodies = (
    st.binary(max_size=200)
    | text
    | st.builds(lambda v: json.dumps(v), json_values)
    | st.builds(
        lambda choices: json.dumps({"choices": choices}),
        st.lists(json_values | st.fixed_dictionaries({"message": json_values}), max_size=2),
    )
    | st.builds(
        lambda content, calls: json.dumps(
            {
                "choices": [{"message": {"content": content, "tool_calls": calls}}],
                "usage": {"prompt_tokens": content},
            }
        ),
        json_values,
        json_values,
    )
    | st.builds(
        lambda blocks: json.dumps({"content": blocks, "stop_reason": "end_turn"}),
        st.lists(
            json_values
            | st.fixed_dictionaries(
                {"type": st.just("tool_use"), "name": scalars, "input": json_values}
            ),
            max_size=3,
        ),
    )
)


@FUZZ
@given(body=bodies)
def test_any_response_body_is_a_reply_or_a_provider_error(body):
    for parse in (openai_reply, anthropic_reply):
        try:
            reply = parse(
                body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
            )
        except ProviderError as error:
            assert "\n" not in str(error)
            str(error).encode("utf-8")
            continue
        message, _ = assistant_message(reply, 0)
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        usage = reply.usage.as_dict()
        assert all(isinstance(v, int) and v >= 0 for v in usage.values())


def test_known_bad_bodies_are_provider_errors_with_their_reason():
    cases = {
        b"": "empty response body",
        b"<html>502</html>": "not JSON",
        b'"hi"': "JSON string, not an object",
        b'{"choices": [null]}': "choices[0] is null",
        b'{"choices": [{"index": 0}]}': "choices[0].message is null",
        b'{"choices": "abc"}': "no choices",
        b'{"error": {"message": "overloaded"}}': "overloaded",
        b"\xff\xfe": "not UTF-8",
        b'{"choices": ' + b"[" * 100_000: "not JSON",
    }
    for body, reason in cases.items():
        try:
            openai_reply(body)
        except ProviderError as error:
            assert reason in str(error), (body[:20], str(error))
        else:
            raise AssertionError(f"{body[:20]!r} was accepted")
