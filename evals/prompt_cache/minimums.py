"""The provider's minimum cacheable prefix per model: a breakpoint whose prefix holds fewer
tokens is silently ignored, so a planner never spends one of its four breakpoints there.

Source: Anthropic's prompt-caching guide, "Cache limitations"
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), as quoted in
anthropics/anthropic-sdk-python issue #1194 (2026): 4096 tokens for Claude Opus 4.6 and 4.5 and
Haiku 4.5; 1024 for Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4 and Sonnet 3.7; 2048 for Haiku 3.5
and Haiku 3. Sonnet 4.6: the guide quoted there says 1024, but that issue reports no caching
below 2048 and gateway docs list 2048 (docs.orq.ai, "Prompt caching"); we take the larger, since
a minimum set too high only forgoes a cache entry while one set too low wastes a breakpoint.
Older models (Claude 3 Opus, 3.5 / 3.7 Sonnet) take 1024 (truefoundry gateway docs, "Chat
completions prompt caching"). Unknown models get `DEFAULT_MIN_TOKENS`, the tier design's
`cacheMinTokens`.
"""

from __future__ import annotations

import re

DEFAULT_MIN_TOKENS = 1024
"""The tier design's `cacheMinTokens` (Anthropic's most common minimum)."""

MIN_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    # (pattern searched in the lower-cased model name, minimum tokens); first match wins, so
    # the more specific versions come first. Names as Anthropic ("claude-opus-4-5-20251101")
    # or gateways ("anthropic/claude-opus-4.5") spell them.
    (r"opus-4[-.][56]", 4096),
    (r"haiku-4[-.]5", 4096),
    (r"sonnet-4[-.]6", 2048),
    (r"sonnet-4[-.]5", 1024),
    (r"opus-4[-.]1", 1024),
    (r"(opus|sonnet)-4", 1024),
    (r"3[-.]7-sonnet|sonnet-3[-.]7", 1024),
    (r"3[-.]5-haiku|haiku-3[-.]5|3-haiku|haiku-3", 2048),
    (r"3[-.]5-sonnet|sonnet-3[-.]5|3-opus|opus-3", 1024),
)


def min_cacheable_tokens(model: str | None) -> int:
    """The minimum cacheable prefix of `model` (`DEFAULT_MIN_TOKENS` when unknown or None)."""
    name = (model or "").lower()
    for pattern, tokens in MIN_CACHEABLE_TOKENS:
        if re.search(pattern, name):
            return tokens
    return DEFAULT_MIN_TOKENS
