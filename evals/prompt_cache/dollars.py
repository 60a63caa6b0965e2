"""Dollar cost of recorded model usage: what `kvarena report --price-in/--price-cached/
--price-write` shows per episode (input only: the prices of prompt tokens, fresh, read from the
provider's cache, written to it), and what `kvarena eval --model` prints for a run and for its
`--dry-run` estimate (with `--price-out`, output tokens too)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .provider import CacheUsage, Prices


def usage_cost(usage: Mapping[str, int], prices: Prices) -> float:
    """Dollars of one episode's `usage` (a result's `usage` field): `input_tokens` counts every
    prompt token, of which `cached_input_tokens` were read and `cache_write_input_tokens`
    written; the rest is fresh input. `output_tokens` at `prices.output` (0 in `report`)."""
    read = int(usage.get("cached_input_tokens", 0))
    written = int(usage.get("cache_write_input_tokens", 0))
    fresh = max(0, int(usage.get("input_tokens", 0)) - read - written)
    output = int(usage.get("output_tokens", 0))
    return prices.cost(CacheUsage(fresh, read, written, 0, 0), output)


def mean_episode_cost(results: Iterable[Mapping[str, Any]], prices: Prices) -> float | None:
    """Mean dollars per ok episode that recorded usage (None when none did: policies)."""
    costs = [
        usage_cost(r["usage"], prices)
        for r in results
        if r.get("status") == "ok" and r.get("usage") is not None
    ]
    return sum(costs) / len(costs) if costs else None
