"""Request layout (the tier design, "Cache Block Structure"): segment order, breakpoint placement,
the prefix rule, the breakpoint budget, and a hypothesis check over arbitrary snapshots."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.prompt_cache.layout import Segment, layout
from evals.prompt_cache.tiers import TIERS, Tier, TierSnapshot


def snapshot(**tiers: tuple[str, ...]) -> TierSnapshot:
    full = {tier: tiers.get(tier, ()) for tier in TIERS}
    return TierSnapshot(tiers=full, invalidated=frozenset())


TOKENS = {
    "symbol:core.py": 900,
    "history:1": 200,
    "history:2": 300,
    "symbol:a.py": 700,
    "file:b.py": 600,
    "history:3": 50,
    "symbol:c.py": 100,
    "file:d.py": 400,
    "history:4": 20,
}


def brief(segments: list[Segment]) -> list[tuple[str, str, tuple[str, ...], int, bool]]:
    return [(s.tier, s.part, s.keys, s.tokens, s.breakpoint) for s in segments]


def test_cached_tiers_first_history_after_context_breakpoint_on_each_tiers_last_segment() -> None:
    snap = snapshot(
        L0=("symbol:core.py", "history:1"),
        L1=("symbol:a.py", "file:b.py", "history:2"),
        L3=("symbol:c.py",),
        active=("file:d.py", "history:3", "history:4"),
    )
    segments = layout(snap, TOKENS, fixed_l0_tokens=1500, cache_min_tokens=1024)
    assert brief(segments) == [
        ("L0", "fixed", (), 1500, False),
        ("L0", "context", ("symbol:core.py",), 900, False),
        ("L0", "history", ("history:1",), 200, True),  # prefix 2600
        ("L1", "context", ("symbol:a.py", "file:b.py"), 1300, False),
        ("L1", "history", ("history:2",), 300, True),  # L2 is empty: skipped
        ("L3", "context", ("symbol:c.py",), 100, True),  # no history: on symbols/files
        ("active", "context", ("file:d.py",), 400, False),
        ("active", "history", ("history:3", "history:4"), 70, False),  # never cached
    ]


def test_l0_with_only_fixed_content_breaks_on_the_fixed_segment() -> None:
    segments = layout(snapshot(), {}, fixed_l0_tokens=2000)
    assert brief(segments) == [("L0", "fixed", (), 2000, True)]


def test_prefix_rule_skips_breakpoints_whose_prefix_is_below_the_minimum() -> None:
    snap = snapshot(L0=("symbol:c.py",), L1=("file:d.py",), L2=("symbol:a.py",))
    segments = layout(snap, TOKENS, fixed_l0_tokens=300, cache_min_tokens=1024)
    # Prefixes: L0 300 + 100 = 400 < 1024 (ignored by Anthropic: not marked); L1 800 < 1024;
    # L2 1500 >= 1024: marked, and it caches L0 and L1 too.
    assert [(s.tier, s.breakpoint) for s in segments] == [
        ("L0", False),
        ("L0", False),
        ("L1", False),
        ("L2", True),
    ]


def test_no_minimum_marks_every_non_empty_cached_tier() -> None:
    snap = snapshot(L0=("symbol:c.py",), L1=("file:d.py",), L2=("symbol:a.py",))
    segments = layout(snap, TOKENS, fixed_l0_tokens=0, cache_min_tokens=0)
    assert [(s.tier, s.part, s.breakpoint) for s in segments] == [
        ("L0", "context", True),
        ("L1", "context", True),
        ("L2", "context", True),
    ]


def test_breakpoint_budget_goes_from_l0_down() -> None:
    snap = snapshot(L0=("symbol:c.py",), L1=("file:d.py",), L2=("symbol:a.py",), L3=("file:b.py",))
    segments = layout(snap, TOKENS, fixed_l0_tokens=0, cache_min_tokens=0, max_breakpoints=2)
    assert [s.breakpoint for s in segments] == [True, True, False, False]


def test_misuse_raises() -> None:
    with pytest.raises(ValueError, match="no token count"):
        layout(snapshot(L1=("file:x.py",)), {}, fixed_l0_tokens=0)
    with pytest.raises(ValueError, match="max_breakpoints"):
        layout(snapshot(), {}, fixed_l0_tokens=0, max_breakpoints=5)
    with pytest.raises(ValueError, match="fixed_l0_tokens"):
        layout(snapshot(), {}, fixed_l0_tokens=-1)


CACHED: tuple[Tier, ...] = ("L0", "L1", "L2", "L3")


@settings(max_examples=100, deadline=None)
@given(
    placement=st.lists(st.tuples(st.sampled_from(TIERS), st.integers(1, 900)), max_size=12),
    fixed=st.sampled_from([0, 200, 1600]),
    minimum=st.sampled_from([0, 1024, 4096]),
    budget=st.integers(0, 4),
)
def test_layout_properties(
    placement: list[tuple[Tier, int]], fixed: int, minimum: int, budget: int
) -> None:
    keys: dict[Tier, list[str]] = {tier: [] for tier in TIERS}
    tokens: dict[str, int] = {}
    for index, (tier, size) in enumerate(placement):
        key = f"history:{index}" if index % 2 else f"file:{index}.py"
        keys[tier].append(key)
        tokens[key] = size
    snap = snapshot(**{tier: tuple(k) for tier, k in keys.items()})
    segments = layout(snap, tokens, fixed, cache_min_tokens=minimum, max_breakpoints=budget)

    parts = ("fixed", "context", "history")
    order = [(TIERS.index(s.tier), parts.index(s.part)) for s in segments]
    assert order == sorted(order)  # L0 → active; in a tier fixed, then context, then history
    assert all(s.keys or s.part == "fixed" for s in segments)  # no empty segment
    assert sum(s.tokens for s in segments) == fixed + sum(tokens.values())
    marked = [s for s in segments if s.breakpoint]
    assert len(marked) <= budget <= 4
    prefix = used = 0
    for index, segment in enumerate(segments):
        prefix += segment.tokens
        last_of_tier = index + 1 == len(segments) or segments[index + 1].tier != segment.tier
        should = segment.tier in CACHED and last_of_tier and prefix >= minimum and used < budget
        assert segment.breakpoint == should
        used += segment.breakpoint
    assert len({s.tier for s in marked}) == len(marked)  # one per tier
