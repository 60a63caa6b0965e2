"""Constrained tool calling for `local:` models: the `kvarena-tool-calls` reply format, whose
replies can only be a list of calls to the request's tools, answered as ordinary OpenAI
`tool_calls`. The local model server (`evals.servers.local_engine`, llama.cpp through the
`xllamacpp` wheel) answers every chat request with `chat_completion`.

Why: left to its chat template, a 135M model answers a request with tools in free text (it did
so every turn under llama-cpp-python's `chatml-function-calling` format). Here, when a request
carries tools (and `tool_choice` is absent or `"auto"`):

- the system message ends with a short description of the reply format;
- the reply is generated under a GBNF grammar built from the tools and from this turn's
  observation: up to `MAX_CALLS` lines `evict(ID)` / `compress(ID)` / `swap(ID)` / `noop()`, or
  nothing at all, where each tool's ID is one of the sequence ids that tool is valid on now
  (`kv_cache_env.llm.valid_calls`, read from the last user message, which is the observation's
  text). A tool valid on no sequence is left out. The model still chooses which calls and
  which ids; what it can no longer write is an id that does not exist or a call the simulator
  would refuse on this observation (two calls of one reply can still conflict: compressing what
  the line before evicted). Where the last message is not a serving observation (or the tools
  are not these), ID only has the *shape* of a sequence id (a letter and digits, like "r12").
  Tried first, at temperature 0 with SmolLM2-135M: a JSON-list grammar (it answered `[]` every
  turn), any-string ids (it wrote the placeholder `seq_id` from the tool list), and ids of the
  right shape only (47% of its calls on `hard` named ids that did not exist);
- the lines are returned as the message's `tool_calls` (arguments as JSON text), so the client
  reads them like any hosted model's reply and the same tool dispatcher acts on them. An empty
  reply has no tool calls (the agent loop counts it as a noop).

Requests without tools, with `tool_choice` `"none"` or naming one function, and every request
when constraining is off, are answered by llama.cpp's own chat completion (the model's chat
template; plain chat for the context family). The reply length is bounded by the grammar, so
the request's `max_tokens` is not applied to constrained replies.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

CHAT_FORMAT = "kvarena-tool-calls"
MAX_CALLS = 4
"""Calls per reply the grammar allows; it also bounds the reply's length."""
MAX_ID_DIGITS = 6
"""Digits an id may have (ids are "r0", "r1", ...: a letter and a number)."""
END = "<|im_end|>"


def _parameter(tool: dict[str, Any]) -> str | None:
    """The one string parameter of a tool the call grammar supports (None: no parameter)."""
    function = tool["function"]
    properties = (function.get("parameters") or {}).get("properties") or {}
    if not properties:
        return None
    (name, schema), *rest = properties.items()
    if rest or schema.get("type") != "string":
        raise UnsupportedTools(f"{function['name']}: only tools with one string parameter or none")
    return str(name)


class UnsupportedTools(ValueError):
    """Tools whose calls the call-list grammar cannot express (then the request is not
    constrained)."""


def reply_grammar(tools: list[dict[str, Any]], targets: dict[str, list[str]] | None = None) -> str:
    """GBNF for a reply: up to MAX_CALLS lines `name(ID)` / `name()` naming `tools`, or nothing,
    IDs optionally in double quotes. With `targets` (tool -> the ids it is valid on now), each
    tool's ID is one of its ids and a tool with none is left out; without, an ID has the shape
    of the simulator's sequence ids (a letter and 1-MAX_ID_DIGITS digits, like "r12")."""
    calls, rules = [], []
    for tool in tools:
        name = tool["function"]["name"]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UnsupportedTools(f"tool name {name!r}")
        if not _parameter(tool):
            calls.append(f'"{name}()"')
            continue
        if targets is None:
            calls.append(f'"{name}(" arg ")"')
            continue
        ids = [i for i in targets.get(name, []) if re.fullmatch(r"[A-Za-z0-9_-]+", i)]
        if ids:
            rule = name.replace("_", "-")  # GBNF rule names: letters, digits and dashes
            calls.append(f'"{name}(" {rule}-arg ")"')
            rules.append(f'{rule}-arg ::= "\\"" {rule}-id "\\"" | {rule}-id')
            rules.append(f"{rule}-id ::= " + " | ".join(f'"{i}"' for i in ids))
    if not calls:
        return 'root ::= ""'
    return "\n".join(
        [
            f'root ::= (call ("\\n" call){{0,{MAX_CALLS - 1}}})?',
            f"call ::= {' | '.join(calls)}",
            'arg ::= "\\"" id "\\"" | id',
            f"id ::= [A-Za-z] [0-9]{{1,{MAX_ID_DIGITS}}}",
            *rules,
        ]
    )


def observation_targets(messages: list[dict[str, Any]]) -> dict[str, list[str]] | None:
    """Tool -> valid ids, from the last user message when it is a serving observation's text
    (None otherwise: the grammar then constrains the shape of an id only)."""
    from kv_cache_env.llm.valid_calls import valid_targets
    from kv_cache_env.sim import parse

    for message in reversed(messages):
        if message.get("role") == "user":
            try:
                return valid_targets(parse(_text(message.get("content"))))
            except ValueError:
                return None
    return None


def format_instructions(tools: list[dict[str, Any]]) -> str:
    """What the system message adds: the reply format (no sequence id is suggested)."""
    calls = ", ".join(f"{t['function']['name']}({'ID' if _parameter(t) else ''})" for t in tools)
    return (
        f"Reply with tool calls only, one per line (at most {MAX_CALLS}): {calls}, where ID is "
        "a seq from the table (the candidates line lists some). An empty reply does nothing."
    )


def call_list_text(tool_calls: list[dict[str, Any]]) -> str:
    """An earlier assistant message's tool calls as the lines the model would have written."""
    lines = []
    for call in tool_calls:
        try:
            arguments = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = {}
        values = list(arguments.values()) if isinstance(arguments, dict) else []
        lines.append(f"{call['function']['name']}({values[0] if values else ''})")
    return "\n".join(lines)


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """ChatML (SmolLM2's template), with the format instructions ending the system message."""
    parts = []
    instructions = format_instructions(tools)
    if not messages or messages[0].get("role") != "system":
        messages = [{"role": "system", "content": ""}, *messages]
    for i, message in enumerate(messages):
        role = message.get("role", "user")
        content = _text(message.get("content"))
        if i == 0:
            content = f"{content}\n\n{instructions}".strip()
        elif role == "assistant" and message.get("tool_calls"):
            content = call_list_text(message["tool_calls"])
        parts.append(f"<|im_start|>{role}\n{content}{END}\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


CALL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\((?:"([^"]*)"|([^"]*))\)')


def tool_calls_from(
    text: str, tools: list[dict[str, Any]], completion_id: str
) -> list[dict[str, Any]] | None:
    """The OpenAI `tool_calls` for a constrained reply (arguments as JSON text); None if a line
    is not a call, which the grammar prevents unless generation was cut off."""
    parameters = {t["function"]["name"]: _parameter(t) for t in tools}
    out = []
    for i, line in enumerate(x for x in text.strip().splitlines() if x.strip()):
        match = CALL.fullmatch(line.strip())
        if match is None or match[1] not in parameters:
            return None
        parameter = parameters[match[1]]
        value = match[2] if match[2] is not None else match[3]
        arguments = {parameter: value} if parameter else {}
        out.append(
            {
                "id": f"call_{i}_{completion_id}",
                "type": "function",
                "function": {"name": match[1], "arguments": json.dumps(arguments)},
            }
        )
    return out


class Engine(Protocol):
    """llama.cpp's server API as `xllamacpp.Server` exposes it (a request dict in, the response
    dict out; an error is `{"error": {"code": ..., "message": ...}}`)."""

    def handle_completions(self, request: dict[str, Any]) -> dict[str, Any]: ...

    def handle_chat_completions(self, request: dict[str, Any]) -> dict[str, Any]: ...


SAMPLING = (
    "temperature", "top_p", "top_k", "min_p", "typical_p", "presence_penalty",
    "frequency_penalty", "repeat_penalty", "seed", "logit_bias",
)  # fmt: skip
"""The request's sampling fields a constrained reply passes on to llama.cpp."""


def chat_completion(
    engine: Engine, body: dict[str, Any], *, constrain: bool = True
) -> dict[str, Any]:
    """The chat completion for the OpenAI request `body` (see the module docstring)."""
    messages: list[dict[str, Any]] = body["messages"]
    tools = body.get("tools")
    grammar = None
    if constrain and tools and body.get("tool_choice") in (None, "auto"):
        try:
            grammar = reply_grammar(tools, observation_targets(messages))
        except UnsupportedTools:
            grammar = None
    if grammar is None:
        return engine.handle_chat_completions(body)
    completion = engine.handle_completions(
        {
            "prompt": render_prompt(messages, tools),
            "grammar": grammar,
            "stop": [END],
            **{key: body[key] for key in SAMPLING if body.get(key) is not None},
        }
    )
    if "error" in completion:
        return completion
    choice = completion["choices"][0]
    text = choice["text"]
    completion_id = str(completion.get("id", "cmpl"))
    calls = tool_calls_from(text, tools, completion_id)
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chat" + completion_id,
        "object": "chat.completion",
        "created": completion.get("created", 0),
        "model": completion.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else choice.get("finish_reason", "stop"),
            }
        ],
        "usage": completion.get("usage"),
    }
