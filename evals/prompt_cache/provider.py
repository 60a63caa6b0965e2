"""A model of a provider's explicit prompt cache (Anthropic's `cache_control` semantics), used by
the offline replay and by the keyless Anthropic-shaped test server to answer with realistic
cache usage. No I/O.

A request is a sequence of units, one per provider content block (each tool definition, the
system text, then each text / tool_use / tool_result block of each message; see
`requests.request_units`), each with a content key and a token count, plus the indices of the
units that carry a breakpoint.

- A breakpoint at unit `b` asks the provider to cache the prefix `units[0..b]`. It is honoured
  only when that prefix holds at least `min_tokens` tokens (Anthropic silently ignores smaller
  ones; the minimum depends on the model, `minimums.min_cacheable_tokens`), and at most
  `max_breakpoints` may be given (more is an error, as the API answers 400).
- Reading: for every breakpoint, the provider looks for a cached prefix ending at that unit or
  at one of the `lookback` content blocks before it (Anthropic: "up to 20 blocks before the
  explicit breakpoint"); the longest prefix found is read from the cache.
- Writing: the tokens after the part read, up to the last honoured breakpoint, are written, and
  every honoured breakpoint's prefix becomes a cache entry.
- Everything after that is ordinary input. With no breakpoint nothing is cached or read.

Not modelled: the time to live (5 minutes, refreshed on every hit: an eval's turns are seconds
apart).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

MAX_BREAKPOINTS = 4
LOOKBACK_UNITS = 20
"""Content blocks the provider looks back from a breakpoint for an earlier cache entry."""


@dataclass(frozen=True, slots=True)
class Unit:
    key: str
    """A digest of the unit's exact content (what the provider's cache keys on)."""
    tokens: int


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """Input tokens of one request, split the way providers bill them."""

    uncached: int
    read: int
    written: int
    breakpoints: int
    """Breakpoints sent (marked), honoured or not."""
    honoured: int
    """Breakpoints whose prefix met the provider minimum."""

    @property
    def total(self) -> int:
        return self.uncached + self.read + self.written


class BreakpointError(ValueError):
    """More breakpoints than the provider accepts, or one outside the request."""


def content_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class ProviderCache:
    """The cache of one provider account for one conversation's requests."""

    min_tokens: int = 1024
    max_breakpoints: int = MAX_BREAKPOINTS
    lookback: int = LOOKBACK_UNITS
    _entries: set[str] = field(default_factory=set)

    def serve(self, units: Sequence[Unit], breakpoints: Collection[int]) -> CacheUsage:
        """Bill one request and update the cache."""
        marks = sorted(set(breakpoints))
        if len(marks) > self.max_breakpoints:
            raise BreakpointError(
                f"a maximum of {self.max_breakpoints} blocks with cache_control may be "
                f"provided; got {len(marks)}"
            )
        if marks and not (marks[0] >= 0 and marks[-1] < len(units)):
            raise BreakpointError(f"breakpoint outside the request's {len(units)} units")
        prefixes = _prefix_keys(units)
        ends = _cumulative(units)
        total = ends[-1] if ends else 0
        honoured = [b for b in marks if ends[b] >= self.min_tokens]
        read_end = -1  # index of the last unit read from the cache
        for b in marks:
            for j in range(b, max(-1, b - self.lookback - 1), -1):
                if prefixes[j] in self._entries:
                    read_end = max(read_end, j)
                    break
        read = ends[read_end] if read_end >= 0 else 0
        written = 0
        if honoured and honoured[-1] > read_end:
            written = ends[honoured[-1]] - read
        for b in honoured:
            self._entries.add(prefixes[b])
        return CacheUsage(
            uncached=total - read - written,
            read=read,
            written=written,
            breakpoints=len(marks),
            honoured=len(honoured),
        )


def _prefix_keys(units: Sequence[Unit]) -> list[str]:
    keys: list[str] = []
    running = hashlib.sha256()
    for unit in units:
        running.update(unit.key.encode())
        running.update(b"\x00")
        keys.append(running.copy().hexdigest())
    return keys


def _cumulative(units: Sequence[Unit]) -> list[int]:
    ends: list[int] = []
    total = 0
    for unit in units:
        total += unit.tokens
        ends.append(total)
    return ends


@dataclass(frozen=True, slots=True)
class Prices:
    """US dollars per million tokens."""

    input: float
    """Fresh (uncached) input."""
    cached: float
    """Input read from the provider's cache."""
    write: float
    """Input written to the provider's cache."""
    output: float = 0.0
    """Output (reply) tokens; 0 where only input is priced (`report`, `cache-replay`)."""

    def cost(self, usage: CacheUsage, output_tokens: int = 0) -> float:
        """Dollars of one request's input `usage` and `output_tokens`."""
        return (
            usage.uncached * self.input
            + usage.read * self.cached
            + usage.written * self.write
            + output_tokens * self.output
        ) / 1_000_000
