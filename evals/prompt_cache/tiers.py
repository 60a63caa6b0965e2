"""Stability tiers for provider prompt caching: the tracker that places a session's history
items (whole turns, or the stable blocks of one message) in the cached tier L3 or in active,
once per request, so a cached prefix changes as rarely as it can.

The tier design this follows (`docs/prompt-caching.md`) has four cached tiers L0–L3 above an
active tier, and moves files and symbol entries up through them by stability counters. The
planners give the tracker history items only, and for history that design reduces to the rules
below: nothing ever rises above L3 (an item leaves L3 upward only into an invalidated L2, and
only history could invalidate L2), so the tracker keeps exactly these rules. `TIERS` keeps the
whole layout order for `layout.py`.

One `update` is one request, in this order:

1. demotions: a tracked item whose content changed goes back to active, and so does every
   history item after the first new or changed one (history stays in time order across tiers:
   providers reject a tool call split from its result); the tier it left is invalidated;
2. removals: tracked items not sent any more leave their tier, which is invalidated;
3. new items enter active; known items take the caller's current token count;
4. graduation: when the active items' tokens exceed `cache_target_tokens`, the oldest of them
   move to L3 until the moved tokens reach the target (one block of at least the provider
   minimum; the newest turns wait for the next full block, so a long session does not break L3
   on every request), which is then invalidated; never when the target is 0.

Reordering tracked items is a caller error (`ValueError`). There is no persistence: a tracker
lives for one session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

Tier = Literal["L0", "L1", "L2", "L3", "active"]
TIERS: tuple[Tier, ...] = ("L0", "L1", "L2", "L3", "active")
"""All tiers in layout order, most stable first."""
CACHED_TIERS: tuple[Tier, ...] = ("L0", "L1", "L2", "L3")
"""Tiers that are cache blocks (each ends with a breakpoint when it has content)."""

Kind = Literal["file", "symbol", "history", "fixed"]
FILE_PREFIX = "file:"
SYMBOL_PREFIX = "symbol:"
HISTORY_PREFIX = "history:"


@dataclass(frozen=True)
class TierConfig:
    """Token gating of the tiers (the design's `cacheMinTokens`, `cacheBufferMultiplier`)."""

    cache_min_tokens: int = 1024
    """Provider minimum for a cache block (Anthropic: 1024); 0 disables history graduation."""
    cache_buffer_multiplier: float = 1.5
    """Safety margin over the minimum, > 0."""

    def __post_init__(self) -> None:
        if self.cache_min_tokens < 0:
            raise ValueError(f"cache_min_tokens must be >= 0, got {self.cache_min_tokens}")
        if self.cache_buffer_multiplier <= 0:
            raise ValueError(
                f"cache_buffer_multiplier must be > 0, got {self.cache_buffer_multiplier}"
            )

    @property
    def cache_target_tokens(self) -> int:
        """``cache_min_tokens × cache_buffer_multiplier`` rounded to an int (1536 by default);
        0 when `cache_min_tokens` is 0."""
        if self.cache_min_tokens == 0:
            return 0
        return round(self.cache_min_tokens * self.cache_buffer_multiplier)


def kind_of(key: str) -> Kind:
    """Item kind from the key prefix (how `layout` tells history from other cached content);
    any other key is fixed L0 content."""
    if key.startswith(FILE_PREFIX):
        return "file"
    if key.startswith(SYMBOL_PREFIX):
        return "symbol"
    if key.startswith(HISTORY_PREFIX):
        return "history"
    return "fixed"


@dataclass(frozen=True)
class Item:
    """One history item as the caller sends it on a request."""

    key: str
    """``history:ID``: stable for the item's life (the planners use a digest of its text)."""
    content: str
    """What is sent (and hashed: a changed content is a changed item)."""
    tokens: int
    """Tokens of `content` (`tokens.estimate_tokens`); >= 0."""


@dataclass(frozen=True)
class TierSnapshot:
    """The tiers after one request.

    `tiers[T]` lists T's item keys in time order. A cached tier not in `invalidated` has exactly
    the keys, order and contents of the previous request.
    """

    tiers: Mapping[Tier, tuple[str, ...]]
    """Item keys per tier (every tier present, possibly empty), in layout order."""
    invalidated: frozenset[Tier]
    """Cached tiers whose content changed on this request (a cache miss)."""


@dataclass
class _Entry:
    """Tracker state of one item; only `StabilityTracker` touches it."""

    content_hash: str
    tokens: int
    tier: Tier
    """L3 or active."""
    time: int = -1
    """Position in the latest request's history (time order)."""


class StabilityTracker:
    """Tier assignment of a session's history items (see module doc)."""

    def __init__(self, config: TierConfig = TierConfig()) -> None:
        self._config = config
        self._entries: dict[str, _Entry] = {}

    @property
    def config(self) -> TierConfig:
        return self._config

    def tier_of(self, key: str) -> Tier:
        """Tier of a tracked item (KeyError if untracked)."""
        return self._entries[key].tier

    def update(self, history: Sequence[Item]) -> TierSnapshot:
        """Apply one request, `history` being every item it sends in time order, and return the
        tiers to send."""
        _check_items(history)
        self._check_order(history)
        invalidated: set[Tier] = set()
        first_changed = next(
            (index for index, item in enumerate(history) if self._changed(item)), len(history)
        )
        for index, item in enumerate(history):  # step 1
            entry = self._entries.get(item.key)
            if entry is None:
                continue
            after_a_change = index > first_changed and entry.tier != "active"
            if self._changed(item) or after_a_change:
                self._remove(item.key, invalidated)
        sent = {item.key for item in history}
        for key in [key for key in self._entries if key not in sent]:  # step 2
            self._remove(key, invalidated)
        for time, item in enumerate(history):  # step 3
            entry = self._entries.setdefault(
                item.key, _Entry(_content_hash(item.content), item.tokens, "active")
            )
            entry.tokens = item.tokens
            entry.time = time
        for key in self._graduating():  # step 4
            self._entries[key].tier = "L3"
            invalidated.add("L3")
        return TierSnapshot(
            tiers={tier: self._keys(tier) for tier in TIERS}, invalidated=frozenset(invalidated)
        )

    def _changed(self, item: Item) -> bool:
        """New, or its content changed since the last request."""
        entry = self._entries.get(item.key)
        return entry is None or entry.content_hash != _content_hash(item.content)

    def _check_order(self, history: Sequence[Item]) -> None:
        times = [self._entries[item.key].time for item in history if item.key in self._entries]
        if any(later <= earlier for earlier, later in pairwise(times)):
            raise ValueError("tracked history items were reordered; history is append-only")

    def _remove(self, key: str, invalidated: set[Tier]) -> None:
        entry = self._entries.pop(key)
        if entry.tier != "active":
            invalidated.add(entry.tier)

    def _graduating(self) -> list[str]:
        """Active items moving to L3 (step 4), oldest first."""
        target = self._config.cache_target_tokens
        active = self._keys("active")
        if target == 0 or sum(self._entries[key].tokens for key in active) <= target:
            return []
        chosen: list[str] = []
        total = 0
        for key in active:
            if total >= target:
                break
            chosen.append(key)
            total += self._entries[key].tokens
        return chosen

    def _keys(self, tier: Tier) -> tuple[str, ...]:
        keys = [key for key, entry in self._entries.items() if entry.tier == tier]
        return tuple(sorted(keys, key=lambda key: self._entries[key].time))


def _content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _check_items(history: Sequence[Item]) -> None:
    """History keys, non-negative tokens, no duplicates (misuse is a `ValueError`)."""
    seen: set[str] = set()
    for item in history:
        if kind_of(item.key) != "history":
            raise ValueError(f"history items need the history: prefix, got {item.key!r}")
        if item.tokens < 0:
            raise ValueError(f"{item.key!r} has negative tokens")
        if item.key in seen:
            raise ValueError(f"duplicate item {item.key!r}")
        seen.add(item.key)
