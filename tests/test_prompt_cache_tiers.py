"""Stability tiers over a session's history: exact tiny cases for every rule the planners rely
on (graduation to L3 by the token target, demotion of changed and later items, removals, time
order) and hypothesis invariants over random request sequences."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.prompt_cache.layout import layout
from evals.prompt_cache.tiers import CACHED_TIERS, TIERS, Item, StabilityTracker, TierConfig
from evals.prompt_cache.tokens import estimate_tokens

# A target of 100 tokens keeps the worlds tiny: cache_min_tokens 100 × multiplier 1.0.
SMALL = TierConfig(cache_min_tokens=100, cache_buffer_multiplier=1.0)


def hist(ident: str, tokens: int = 10, text: str | None = None) -> Item:
    return Item(f"history:{ident}", text or f"message {ident}", tokens)


# ----- tokens and config


def test_estimate_tokens_is_ceil_of_a_quarter_and_at_least_one() -> None:
    assert [estimate_tokens(text) for text in ("", "a", "abcd", "abcde", "x" * 400)] == [
        0,
        1,
        1,
        2,
        100,
    ]


def test_cache_target_tokens() -> None:
    assert TierConfig().cache_target_tokens == 1536
    assert TierConfig(cache_min_tokens=0).cache_target_tokens == 0
    unbuffered = TierConfig(cache_min_tokens=2048, cache_buffer_multiplier=1.0)
    assert unbuffered.cache_target_tokens == 2048
    with pytest.raises(ValueError):
        TierConfig(cache_min_tokens=-1)
    with pytest.raises(ValueError):
        TierConfig(cache_buffer_multiplier=0)


def test_misuse_raises() -> None:
    tracker = StabilityTracker(SMALL)
    with pytest.raises(ValueError, match="prefix"):
        tracker.update([Item("file:a.py", "a", 1)])
    with pytest.raises(ValueError, match="duplicate"):
        tracker.update([hist("1"), hist("1")])
    with pytest.raises(ValueError, match="negative"):
        tracker.update([hist("1", -1)])
    tracker.update([hist("1"), hist("2")])
    with pytest.raises(ValueError, match="reordered"):
        tracker.update([hist("2"), hist("1")])


# ----- graduation


def test_history_stays_active_up_to_the_target() -> None:
    tracker = StabilityTracker(SMALL)
    history: list[Item] = []
    for index in range(4):
        history.append(hist(str(index), tokens=25))  # 100 in total: not above the target
        snap = tracker.update(history)
    assert snap.tiers["active"] == tuple(item.key for item in history)
    assert snap.tiers["L3"] == () and snap.invalidated == frozenset()


def test_history_above_the_target_graduates_oldest_first_until_the_target_is_reached() -> None:
    tracker = StabilityTracker(SMALL)
    snap = tracker.update([hist("1", 60), hist("2", 60), hist("3", 60)])  # 180 > 100
    assert snap.tiers["L3"] == ("history:1", "history:2")  # 60 < 100, then 120 >= 100: stop
    assert snap.tiers["active"] == ("history:3",)
    assert snap.invalidated == {"L3"}


def test_graduated_history_stays_cached_while_the_newest_turns_wait() -> None:
    tracker = StabilityTracker(SMALL)
    history = [hist("1", 60), hist("2", 60), hist("3", 60)]
    tracker.update(history)
    history.append(hist("4", 30))  # active: 60 + 30 = 90, not above the target
    snap = tracker.update(history)
    assert snap.tiers["L3"] == ("history:1", "history:2") and snap.invalidated == frozenset()
    history.append(hist("5", 30))  # 120 > 100: the oldest three (120) graduate together
    snap = tracker.update(history)
    assert snap.tiers["L3"] == tuple(f"history:{i}" for i in range(1, 6))
    assert snap.tiers["active"] == () and snap.invalidated == {"L3"}


def test_nothing_rises_above_l3() -> None:
    tracker = StabilityTracker(SMALL)
    history = [hist(str(i), 200) for i in range(3)]
    for _ in range(20):
        snap = tracker.update(history)
    assert [snap.tiers[tier] for tier in ("L0", "L1", "L2")] == [(), (), ()]
    assert snap.tiers["L3"] == tuple(item.key for item in history)


def test_history_never_graduates_when_the_target_is_zero() -> None:
    tracker = StabilityTracker(TierConfig(cache_min_tokens=0))
    history = [hist(str(index), 5000) for index in range(3)]
    tracker.update(history)
    snap = tracker.update(history)
    assert snap.tiers["active"] == tuple(item.key for item in history)


def test_token_counts_are_the_callers_latest() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.update([hist("1", 50), hist("2", 50)])  # 100: stays active
    snap = tracker.update([hist("1", 50), hist("2", 51)])  # same content, 101 now
    assert snap.tiers["L3"] == ("history:1", "history:2")


# ----- demotion and removal


def test_a_changed_item_demotes_itself_and_every_later_item() -> None:
    tracker = StabilityTracker(SMALL)
    history = [hist(str(i), 60) for i in range(1, 5)]  # 1, 2 graduate; 3, 4 wait
    tracker.update(history)
    history.append(hist("5", 60))  # 3, 4 graduate
    assert tracker.update(history).tiers["L3"] == tuple(f"history:{i}" for i in range(1, 5))
    history[1] = hist("2", 60, text="edited")
    snap = tracker.update(history)
    # 2, 3, 4 are back in active with 5 (240 > 100): the oldest two graduate again at once
    assert snap.tiers["L3"] == ("history:1", "history:2", "history:3")
    assert snap.tiers["active"] == ("history:4", "history:5")
    assert snap.invalidated == {"L3"}


def test_a_new_item_inserted_before_cached_ones_demotes_them() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.update([hist("1", 60), hist("2", 60), hist("3", 10)])  # 1, 2 in L3
    snap = tracker.update([hist("1", 60), hist("new", 1), hist("2", 60), hist("3", 10)])
    assert snap.tiers["L3"] == ("history:1",)
    assert snap.tiers["active"] == ("history:new", "history:2", "history:3")
    assert snap.invalidated == {"L3"}


def test_an_item_that_leaves_invalidates_its_tier_only_when_cached() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.update([hist("1", 60), hist("2", 60), hist("3", 10)])  # 1, 2 in L3; 3 active
    snap = tracker.update([hist("1", 60), hist("2", 60)])
    assert snap.tiers["L3"] == ("history:1", "history:2") and snap.invalidated == frozenset()
    snap = tracker.update([hist("2", 60)])  # a sliding window drops the oldest turn
    assert snap.tiers["L3"] == ("history:2",) and snap.invalidated == {"L3"}
    assert tracker.update([]).tiers == {tier: () for tier in TIERS}


# ----- hypothesis: random request sequences

TOKENS = st.sampled_from([1, 40, 99, 100, 101, 300, 800, 1024, 1536, 1600])
CONFIGS = st.sampled_from(
    [
        SMALL,
        TierConfig(),
        TierConfig(cache_min_tokens=0),
        TierConfig(cache_min_tokens=300, cache_buffer_multiplier=2.0),
    ]
)


@settings(max_examples=60, deadline=None)
@given(config=CONFIGS, data=st.data())
def test_invariants_over_random_request_sequences(config: TierConfig, data: st.DataObject) -> None:
    tracker = StabilityTracker(config)
    history: list[Item] = []
    previous: dict[str, tuple[str, ...]] = {tier: () for tier in TIERS}
    previous_content: dict[str, str] = {}
    next_id = 0
    for _ in range(data.draw(st.integers(5, 25))):
        roll = data.draw(st.integers(0, 9))
        if roll == 0 and history:
            index = data.draw(st.integers(0, len(history) - 1))
            history[index] = hist(history[index].key[8:], history[index].tokens, text="edited")
        elif roll == 1 and history:
            del history[data.draw(st.integers(0, len(history) - 1))]
        for _ in range(data.draw(st.integers(0, 2))):
            history.append(hist(str(next_id), data.draw(TOKENS)))
            next_id += 1
        snap = tracker.update(history)
        content = {item.key: item.content for item in history}
        tokens = {item.key: item.tokens for item in history}

        # Every item sent is in exactly one tier, L3 or active, and the tiers keep time order.
        laid_out = [key for tier in TIERS for key in snap.tiers[tier]]
        assert laid_out == [item.key for item in history]
        assert all(not snap.tiers[tier] for tier in ("L0", "L1", "L2"))
        # A cached tier not invalidated is byte-for-byte the previous one.
        for tier in CACHED_TIERS:
            if tier not in snap.invalidated:
                assert snap.tiers[tier] == previous[tier]
                assert all(previous_content[key] == content[key] for key in snap.tiers[tier])
        if config.cache_target_tokens == 0:  # no token target: nothing is ever cached
            assert snap.tiers["L3"] == ()
        segments = layout(snap, tokens, 0, cache_min_tokens=config.cache_min_tokens)
        assert [key for segment in segments for key in segment.keys] == laid_out
        assert not any(segment.breakpoint and segment.tier == "active" for segment in segments)
        previous = dict(snap.tiers)
        previous_content = content
