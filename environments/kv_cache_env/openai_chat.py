"""The agent loop's chat function over the official `openai` client (any OpenAI-compatible
chat-completions endpoint: a provider, a local server, or verifiers' per-rollout interception)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from openai import AsyncOpenAI

from .agent import ChatFn, ModelReply, TokenUsage, ToolCall


class EmptyReplyError(Exception):
    """The endpoint answered without any choice."""


Prepare = Callable[[list[dict[str, Any]], list[dict[str, Any]]], list[dict[str, Any]]]
"""Rewrites the messages of one request just before it is sent (e.g. `cache_control` parts)."""


def openai_chat(
    client: AsyncOpenAI,
    model: str,
    sampling: Mapping[str, Any] | None = None,
    prepare: Prepare | None = None,
) -> ChatFn:
    extra = dict(sampling or {})

    async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        response = await client.chat.completions.create(
            model=model,
            messages=prepare(messages, tools) if prepare else joined_text(messages),  # type: ignore[arg-type]
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


def joined_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages whose content is a list of text parts (the context family's observation blocks,
    there for prompt-cache breakpoints) sent as one string, the parts joined: chat templates of
    local servers (llama.cpp's chatml) render a list as its Python repr."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" for p in content
        ):
            message = {**message, "content": "".join(p.get("text", "") for p in content)}
        out.append(message)
    return out


def _usage(usage: Any) -> TokenUsage:
    """OpenAI usage fields; `cache_write_tokens` where the endpoint reports it (OpenRouter)."""
    if usage is None:
        return TokenUsage()
    details = getattr(usage, "prompt_tokens_details", None)
    return TokenUsage(
        input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        cached_input_tokens=getattr(details, "cached_tokens", 0) or 0,
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cache_write_input_tokens=getattr(details, "cache_write_tokens", 0) or 0,
    )
