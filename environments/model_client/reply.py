"""What a chat model answers, in the shape every caller speaks: its reply (text, tool calls,
token usage), the chat function that sends a conversation and returns a reply, the assistant
message a reply leaves in the conversation, and a finished conversation with its usage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .model_output import ToolCall, clean_text

Message = dict[str, Any]


@dataclass(slots=True)
class TokenUsage:
    input_tokens: int = 0
    """All prompt tokens, cached or not (OpenAI's `prompt_tokens`)."""
    cached_input_tokens: int = 0
    """Prompt tokens read from the provider's cache."""
    output_tokens: int = 0
    cache_write_input_tokens: int = 0
    """Prompt tokens written to the provider's cache (billed at the write price)."""

    def add(self, other: TokenUsage) -> None:
        self.input_tokens += other.input_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.output_tokens += other.output_tokens
        self.cache_write_input_tokens += other.cache_write_input_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_input_tokens": self.cache_write_input_tokens,
        }


@dataclass(frozen=True, slots=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: TokenUsage = field(default_factory=TokenUsage)


ChatFn = Callable[[list[Message], list[dict[str, Any]]], Awaitable[ModelReply]]
"""Send `messages` with `tools` to the model; return its reply."""


def assistant_message(reply: ModelReply, turn: int) -> tuple[Message, list[ToolCall]]:
    """The assistant message to keep in the conversation for `reply`, and its tool calls with
    ids filled in (`call_{turn}_{i}` where the model gave none or repeated one)."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for i, call in enumerate(reply.tool_calls):
        call_id = call.id if call.id and call.id not in seen else f"call_{turn}_{i}"
        seen.add(call_id)
        calls.append(ToolCall(call_id, call.name, call.arguments, call.problem, call.invalid_count))
    message: Message = {"role": "assistant", "content": clean_text(reply.content or "")}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    return message, calls


@dataclass
class Transcript:
    messages: list[Message]
    """The whole conversation: system prompt, then every turn's user/assistant/tool messages."""
    usage: TokenUsage
    turns: int
