"""The boundary where provider responses become replies: the raw body of an HTTP 200 from an
OpenAI chat-completions or Anthropic Messages endpoint -> `ModelReply`, or `ProviderError`.

A body that is not a valid completion — not UTF-8, not JSON, an HTML page, a JSON string, no
`choices`, `choices: [null]`, a choice without `message`, content that is neither text nor
text parts, an Anthropic `error` object, a body over `MAX_RESPONSE_BYTES` — raises
`ProviderError` with a one-line reason. `with_retries` retries it like a 5xx (exponential
back-off, the client's `max_retries`); when the retries run out the caller records the episode
`failed` with that reason. What the model *said* is never an error here: malformed tool calls
pass through `model_client.model_output` and come out as invalid calls the episode answers.
Transport errors (HTTP 429/5xx, timeouts, dropped connections) stay with the SDK's own retries.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from .model_output import (
    echo,
    kind_of,
    one_line,
    reply_text,
    tool_calls_from_anthropic,
    tool_calls_from_openai,
)
from .reply import ModelReply, TokenUsage

MAX_RESPONSE_BYTES = 4 << 20
"""The largest response body accepted (4 MiB); a larger one is a provider error."""
RETRY_BACKOFF_S = float(os.environ.get("KVARENA_RETRY_BACKOFF_S", "0.5"))
"""First back-off before retrying a provider error; doubles each retry (tests set 0)."""
MAX_BACKOFF_S = 8.0


class ProviderError(Exception):
    """A response that is not a valid completion; the message is one line saying why."""


def _load(body: bytes | str) -> dict[str, Any]:
    if isinstance(body, bytes):
        if len(body) > MAX_RESPONSE_BYTES:
            raise ProviderError(f"response body of {len(body)} bytes (limit {MAX_RESPONSE_BYTES})")
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ProviderError(f"response body is not UTF-8 (byte {error.start})") from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise ProviderError(f"response body of {len(body)} characters (limit)")
    if not body.strip():
        raise ProviderError("empty response body")
    try:
        value = json.loads(body)
    except json.JSONDecodeError as error:
        raise ProviderError(
            one_line(f"response is not JSON ({error.msg} at char {error.pos}): {echo(body, 60)}")
        ) from None
    except (ValueError, RecursionError):
        raise ProviderError("response is not JSON (nested too deep)") from None
    if not isinstance(value, dict):
        raise ProviderError(f"response is a JSON {kind_of(value)}, not an object: {echo(value)}")
    return value


def _error_reason(value: dict[str, Any]) -> str | None:
    error = value.get("error")
    if error is None:
        return None
    message = error.get("message") if isinstance(error, dict) else error
    return one_line(f"the endpoint answered with an error: {echo(message, 120)}")


def openai_reply(body: bytes | str, turn: int = 0) -> ModelReply:
    """The reply in a chat-completions response body; ProviderError if it holds none."""
    value = _load(body)
    choices = value.get("choices")
    if not isinstance(choices, list) or not choices:
        reason = _error_reason(value)
        raise ProviderError(reason or f"response has no choices (got {kind_of(choices)})")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ProviderError(f"choices[0] is {kind_of(choice)}, not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ProviderError(f"choices[0].message is {kind_of(message)}, not an object")
    try:
        content = reply_text(message.get("content"))
    except ValueError as error:
        raise ProviderError(f"choices[0].message: {error}") from None
    calls = tool_calls_from_openai(message.get("tool_calls"), turn)
    return ModelReply(content, calls, _openai_usage(value.get("usage")))


def anthropic_reply(body: bytes | str, turn: int = 0) -> ModelReply:
    """The reply in a Messages response body; ProviderError if it holds none."""
    value = _load(body)
    if value.get("type") == "error" or "content" not in value:
        raise ProviderError(_error_reason(value) or "response has no content")
    blocks = value.get("content")
    if not isinstance(blocks, list):
        raise ProviderError(f"content is {kind_of(blocks)}, not a list of blocks")
    if not blocks and value.get("stop_reason") is None:
        raise ProviderError("the endpoint returned no content")
    texts = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            try:
                texts.append(reply_text(block.get("text")) or "")
            except ValueError as error:
                raise ProviderError(f"text block: {error}") from None
    calls = tool_calls_from_anthropic(blocks, turn)
    return ModelReply("".join(texts) or None, calls, _anthropic_usage(value.get("usage")))


def _count(usage: dict[str, Any], *path: str) -> int:
    """A token count from `usage` (0 where absent or not a non-negative integer)."""
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return 0
    return int(min(value, 1 << 40))


def _openai_usage(usage: object) -> TokenUsage:
    """OpenAI usage fields; `cache_write_tokens` where the endpoint reports it (OpenRouter)."""
    if not isinstance(usage, dict):
        return TokenUsage()
    return TokenUsage(
        input_tokens=_count(usage, "prompt_tokens"),
        cached_input_tokens=_count(usage, "prompt_tokens_details", "cached_tokens"),
        output_tokens=_count(usage, "completion_tokens"),
        cache_write_input_tokens=_count(usage, "prompt_tokens_details", "cache_write_tokens"),
    )


def _anthropic_usage(usage: object) -> TokenUsage:
    """Anthropic's `input_tokens` counts only what follows the last breakpoint."""
    if not isinstance(usage, dict):
        return TokenUsage()
    fresh = _count(usage, "input_tokens")
    read = _count(usage, "cache_read_input_tokens")
    written = _count(usage, "cache_creation_input_tokens")
    return TokenUsage(
        input_tokens=fresh + read + written,
        cached_input_tokens=read,
        output_tokens=_count(usage, "output_tokens"),
        cache_write_input_tokens=written,
    )


async def with_retries(
    send: Callable[[], Awaitable[bytes]],
    parse: Callable[[bytes], ModelReply],
    retries: int,
    backoff_s: float | None = None,
) -> ModelReply:
    """`parse(await send())`, sending again up to `retries` times while the body is a
    `ProviderError`; the last one propagates, naming how many attempts were made."""
    first = RETRY_BACKOFF_S if backoff_s is None else backoff_s
    for attempt in range(retries + 1):
        try:
            return parse(await send())
        except ProviderError as error:
            if attempt == retries:
                raise ProviderError(f"{error} (after {retries + 1} attempts)") from None
        await asyncio.sleep(min(first * 2**attempt, MAX_BACKOFF_S))
    raise AssertionError("unreachable")
