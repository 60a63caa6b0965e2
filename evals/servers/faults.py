"""Faults the keyless policy server can inject into a chat-completions answer, for tests and
adversarial runs of the hosted-model path (`kvarena serve-policy --faults N:KIND,...`).

Two classes, each a function of the honest response (a dict) to the bytes actually sent:
- `RESPONSE_FAULTS`: an HTTP 200 whose body is not a chat completion. The client must treat it
  as a provider error: retry it like a 5xx, then record the episode `failed` with the reason.
- `REPLY_FAULTS`: a valid completion whose *model output* is malformed (tool calls that are not
  objects, arguments nested 2,000 deep, lone surrogates, extra arguments...). The episode must
  answer each with a one-line error, count it as an invalid call, and go on.
`fault_plan` draws a seeded schedule mixing both (and the transport faults 429/500/drop).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

Body = dict[str, Any]


def _message(response: Body) -> Body:
    return response["choices"][0]["message"]


def _with_calls(response: Body, calls: Any) -> bytes:
    message = _message(response)
    message["tool_calls"] = calls
    message["content"] = None
    return json.dumps(response).encode()


def _call(name: Any, arguments: Any, call_id: str = "call_x") -> Body:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _first_seq(response: Body) -> str:
    for call in _message(response).get("tool_calls") or []:
        try:
            seq = json.loads(call["function"]["arguments"]).get("seq_id")
        except (ValueError, AttributeError, KeyError, TypeError):
            continue
        if isinstance(seq, str):
            return seq
    return "r0"


def _surrogate(response: Body) -> bytes:
    seq = _first_seq(response)
    # json.dumps escapes the lone surrogate as \ud800, as a provider would send it.
    calls = [_call("evict", json.dumps({"seq_id": seq + "\ud800"}))]
    message = _message(response)
    message["tool_calls"] = calls
    message["content"] = "thinking \udfff about " + seq
    return json.dumps(response).encode()


RESPONSE_FAULTS: dict[str, Callable[[Body], bytes]] = {
    "notjson": lambda r: b'{"choices": [{"message": ',
    "empty": lambda r: b"",
    "html": lambda r: b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>",
    "jsonstring": lambda r: b'"the model is warming up"',
    "nullchoice": lambda r: json.dumps({**r, "choices": [None]}).encode(),
    "nomessage": lambda r: json.dumps({**r, "choices": [{"index": 0}]}).encode(),
    "choicesstring": lambda r: json.dumps({**r, "choices": "abc"}).encode(),
    "nochoices": lambda r: json.dumps({**r, "choices": []}).encode(),
    "errorbody": lambda r: b'{"error": {"message": "upstream overloaded", "code": 529}}',
    "notutf8": lambda r: b'{"choices": "\xff\xfe\xfd"}',
    "deepbody": lambda r: b'{"choices": ' + b"[" * 100_000,
    "contentnumber": lambda r: json.dumps(
        {**r, "choices": [{"index": 0, "message": {"role": "assistant", "content": 7}}]}
    ).encode(),
}
REPLY_FAULTS: dict[str, Callable[[Body], bytes]] = {
    "nested": lambda r: _with_calls(r, [_call("evict", "[" * 2000 + "]" * 2000)]),
    "deepobject": lambda r: _with_calls(
        r, [_call("evict", '{"seq_id": ' + "[" * 1500 + "]" * 1500 + "}")]
    ),
    "hugeargs": lambda r: _with_calls(r, [_call("evict", '{"seq_id": "' + "x" * 10000 + '"}')]),
    "surrogate": _surrogate,
    "argsobject": lambda r: _with_calls(r, [_call("evict", {"seq_id": _first_seq(r)})]),
    "nullentry": lambda r: _with_calls(r, [None]),
    "nofunction": lambda r: _with_calls(r, [{"id": "call_y", "type": "function"}]),
    "nullfunction": lambda r: _with_calls(r, [{"id": "call_y", "function": None}]),
    "callsobject": lambda r: _with_calls(r, {"name": "evict", "arguments": "{}"}),
    "callsstring": lambda r: _with_calls(r, "evict(r1)"),
    "extraarg": lambda r: _with_calls(
        r, [_call("evict", json.dumps({"seq_id": _first_seq(r), "force": True}))]
    ),
    "missingarg": lambda r: _with_calls(r, [_call("evict", "{}")]),
    "wrongtype": lambda r: _with_calls(r, [_call("evict", '{"seq_id": 12}')]),
    "namenumber": lambda r: _with_calls(r, [_call(7, "{}")]),
    "manycalls": lambda r: _with_calls(r, [_call("noop", "{}", f"c{i}") for i in range(300)]),
    "sameids": lambda r: _with_calls(r, [_call("noop", "{}", "dup"), _call("noop", "{}", "dup")]),
}
TRANSPORT_FAULTS = ("429", "500", "drop")
INJECTED = {**RESPONSE_FAULTS, **REPLY_FAULTS}


def inject(kind: str, response: Body) -> bytes:
    """The bytes sent instead of `response` for fault `kind` (a key of INJECTED)."""
    return INJECTED[kind](json.loads(json.dumps(response)))


def fault_plan(seed: int, requests: int, rate: float = 0.3) -> dict[int, str]:
    """A seeded schedule: each of requests 1..`requests` is faulty with probability `rate`,
    its kind drawn uniformly from every transport, response and reply fault."""
    rng = random.Random(seed)
    kinds = [*TRANSPORT_FAULTS, *RESPONSE_FAULTS, *REPLY_FAULTS]
    return {n: rng.choice(kinds) for n in range(1, requests + 1) if rng.random() < rate}
