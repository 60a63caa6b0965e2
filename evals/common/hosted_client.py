"""The HTTP layer under the hosted-model clients (the `openai` and `anthropic` SDKs), bounded
whatever the endpoint does.

Each SDK keeps its own retries (429, 5xx, timeouts, dropped connections); underneath, every
attempt goes through `guarded_transport`:
- one wall-clock deadline per attempt (`--timeout`) around all of it: connecting, sending,
  the headers and the whole body. A server that trickles a byte every half second is cut off
  at the deadline (the SDK's own timeout bounds each read, not the attempt), and the attempt
  counts as a timeout, retried like one;
- the body is read at most `MAX_RESPONSE_BYTES` (the response limit of
  `model_client.provider_responses`) plus one byte, decompressed (gzip, deflate) within the same
  bound; a larger answer, or one compressed otherwise, ends the attempt with
  `ResponseRefused` saying why (the SDK retries it as a connection error);
- `Retry-After` / `retry-after-ms` are capped at `MAX_RETRY_AFTER_S` (60 s): the Anthropic SDK
  honours any value (a 429 asking for 999,999 s stalled a run for days) and the OpenAI SDK any
  value up to two minutes.

`openai_client` / `anthropic_client` build the SDK clients on it; the key they are given and
the secrets in the base URL are registered with the secret scrubber (`secrets`).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import time
import zlib
from typing import Any

import httpx

from model_client.provider_responses import MAX_RESPONSE_BYTES

from .secrets import register_secret, register_url_secrets

MAX_RETRY_AFTER_S = 60.0
"""Longest wait between attempts an endpoint can ask for."""
MAX_CONNECTIONS = 1000
"""Connections per client (as the SDKs' own defaults): more than the largest --concurrency."""


class ResponseRefused(Exception):
    """An answer read no further: over the size limit, or compressed in a way not read."""


def capped_retry_after(headers: Any) -> dict[str, str] | None:
    """New `retry-after-ms` / `retry-after` values no longer than `MAX_RETRY_AFTER_S`, as the
    SDKs would read the headers (milliseconds first, then seconds, then an HTTP date); None
    when there is nothing to change."""
    delay: float | None = None
    raw_ms, raw_s = headers.get("retry-after-ms"), headers.get("retry-after")
    for raw, scale in ((raw_ms, 1000.0), (raw_s, 1.0)):
        if raw is None:
            continue
        try:
            delay = float(raw) / scale
            break
        except ValueError:
            continue
    if delay is None and raw_s is not None:
        parsed = email.utils.parsedate_tz(raw_s)
        if parsed is not None:
            delay = email.utils.mktime_tz(parsed) - time.time()
    if delay is None:
        return None
    if not math.isfinite(delay) or delay > MAX_RETRY_AFTER_S:
        delay = MAX_RETRY_AFTER_S
    delay = max(0.0, delay)
    return {"retry-after-ms": f"{delay * 1000:.0f}", "retry-after": str(math.ceil(delay))}


def _decompress(data: bytes, encoding: str) -> bytes:
    """`data` decoded from `encoding` (gzip, deflate), at most MAX_RESPONSE_BYTES + 1 bytes."""
    if encoding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(wbits=31)
    elif encoding == "deflate":
        decoder = zlib.decompressobj(wbits=47 if data[:1] == b"\x78" else -15)
    else:
        raise ResponseRefused(f"a response compressed with {encoding!r}, which is not read")
    try:
        out = decoder.decompress(data, MAX_RESPONSE_BYTES + 1)
    except zlib.error as error:
        raise ResponseRefused(f"a corrupt {encoding} response ({error})") from None
    if len(out) > MAX_RESPONSE_BYTES:
        raise ResponseRefused(
            f"a response body over {MAX_RESPONSE_BYTES} bytes once decompressed (limit)"
        )
    return out


def guarded_transport(module: Any, deadline_s: float) -> Any:
    """An `AsyncHTTPTransport` of `module` (`httpx`, or the Anthropic SDK's `httpx2`) with the
    module docstring's bounds."""

    class GuardedTransport(module.AsyncHTTPTransport):  # type: ignore[name-defined,misc]
        async def handle_async_request(self, request: Any) -> Any:
            request.headers["Accept-Encoding"] = "gzip, deflate"
            try:
                async with asyncio.timeout(deadline_s):
                    response = await super().handle_async_request(request)
                    try:
                        body = await _read_bounded(response)
                    finally:
                        await response.aclose()
            except TimeoutError:
                raise module.ReadTimeout(
                    f"no whole answer within {deadline_s:g} s (--timeout)", request=request
                ) from None
            headers = module.Headers(response.headers)
            encoding = headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                body = _decompress(body, encoding)
                del headers["content-encoding"]
                headers["content-length"] = str(len(body))
            if (capped := capped_retry_after(headers)) is not None:
                headers.update(capped)
            return module.Response(
                status_code=response.status_code,
                headers=headers,
                content=body,
                extensions=response.extensions,
            )

    return GuardedTransport(limits=module.Limits(max_connections=MAX_CONNECTIONS))


async def _read_bounded(response: Any) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.stream:
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ResponseRefused(f"a response body over {MAX_RESPONSE_BYTES} bytes (limit)")
        chunks.append(chunk)
    return b"".join(chunks)


def openai_client(api_key: str, base_url: str | None, timeout_s: float, max_retries: int) -> Any:
    """An `openai.AsyncOpenAI` on the guarded transport."""
    import openai

    register_secret(api_key)
    register_url_secrets(base_url)
    transport = guarded_transport(httpx, timeout_s)
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout_s,
        max_retries=max_retries,
        http_client=openai.DefaultAsyncHttpxClient(transport=transport),
    )


def anthropic_client(api_key: str, base_url: str | None, timeout_s: float, max_retries: int) -> Any:
    """An `anthropic.AsyncAnthropic` on the guarded transport (of its own HTTP library)."""
    import anthropic

    register_secret(api_key)
    register_url_secrets(base_url)
    module = _anthropic_http_module()
    transport = guarded_transport(module, timeout_s)
    return anthropic.AsyncAnthropic(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout_s,
        max_retries=max_retries,
        http_client=anthropic.DefaultAsyncHttpxClient(transport=transport),
    )


def _anthropic_http_module() -> Any:
    """The HTTP library the installed Anthropic SDK speaks (`httpx2` in 2.x, `httpx` before)."""
    import anthropic._base_client as base

    return getattr(base, "httpx2", None) or getattr(base, "httpx", httpx)
