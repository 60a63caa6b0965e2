"""The chat-model reader of the conversation-context family: any OpenAI-compatible chat model
answers a planted question from the visible context (`reader_messages`). Both the CLI and the
verifiers taskset use it, so it lives below both. (The keyless default is
`kv_context_env.readers.extractive.extractive_reader`.)
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kv_context_env.sim.episode import ContextEpisode
from model_client.provider_responses import ProviderError, openai_reply, with_retries

from .agent import reader_messages


@dataclass
class ChatReader:
    """A chat model as the reader: the visible context as text, then the question.

    `__call__` (policy runs) uses a synchronous client, or, given `client_factory` (a callable
    returning an async OpenAI client, such as the CLI's bounded one), a fresh async client per
    question on its own event loop; the LLM agent loop calls `answer` with the asynchronous
    client of its own event loop (a client must not outlive its loop)."""

    base_url: str | None
    api_key: str
    model: str
    timeout_s: float = 120.0
    max_tokens: int = 64
    max_retries: int = 2
    """Retries per question (the synchronous client's; `answer` uses its client's)."""
    client_factory: Callable[[], Any] | None = None
    _sync: Any = None

    async def answer(self, client: Any, context: str, question: str) -> str:
        async def send() -> bytes:
            raw = await client.chat.completions.with_raw_response.create(
                **self._request(context, question)
            )
            return raw.http_response.content

        reply = await with_retries(send, openai_reply, client.max_retries)
        return html.unescape(reply.content or "").strip()

    def __call__(self, episode: ContextEpisode, question: str) -> str:
        if self.client_factory is not None:
            factory = self.client_factory

            async def ask() -> str:
                async with factory() as client:
                    return await self.answer(client, episode.visible_text(), question)

            return asyncio.run(ask())
        if self._sync is None:
            import openai

            self._sync = openai.OpenAI(
                api_key=self.api_key,
                base_url=self.base_url,
                timeout=self.timeout_s,
                max_retries=self.max_retries,
            )
        for attempt in range(self._sync.max_retries + 1):
            raw = self._sync.chat.completions.with_raw_response.create(
                **self._request(episode.visible_text(), question)
            )
            try:
                return _reply_text(raw.http_response.content)
            except ProviderError:
                if attempt == self._sync.max_retries:
                    raise
        raise AssertionError("unreachable")

    def _request(self, context: str, question: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": reader_messages(context, question),
            "max_tokens": self.max_tokens,
            "temperature": 0,
        }


def _reply_text(body: bytes) -> str:
    """The answer text; HTML entities unescaped (SmolLM2 under llama.cpp writes `&#39;`). A
    body that is not a chat completion raises `ProviderError` (the episode fails with it)."""
    return html.unescape(openai_reply(body).content or "").strip()
