"""The LLM's tools: JSON schemas for `evict`, `compress`, `swap`, `noop`, and the dispatcher
that turns one tool call (name + raw JSON arguments) into a validated simulator action.

Nothing a model sends can crash an episode: an unknown tool, arguments that are not JSON, a
missing or mistyped `seq_id`, an unknown or gone sequence, compressing int4, swapping a swapped
sequence, extra or missing arguments, a call without a function (`model_output`)... each becomes a
one-line error (at most 200 characters) naming what was wrong and what is valid, is counted in
`invalid_calls`, and the episode goes on. Policies and tools share `Simulator.apply`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model_client.model_output import (
    ToolCall,
    arguments_text,
    clean_text,
    echo,
    one_line,
    parse_arguments,
)

from ..sim import ACTIONS, AgentTool, Simulator, make_action

_SEQ_ID = {
    "type": "string",
    "description": 'Id of a sequence in the observation table, e.g. "r12".',
}


def tool_schema(tool: AgentTool) -> dict[str, Any]:
    """One tool's JSON schema (OpenAI's function-tool shape), from the action table."""
    parameters: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    if tool.targets:
        parameters["properties"] = {"seq_id": _SEQ_ID}
        parameters["required"] = ["seq_id"]
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
        },
    }


def tool_schemas() -> list[dict[str, Any]]:
    """The tools a model is offered: every tool of the action table, in its order."""
    return [tool_schema(tool) for tool in ACTIONS]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    name: str
    ok: bool
    message: str
    """What the model is told: the result, or a one-line error naming what is valid."""


def call_tool(sim: Simulator, name: object, arguments: object) -> ToolOutcome:
    """Carry out one tool call on `sim`; `arguments` is the raw JSON string (or a dict).
    Never raises: every malformed call is answered (see `model_output`) and counted invalid."""
    label = clean_text(name)[:64] if isinstance(name, str) else repr(name)[:64]
    tool = ACTIONS.get(name) if isinstance(name, str) else None
    if tool is None:
        return _invalid(
            sim, label, f"unknown tool {echo(label, 40)}; tools: {', '.join(ACTIONS.names)}"
        )
    text = arguments_text(arguments)
    if text is None:
        return _invalid(sim, label, f"{label}: arguments are not serialisable JSON")
    args = parse_arguments(label, text, tool_schema(tool)["function"]["parameters"])
    if isinstance(args, str):
        return _invalid(sim, label, args)
    action = make_action(label, args.get("seq_id"))
    if isinstance(action, str):
        return _invalid(sim, label, action)
    result = sim.apply(action)
    message = result.message if result.ok else f"error: {result.message}"
    return ToolOutcome(label, result.ok, one_line(message))


def run_call(sim: Simulator, call: ToolCall) -> ToolOutcome:
    """`call_tool` for a call from the reply boundary: a malformed call (`call.problem`) is
    answered with its problem and counted as the invalid calls it stands for."""
    if call.problem is not None:
        for _ in range(call.invalid_count):
            sim.count_invalid()
        return ToolOutcome(call.name, False, one_line(f"error: {call.problem}"))
    return call_tool(sim, call.name, call.arguments)


def _invalid(sim: Simulator, name: str, message: str) -> ToolOutcome:
    sim.count_invalid()
    return ToolOutcome(name, False, one_line(f"error: {message}"))
