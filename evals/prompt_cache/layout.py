"""Request layout of a tier snapshot (the tier design, "Cache Block Structure"): which segments are
sent in which order, and which carry a `cache_control` breakpoint.

Order: L0 fixed content (system prompt, tool schemas, legend), L0 symbols/files, L0 history,
then L1 symbols/files, L1 history, ... L3 history, then the uncached active files and active
history. The current user prompt (and any other uncached context such as a file tree) is the
caller's and comes after. Empty segments and empty tiers are skipped.

Breakpoints: each non-empty cached tier (L0–L3) puts its breakpoint on its last segment
(history if any, else symbols/files, else for L0 the fixed content), at most `max_breakpoints`,
handed out from L0 down. Prefix rule: a breakpoint caches the whole prefix up to and including
its segment, and Anthropic silently ignores one whose prefix is under `cache_min_tokens`, so such
a breakpoint is not marked (it would waste one of the four). Active segments never carry one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from evals.prompt_cache.tiers import CACHED_TIERS, TIERS, Tier, TierSnapshot, kind_of

Part = Literal["fixed", "context", "history"]
MAX_BREAKPOINTS = 4
"""Anthropic's limit of `cache_control` markers per request."""


@dataclass(frozen=True)
class Segment:
    """A run of consecutive content of one tier (one or more messages when rendered)."""

    tier: Tier
    part: Part
    """"fixed": L0 fixed content (no item keys); "context": symbol entries then files;
    "history": conversation messages in time order."""
    keys: tuple[str, ...]
    """Item keys in send order (empty for "fixed")."""
    tokens: int
    """Tokens of this segment alone."""
    breakpoint: bool
    """True when its last message carries `cache_control` (cached tiers only)."""


def layout(
    snapshot: TierSnapshot,
    tokens: Mapping[str, int],
    fixed_l0_tokens: int,
    *,
    cache_min_tokens: int = 1024,
    max_breakpoints: int = MAX_BREAKPOINTS,
) -> list[Segment]:
    """Segments of one request in send order, with breakpoints marked (see module doc).

    `tokens` gives every item key's tokens; `fixed_l0_tokens` those of the fixed L0 content
    (0 when there is none).
    """
    if fixed_l0_tokens < 0:
        raise ValueError(f"fixed_l0_tokens must be >= 0, got {fixed_l0_tokens}")
    if not 0 <= max_breakpoints <= MAX_BREAKPOINTS:
        raise ValueError(f"max_breakpoints must be in 0..{MAX_BREAKPOINTS}, got {max_breakpoints}")
    segments: list[Segment] = []
    prefix = 0
    left = max_breakpoints
    for tier in TIERS:
        parts = _tier_parts(tier, snapshot.tiers.get(tier, ()), tokens, fixed_l0_tokens)
        for index, (part, keys, size) in enumerate(parts):
            prefix += size
            last_of_cached = tier in CACHED_TIERS and index == len(parts) - 1
            mark = last_of_cached and left > 0 and prefix >= cache_min_tokens
            left -= mark
            segments.append(Segment(tier, part, keys, size, mark))
    return segments


def _tier_parts(
    tier: Tier,
    keys: tuple[str, ...],
    tokens: Mapping[str, int],
    fixed_l0_tokens: int,
) -> list[tuple[Part, tuple[str, ...], int]]:
    """The non-empty (part, keys, tokens) of one tier, in send order."""
    missing = [key for key in keys if key not in tokens]
    if missing:
        raise ValueError(f"no token count for {missing[0]!r}")
    context = tuple(key for key in keys if kind_of(key) != "history")
    history = tuple(key for key in keys if kind_of(key) == "history")
    parts: list[tuple[Part, tuple[str, ...], int]] = []
    if tier == "L0" and fixed_l0_tokens > 0:
        parts.append(("fixed", (), fixed_l0_tokens))
    if context:
        parts.append(("context", context, sum(tokens[key] for key in context)))
    if history:
        parts.append(("history", history, sum(tokens[key] for key in history)))
    return parts
