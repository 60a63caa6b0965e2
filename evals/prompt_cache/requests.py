"""The shape of one eval request as the cache sees it: OpenAI-format messages cut into the system
prompt, whole past turns and the current prompt, and measured in provider units.

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


def request_units(messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> list[Unit]:
    """Unit 0 is the tool schemas (providers put them first in the cached prefix); unit i + 1 is
    message i."""
    text = tools_text(tools)
    units = [Unit(content_key(text), estimate_tokens(text))]
    units.extend(Unit(content_key(message_text(m)), message_tokens(m)) for m in messages)
    return units
