"""The provider prompt-cache model: exact reads, writes and refusals on tiny requests."""

from __future__ import annotations

import pytest

from evals.prompt_cache.provider import BreakpointError, CacheUsage, Prices, ProviderCache, Unit


def units(*tokens: int, tag: str = "") -> list[Unit]:
    return [Unit(f"{tag}u{i}", n) for i, n in enumerate(tokens)]


def test_no_breakpoint_caches_nothing() -> None:
    cache = ProviderCache(min_tokens=10)
    request = units(20, 20, 20)
    assert cache.serve(request, []) == CacheUsage(60, 0, 0, 0, 0)
    assert cache.serve(request, []) == CacheUsage(60, 0, 0, 0, 0)


def test_write_then_read_the_same_prefix() -> None:
    cache = ProviderCache(min_tokens=10)
    request = units(20, 20, 20)
    first = cache.serve(request, [1])
    assert (first.uncached, first.read, first.written) == (20, 0, 40)
    second = cache.serve(request, [1])
    assert (second.uncached, second.read, second.written) == (20, 40, 0)


def test_rolling_breakpoint_reads_the_old_prefix_and_writes_the_new_part() -> None:
    cache = ProviderCache(min_tokens=10)
    cache.serve(units(20, 20, 20), [2])  # caches the 60-token prefix
    grown = [*units(20, 20, 20), Unit("new", 30), Unit("newer", 5)]
    usage = cache.serve(grown, [4])
    assert (usage.read, usage.written, usage.uncached) == (60, 35, 0)


def test_a_changed_unit_breaks_every_prefix_after_it() -> None:
    cache = ProviderCache(min_tokens=10)
    cache.serve(units(20, 20, 20), [0, 2])
    changed = [Unit("u0", 20), Unit("other", 20), Unit("u2", 20)]
    usage = cache.serve(changed, [0, 2])
    assert (usage.read, usage.written, usage.uncached) == (20, 40, 0)


def test_prefixes_under_the_minimum_are_not_cached() -> None:
    cache = ProviderCache(min_tokens=50)
    request = units(20, 20, 20)
    usage = cache.serve(request, [0, 2])
    assert (usage.breakpoints, usage.honoured, usage.written) == (2, 1, 60)
    again = cache.serve(request, [0])  # the 20-token prefix was never cached
    assert (again.read, again.written, again.uncached) == (0, 0, 60)


def test_lookback_is_limited() -> None:
    cache = ProviderCache(min_tokens=1, lookback=2)
    base = units(*([5] * 10))
    cache.serve(base, [2])
    far = [*base, Unit("x", 5)]
    assert cache.serve(far, [10]).read == 0  # 8 units beyond the cached prefix
    near = cache.serve(base[:5], [4])  # the cached prefix ends 2 units back
    assert near.read == 15


def test_more_than_four_breakpoints_is_refused() -> None:
    cache = ProviderCache()
    with pytest.raises(BreakpointError, match="maximum of 4"):
        cache.serve(units(*([10] * 6)), [0, 1, 2, 3, 4])
    with pytest.raises(BreakpointError):
        cache.serve(units(10), [3])


def test_prices() -> None:
    prices = Prices(input=3.0, cached=0.3, write=3.75)
    usage = CacheUsage(
        uncached=1_000_000, read=2_000_000, written=1_000_000, breakpoints=1, honoured=1
    )
    assert prices.cost(usage) == pytest.approx(3.0 + 0.6 + 3.75)
