"""The shape of one eval request as the cache sees it: OpenAI-format messages cut into the system
prompt, whole past turns and the current prompt, and measured in provider units.

Two granularities. A *part* is where a breakpoint can go: every message is one part, except a
message whose content is a list of text parts (the context family's observation), where each
text part is one. Plans address parts by their index in the request (0 = the system prompt), so
for requests of string messages a part index is the message index. A *unit* is a provider
content block, what the provider's lookback counts (Anthropic: each tool definition, the system
text, each text / tool_use / tool_result block); a part is one or more consecutive units and a
breakpoint on a part sits on its last unit.

A turn is one user observation and everything the agent loop appended after it (the assistant
reply with its tool calls, then one tool message per call): the unit of history that is never
split across cache tiers, since providers reject a tool call separated from its result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .provider import Unit, content_key
from .tokens import estimate_tokens

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RequestShape:
    system: Message
    turns: tuple[tuple[Message, ...], ...]
    """Past turns in time order; each starts with its user message."""
    current: Message
    """The final user message (this turn's observation)."""

    @property
    def messages(self) -> list[Message]:
        return [self.system, *(m for turn in self.turns for m in turn), self.current]


def split_request(messages: Sequence[Message]) -> RequestShape:
    """ValueError unless `messages` is system, whole turns, then one user message."""
    if len(messages) < 2 or messages[0].get("role") != "system":
        raise ValueError("a request starts with the system prompt and holds a user message")
    if messages[-1].get("role") != "user":
        raise ValueError("a request ends with the current user message")
    turns: list[list[Message]] = []
    for message in messages[1:-1]:
        if message.get("role") == "user":
            turns.append([message])
        elif not turns:
            raise ValueError("history must start with a user message")
        else:
            turns[-1].append(message)
    return RequestShape(messages[0], tuple(tuple(t) for t in turns), messages[-1])


def message_text(message: Message) -> str:
    """The exact serialised content of a message (what the provider caches on)."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"))


def message_tokens(message: Message) -> int:
    return estimate_tokens(message_text(message))


def tools_text(tools: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(tools), sort_keys=True, separators=(",", ":"))


def is_multipart(message: Message) -> bool:
    """A message whose content is a list of parts (each part can carry its own breakpoint)."""
    content = message.get("content")
    return isinstance(content, list) and len(content) > 0


def part_count(message: Message) -> int:
    return len(message["content"]) if is_multipart(message) else 1


def part_positions(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Part index -> (message index, index of the part in its message)."""
    return [(i, j) for i, m in enumerate(messages) for j in range(part_count(m))]


def part_text(part: Any) -> str:
    if isinstance(part, dict):
        return str(part.get("text", ""))
    return str(part)


def message_blocks(message: Message) -> list[list[str]]:
    """The provider content blocks of each part of `message` (serialised; what the cache keys
    on): a text part is one block; an assistant message is its text block, if any, then one
    tool_use block per call; a tool result is one block."""
    if is_multipart(message):
        return [[_block({"type": "text", "text": part_text(p)})] for p in message["content"]]
    role = message.get("role")
    if role == "assistant":
        blocks = []
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            blocks.append(_block({"type": "text", "text": content}))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            blocks.append(
                _block(
                    {
                        "type": "tool_use",
                        "id": call.get("id") or "",
                        "name": function.get("name", ""),
                        "input": function.get("arguments", ""),
                    }
                )
            )
        return [blocks or [_block({"type": "text", "text": ""})]]
    if role == "tool":
        return [
            [
                _block(
                    {
                        "type": "tool_result",
                        "id": message.get("tool_call_id") or "",
                        "content": message.get("content"),
                    }
                )
            ]
        ]
    return [[_block({"type": "text", "text": message.get("content")})]]


def _block(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def request_units(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]]
) -> tuple[list[Unit], list[int]]:
    """(units, unit index of each part's last block). The tool definitions come first, one unit
    each (providers put them first in the cached prefix), then each message's blocks."""
    units = [Unit(content_key(t), estimate_tokens(t)) for t in (_block(dict(x)) for x in tools)]
    part_ends: list[int] = []
    for message in messages:
        for blocks in message_blocks(message):
            units.extend(Unit(content_key(b), estimate_tokens(b)) for b in blocks)
            part_ends.append(len(units) - 1)
    return units, part_ends
