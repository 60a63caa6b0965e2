"""The agent loop's chat function over the official `openai` client (any OpenAI-compatible
chat-completions endpoint: a provider, a local server, or verifiers' per-rollout interception).

The SDK sends the request and retries transport failures (429, 5xx, timeouts); the raw body of
its answer goes through `model_client.provider_responses.openai_reply`, so a 200 that is not
a chat completion is a `ProviderError`, retried the same number of times, never a crash."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from openai import AsyncOpenAI

from .provider_responses import ProviderError, openai_reply, with_retries
from .reply import ChatFn, ModelReply

EmptyReplyError = ProviderError
"""Kept for callers of the first version: an endpoint that answered without a completion."""

Prepare = Callable[[list[dict[str, Any]], list[dict[str, Any]]], list[dict[str, Any]]]
"""Rewrites the messages of one request just before it is sent (e.g. `cache_control` parts)."""


def openai_chat(
    client: AsyncOpenAI,
    model: str,
    sampling: Mapping[str, Any] | None = None,
    prepare: Prepare | None = None,
    request_seed: Callable[[], int] | None = None,
) -> ChatFn:
    """`request_seed`, if given, draws each request's `seed` (the sampling seed OpenAI's API and
    llama.cpp's server accept): fresh samples per rollout, reproducible per seed. A retry resends
    the same seed."""
    extra = dict(sampling or {})

    async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        seeded = extra | ({"seed": request_seed()} if request_seed is not None else {})

        async def send() -> bytes:
            raw = await client.chat.completions.with_raw_response.create(
                model=model,
                messages=prepare(messages, tools) if prepare else joined_text(messages),  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
                **seeded,
            )
            return raw.http_response.content

        return await with_retries(send, openai_reply, client.max_retries)

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
