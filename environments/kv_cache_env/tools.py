"""The LLM's tools: JSON schemas for `evict`, `compress`, `swap`, `noop`, and the dispatcher
that turns one tool call (name + raw JSON arguments) into a validated simulator action.

Nothing a model sends can crash an episode: an unknown tool, arguments that are not JSON, a
missing or mistyped `seq_id`, an unknown or gone sequence, compressing int4, swapping a swapped
sequence... each becomes a one-line error naming what was wrong and what is valid, is counted in
`invalid_calls`, and the episode goes on. Policies and tools share `Simulator.apply`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .sim import ACTION_KINDS, Simulator, make_action

_SEQ_ID = {
    "type": "string",
    "description": 'Id of a sequence in the observation table, e.g. "r12".',
}


def _tool(name: str, description: str, with_seq_id: bool = True) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    if with_seq_id:
        parameters["properties"] = {"seq_id": _SEQ_ID}
        parameters["required"] = ["seq_id"]
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOLS: list[dict[str, Any]] = [
    _tool(
        "evict",
        "Preempt a sequence (GPU-resident or swapped): free all its blocks now; shared prefix "
        "blocks only lose a reference. It goes back to the front of the waiting queue, cannot "
        "return this step, must recompute its whole context when readmitted, and fails if it "
        "then waits more than the wait limit.",
    ),
    _tool(
        "compress",
        "Quantize a GPU-resident sequence's private KV one level (fp16 -> int8 -> int4; one "
        "level per call, call twice for int4). Each level halves its private blocks. Tokens it "
        "generates afterwards count less toward throughput (int8 ~2%, int4 ~10% loss; "
        "reasoning and system sequences lose more, ephemeral less). Compressing int4 is an error.",
    ),
    _tool(
        "swap",
        "Move a GPU-resident sequence's private blocks to CPU. It stops generating until it is "
        "swapped back in automatically (not this step) when blocks allow; while any sequence "
        "is swapped out, no new request is admitted. Each swap-in adds latency.",
    ),
    _tool("noop", "Do nothing this turn.", with_seq_id=False),
]
TOOL_NAMES: tuple[str, ...] = ACTION_KINDS


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    name: str
    ok: bool
    message: str
    """What the model is told: the result, or a one-line error naming what is valid."""


def call_tool(sim: Simulator, name: object, arguments: object) -> ToolOutcome:
    """Carry out one tool call on `sim`; `arguments` is the raw JSON string (or a dict)."""
    label = name if isinstance(name, str) else repr(name)
    if name not in TOOL_NAMES:
        return _invalid(sim, label, f"unknown tool {label!r}; tools: {', '.join(TOOL_NAMES)}")
    args: Any = arguments
    if isinstance(arguments, str):
        if not arguments.strip():
            args = {}
        else:
            try:
                args = json.loads(arguments)
            except json.JSONDecodeError as error:
                return _invalid(
                    sim,
                    label,
                    f"{label}: arguments are not valid JSON ({error.msg} at char {error.pos}); "
                    f"expected {_example(label)}",
                )
    elif arguments is None:
        args = {}
    if not isinstance(args, dict):
        return _invalid(
            sim, label, f"{label}: arguments must be a JSON object like {_example(label)}"
        )
    action = make_action(label, args.get("seq_id"))
    if isinstance(action, str):
        return _invalid(sim, label, action)
    result = sim.apply(action)
    return ToolOutcome(
        label, result.ok, result.message if result.ok else f"error: {result.message}"
    )


def _example(name: str) -> str:
    return "{}" if name == "noop" else '{"seq_id": "r12"}'


def _invalid(sim: Simulator, name: str, message: str) -> ToolOutcome:
    sim.count_invalid()
    return ToolOutcome(name, False, f"error: {message}")
