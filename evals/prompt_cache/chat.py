"""Chat functions for endpoints with explicit prompt caching: Anthropic's Messages API through the
official `anthropic` SDK, and OpenAI-compatible endpoints that accept `cache_control` parts.

Each chat function holds one breakpoint planner, so make one per episode (the tier tracker
counts stability across that episode's requests). Token usage comes from the provider's own
fields: Anthropic's `input_tokens` (after the last breakpoint), `cache_read_input_tokens` and
`cache_creation_input_tokens`; OpenAI-compatible `prompt_tokens_details.cached_tokens` and,
where the endpoint reports it, `cache_write_tokens`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from model_client.openai_chat import openai_chat
from model_client.provider_responses import anthropic_reply, with_retries
from model_client.reply import ChatFn, ModelReply, TokenUsage

from .render import anthropic_request, openai_cached_messages
from .requests import split_request
from .strategies import Planner, tools_tokens

DEFAULT_MAX_TOKENS = 1024
"""Anthropic requires `max_tokens`; used when the caller sets none."""


def _plan(
    planner: Planner, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[int]:
    return planner.plan(split_request(messages), tools_tokens(tools))


def anthropic_chat(
    client: Any, model: str, planner: Planner, sampling: Mapping[str, Any] | None = None
) -> ChatFn:
    """`client` is an `anthropic.AsyncAnthropic`."""
    extra = dict(sampling or {})
    extra.setdefault("max_tokens", DEFAULT_MAX_TOKENS)

    async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        request = anthropic_request(messages, tools, _plan(planner, messages, tools))

        async def send() -> bytes:
            raw = await client.messages.with_raw_response.create(model=model, **request, **extra)
            return raw.http_response.content

        return await with_retries(send, anthropic_reply, client.max_retries)

    return chat


def anthropic_usage(usage: Any) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    fresh = getattr(usage, "input_tokens", 0) or 0
    read = getattr(usage, "cache_read_input_tokens", 0) or 0
    written = getattr(usage, "cache_creation_input_tokens", 0) or 0
    return TokenUsage(
        input_tokens=fresh + read + written,
        cached_input_tokens=read,
        output_tokens=getattr(usage, "output_tokens", 0) or 0,
        cache_write_input_tokens=written,
    )


def openai_cached_chat(
    client: Any,
    model: str,
    planner: Planner,
    sampling: Mapping[str, Any] | None = None,
    request_seed: Callable[[], int] | None = None,
) -> ChatFn:
    """`client` is an `openai.AsyncOpenAI` for an endpoint that honours `cache_control`."""

    def prepare(
        messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return openai_cached_messages(messages, _plan(planner, messages, tools))

    return openai_chat(client, model, sampling, prepare, request_seed)
