"""The boundary where model output becomes actions: wire-format tool calls -> `ToolCall`s, and
raw tool arguments -> a checked argument object. Nothing here raises on model output.

Every shape a model or provider can send ends as one of two things: a well-formed `ToolCall`
(name and JSON-text arguments, both plain strings with lone surrogates replaced), or a
`ToolCall` carrying a `problem` — a one-line error the dispatcher answers and counts as an
invalid call. Arguments are then checked against the tool's JSON schema (the subset the tools
use: object / string / integer / array, `required`, `additionalProperties: false`, `minimum`,
`items`): extra or missing arguments and wrong types are invalid calls too.

Limits (listed in the README, "Failure behaviour"):
- `MAX_ARGUMENT_CHARS`: longer tool arguments are an invalid call, never parsed.
- `MAX_TOOL_CALLS`: calls beyond it in one reply are dropped and each counted invalid.
- `MAX_REPLY_CHARS`: reply text beyond it is cut (the conversation must stay sendable).
- `ECHO_CHARS`: at most this much of any input is echoed in an error line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

MAX_ARGUMENT_CHARS = 4096
MAX_TOOL_CALLS = 128
MAX_REPLY_CHARS = 16384
ECHO_CHARS = 80
MAX_ERROR_CHARS = 200
"""Every error line sent back to the model is at most this long."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """Raw JSON text as the model produced it (may be malformed)."""
    problem: str | None = None
    """Set when the call itself is malformed (no function, not an object, ...): the
    dispatcher answers it with this error and counts it invalid, without running anything."""
    invalid_count: int = 1
    """How many invalid calls a problem call stands for (the surplus beyond MAX_TOOL_CALLS)."""


def clean_text(value: str) -> str:
    """`value` with lone UTF-16 surrogates replaced by U+FFFD (such text cannot be encoded,
    so the next request would fail)."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """A short one-line rendering of any input for an error message."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    text = repr(clean_text(text)[: limit + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """`message` on one line, at most `limit` characters."""
    text = " ".join(clean_text(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def kind_of(value: object) -> str:
    """The JSON type name of a Python value parsed from JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def arguments_text(value: object) -> str | None:
    """Tool arguments as JSON text (objects given instead of a string are serialised); None
    when they cannot be (too deep, not JSON-able)."""
    if isinstance(value, str):
        return clean_text(value)
    if value is None:
        return ""
    try:
        return clean_text(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return None


def tool_calls_from_openai(raw: object, turn: int = 0) -> tuple[ToolCall, ...]:
    """The `tool_calls` field of an OpenAI chat message, whatever its shape."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problem = f"tool_calls must be an array of calls, got {kind_of(raw)} {echo(raw)}"
        return (ToolCall(f"call_{turn}_0", "invalid", "", one_line(problem)),)
    calls: list[ToolCall] = []
    for i, entry in enumerate(raw[:MAX_TOOL_CALLS]):
        calls.append(_openai_entry(entry, i, turn))
    return _with_surplus(calls, len(raw), turn)


def _openai_entry(entry: object, i: int, turn: int) -> ToolCall:
    fallback_id = f"call_{turn}_{i}"
    if not isinstance(entry, dict):
        problem = f"tool call #{i} must be an object, got {kind_of(entry)} {echo(entry)}"
        return ToolCall(fallback_id, "invalid", "", one_line(problem))
    raw_id = entry.get("id")
    call_id = clean_text(raw_id)[:64] if isinstance(raw_id, str) and raw_id else fallback_id
    function = entry.get("function")
    if not isinstance(function, dict):
        problem = f"tool call #{i} has no function object (got {kind_of(function)})"
        return ToolCall(call_id, "invalid", "", one_line(problem))
    return _named_call(call_id, function.get("name"), function.get("arguments"), i)


def _named_call(call_id: str, name: object, arguments: object, i: int) -> ToolCall:
    if not isinstance(name, str) or not name.strip():
        problem = f"tool call #{i} needs a function name string, got {kind_of(name)} {echo(name)}"
        return ToolCall(call_id, "invalid", "", one_line(problem))
    label = clean_text(name)[:64]
    text = arguments_text(arguments)
    if text is None:
        problem = f"{echo(label, 40)}: arguments are not serialisable JSON (too deep or invalid)"
        return ToolCall(call_id, label, "", one_line(problem))
    if len(text) > MAX_ARGUMENT_CHARS:
        problem = f"{echo(label, 40)}: arguments longer than {MAX_ARGUMENT_CHARS} characters"
        return ToolCall(call_id, label, text[:ECHO_CHARS], one_line(problem))
    return ToolCall(call_id, label, text)


def _with_surplus(calls: list[ToolCall], total: int, turn: int) -> tuple[ToolCall, ...]:
    """A reply with more than MAX_TOOL_CALLS calls: one extra call answers for the dropped
    ones (the dispatcher counts `dropped_calls` of them invalid)."""
    if total > MAX_TOOL_CALLS:
        dropped = total - MAX_TOOL_CALLS
        problem = (
            f"{dropped} tool call(s) ignored: at most {MAX_TOOL_CALLS} calls per reply are "
            "carried out"
        )
        calls.append(ToolCall(f"call_{turn}_{MAX_TOOL_CALLS}", "invalid", "", problem, dropped))
    return tuple(calls)


def tool_calls_from_anthropic(blocks: list[Any], turn: int = 0) -> tuple[ToolCall, ...]:
    """The `tool_use` blocks of an Anthropic Messages `content` list (other blocks are skipped;
    a block that is not an object is a malformed call)."""
    calls: list[ToolCall] = []
    total = 0
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") != "tool_use":
            continue
        total += 1
        if len(calls) >= MAX_TOOL_CALLS:
            continue
        if not isinstance(block, dict):
            problem = f"content block #{i} must be an object, got {kind_of(block)} {echo(block)}"
            calls.append(ToolCall(f"call_{turn}_{i}", "invalid", "", one_line(problem)))
            continue
        raw_id = block.get("id")
        call_id = clean_text(raw_id)[:64] if isinstance(raw_id, str) and raw_id else ""
        calls.append(
            _named_call(call_id or f"call_{turn}_{i}", block.get("name"), block.get("input"), i)
        )
    return _with_surplus(calls, total, turn)


def reply_text(value: object) -> str | None:
    """Reply text: a string, or OpenAI content parts joined; cut to MAX_REPLY_CHARS. Raises
    ValueError for any other shape (the caller decides whose fault that is)."""
    if value is None:
        return None
    if isinstance(value, list):
        parts = []
        for part in value:
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                raise ValueError(f"content part must be a text object, got {kind_of(part)}")
            parts.append(part.get("text", ""))
        value = "".join(parts)
    if not isinstance(value, str):
        raise ValueError(f"content must be a string, got {kind_of(value)}")
    return clean_text(value[:MAX_REPLY_CHARS])


# -- arguments -------------------------------------------------------------------------------


def parse_arguments(name: str, text: str, schema: dict[str, Any]) -> dict[str, Any] | str:
    """The argument object of a call to tool `name`, or a one-line error (never raises)."""
    example = _example(schema)
    if len(text) > MAX_ARGUMENT_CHARS:
        return f"{name}: arguments longer than {MAX_ARGUMENT_CHARS} characters"
    if not text.strip():
        value: Any = {}
    else:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            return one_line(
                f"{name}: arguments are not valid JSON ({error.msg} at char {error.pos}); "
                f"expected {example}"
            )
        except (ValueError, RecursionError):
            return f"{name}: arguments are not valid JSON (nested too deep); expected {example}"
    if not isinstance(value, dict):
        return one_line(
            f"{name}: arguments must be a JSON object like {example}, got {kind_of(value)}"
        )
    problem = check_schema(value, schema, "")
    if problem:
        return one_line(f"{name}: {problem}; expected {example}")
    return value


def check_schema(value: Any, schema: dict[str, Any], where: str) -> str | None:
    """The first way `value` breaks `schema` (the subset the tools use), or None."""
    kind = schema.get("type")
    label = where or "arguments"
    if kind == "object":
        if not isinstance(value, dict):
            return f"{label} must be an object, got {kind_of(value)}"
        properties: dict[str, Any] = schema.get("properties", {})
        if schema.get("additionalProperties", True) is False:
            extra = [k for k in value if k not in properties]
            if extra:
                return f"unexpected argument {echo(extra[0], 40)}"
        for key in schema.get("required", []):
            if key not in value:
                return f"missing argument {key!r}"
        for key, sub in properties.items():
            if key in value:
                problem = check_schema(value[key], sub, key)
                if problem:
                    return problem
        return None
    if kind == "string":
        if not isinstance(value, str):
            return f"{label} must be a string, got {kind_of(value)} {echo(value, 40)}"
        return None
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{label} must be an integer, got {kind_of(value)} {echo(value, 40)}"
        if "minimum" in schema and value < schema["minimum"]:
            return f"{label} must be >= {schema['minimum']}, got {value}"
        return None
    if kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value):
            return f"{label} must be a finite number, got {echo(value, 40)}"
        return None
    if kind == "array":
        if not isinstance(value, list):
            return f"{label} must be an array, got {kind_of(value)} {echo(value, 40)}"
        items = schema.get("items")
        if items:
            for i, item in enumerate(value):
                problem = check_schema(item, items, f"{label}[{i}]")
                if problem:
                    return problem
        return None
    return None


def _example(schema: dict[str, Any]) -> str:
    properties = schema.get("properties", {})
    samples = {"string": '"text"', "integer": "3", "array": "[3, 4]"}
    parts = [
        f'"{k}": ' + ('"r12"' if k == "seq_id" else samples.get(v.get("type"), "..."))
        for k, v in properties.items()
    ]
    return "{" + ", ".join(parts) + "}"
