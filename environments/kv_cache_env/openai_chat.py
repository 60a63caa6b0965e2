"""The agent loop's chat function over the official `openai` client (any OpenAI-compatible
chat-completions endpoint: a provider, a local server, or verifiers' per-rollout interception)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openai import AsyncOpenAI

from .agent import ChatFn, ModelReply, TokenUsage, ToolCall


class EmptyReplyError(Exception):
    """The endpoint answered without any choice."""


def openai_chat(
    client: AsyncOpenAI, model: str, sampling: Mapping[str, Any] | None = None
) -> ChatFn:
    extra = dict(sampling or {})

    async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        response = await client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            **extra,
        )
        if not response.choices:
            raise EmptyReplyError("the endpoint returned no choices")
        message = response.choices[0].message
        calls = tuple(
            ToolCall(call.id or "", call.function.name, call.function.arguments or "")
            for call in message.tool_calls or []
            if getattr(call, "function", None) is not None
        )
        return ModelReply(message.content, calls, _usage(response.usage))

    return chat


def _usage(usage: Any) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return TokenUsage(usage.prompt_tokens or 0, cached, usage.completion_tokens or 0)
