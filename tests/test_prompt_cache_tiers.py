"""Stability tiers (seed 002): exact tiny cases for every rule, the seed's worked example, and
hypothesis invariants over random request sequences."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evals.prompt_cache.layout import layout
from evals.prompt_cache.tiers import (
    CACHED_TIERS,
    ENTRY_N,
    PROMOTION_N,
    TIERS,
    Item,
    StabilityTracker,
    TierConfig,
    TierSnapshot,
    content_hash,
    history_item,
)
from evals.prompt_cache.tokens import estimate_tokens

# A target of 100 tokens keeps the worlds tiny: cache_min_tokens 100 × multiplier 1.0.
SMALL = TierConfig(cache_min_tokens=100, cache_buffer_multiplier=1.0)
AB = {"a.py": {"b.py"}, "b.py": {"a.py"}}  # one mutual pair: a single cluster, placed in L1


def sym(path: str, tokens: int = 100, version: int = 0) -> Item:
    return Item(f"symbol:{path}", f"symbols of {path} v{version}", tokens)


def file(path: str, tokens: int = 100, version: int = 0) -> Item:
    return Item(f"file:{path}", f"content of {path} v{version}", tokens)


def hist(ident: str, tokens: int = 10, role: str = "user") -> Item:
    return history_item(ident, role, f"message {ident}", tokens)


def where(snapshot: TierSnapshot) -> dict[str, str]:
    return {key: tier for tier, keys in snapshot.tiers.items() for key in keys}


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


def test_history_hash_is_of_role_and_content() -> None:
    item = history_item("7", "assistant", "hello", tokens=3)
    assert item.key == "history:7"
    assert item.content == "assistant:hello"
    assert content_hash(item.content) == content_hash("assistant:hello")
    assert content_hash("user:hello") != content_hash(item.content)


# ----- active and graduation


def test_new_file_counts_up_in_active_and_graduates_to_l3_at_n3() -> None:
    tracker = StabilityTracker(SMALL)
    seen = []
    for _ in range(5):
        snap = tracker.update(files=[file("a.py")])
        seen.append((tracker.tier_of("file:a.py"), tracker.n_of("file:a.py"), snap.invalidated))
    assert seen == [
        ("active", 0, frozenset()),
        ("active", 1, frozenset()),
        ("active", 2, frozenset()),
        ("active", 3, frozenset()),
        ("L3", 3, frozenset({"L3"})),  # graduation at N >= 3 enters L3 at its entry N
    ]


def test_fixed_l0_content_is_not_an_item_and_l0_misses_only_on_the_first_request() -> None:
    tracker = StabilityTracker(SMALL, fixed_l0=[Item("system", "You are...", 700)])
    first = tracker.update()
    second = tracker.update()
    assert first.invalidated == {"L0"}
    assert second.invalidated == frozenset()
    assert first.tiers["L0"] == ()
    assert tracker.fixed_l0_tokens == 700
    with pytest.raises(KeyError):
        tracker.tier_of("system")
    with pytest.raises(ValueError):
        StabilityTracker(SMALL, fixed_l0=[Item("file:x", "", 1)])


def test_content_change_demotes_to_active_and_invalidates_the_former_tier() -> None:
    tracker = StabilityTracker(SMALL)
    for _ in range(5):
        tracker.update(files=[file("a.py")])
    assert tracker.tier_of("file:a.py") == "L3"
    snap = tracker.update(files=[file("a.py", version=1)])
    assert (tracker.tier_of("file:a.py"), tracker.n_of("file:a.py")) == ("active", 0)
    assert snap.invalidated == {"L3"}
    assert snap.tiers["L3"] == ()


def test_explicit_modification_of_a_file_also_demotes_its_symbol_entry() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.initialize([sym("a.py"), sym("b.py")], deps=AB)
    assert (tracker.tier_of("symbol:a.py"), tracker.n_of("symbol:a.py")) == ("L1", 9)
    tracker.update(symbols=[sym("a.py"), sym("b.py")])
    # Same content, but the assistant edited a.py: its symbol entry is demoted anyway.
    snap = tracker.update(symbols=[sym("a.py"), sym("b.py")], modified=["file:a.py"])
    assert (tracker.tier_of("symbol:a.py"), tracker.n_of("symbol:a.py")) == ("active", 0)
    assert snap.invalidated == {"L1"}
    assert snap.tiers["L1"] == ("symbol:b.py",)


def test_selecting_a_file_excludes_its_symbol_entry_and_unchecking_returns_it_to_active() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.initialize([sym("a.py"), sym("b.py")], deps=AB)
    symbols = [sym("a.py"), sym("b.py")]
    tracker.update(symbols=symbols)
    checked = tracker.update(files=[file("a.py")], symbols=symbols)
    assert "symbol:a.py" not in checked.n  # excluded from the symbol map
    assert checked.invalidated == {"L1"}
    assert checked.tiers["active"] == ("file:a.py",)
    unchecked = tracker.update(symbols=symbols)
    assert "file:a.py" not in unchecked.n
    assert (tracker.tier_of("symbol:a.py"), tracker.n_of("symbol:a.py")) == ("active", 0)


def test_unchecking_a_graduated_file_removes_it_from_its_cached_tier() -> None:
    tracker = StabilityTracker(SMALL)
    for _ in range(5):
        tracker.update(files=[file("a.py")], symbols=[sym("a.py")])
    assert tracker.tier_of("file:a.py") == "L3"
    snap = tracker.update(symbols=[sym("a.py")])
    assert snap.invalidated == {"L3"}
    assert snap.tiers["L3"] == ()
    assert snap.tiers["active"] == ("symbol:a.py",)
    assert snap.n["symbol:a.py"] == 0


def test_deleting_a_file_removes_file_and_symbol_entries() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.initialize([sym("a.py"), sym("b.py")], deps=AB)
    tracker.update(files=[file("c.py")], symbols=[sym("a.py"), sym("b.py")])
    snap = tracker.update(symbols=[sym("b.py")], deleted=["file:a.py", "file:c.py"])
    assert set(snap.n) == {"symbol:b.py"}
    assert snap.invalidated == {"L1"}
    with pytest.raises(ValueError, match="deleted"):
        tracker.update(symbols=[sym("b.py")], deleted=["file:b.py"])


def test_misuse_raises() -> None:
    tracker = StabilityTracker(SMALL)
    with pytest.raises(ValueError, match="prefix"):
        tracker.update(files=[sym("a.py")])
    with pytest.raises(ValueError, match="duplicate"):
        tracker.update(files=[file("a.py"), file("a.py")])
    with pytest.raises(ValueError, match="not an item key"):
        tracker.update(modified=["a.py"])
    tracker.update(history=[hist("1"), hist("2")])
    with pytest.raises(ValueError, match="reordered"):
        tracker.update(history=[hist("2"), hist("1")])
    with pytest.raises(ValueError, match="once"):
        tracker.initialize([sym("a.py")], deps={})


# ----- history graduation


def test_history_stays_active_without_ripple_below_the_target() -> None:
    tracker = StabilityTracker(SMALL)
    history: list[Item] = []
    for index in range(4):
        history.append(hist(str(index), tokens=25))  # 100 in total: not above the target
        snap = tracker.update(history=history)
    assert snap.tiers["active"] == tuple(item.key for item in history)
    assert snap.n == {"history:0": 3, "history:1": 2, "history:2": 1, "history:3": 0}


def test_history_above_the_target_graduates_oldest_first_until_the_target_is_reached() -> None:
    tracker = StabilityTracker(SMALL)
    history = [hist("1", 60), hist("2", 60), hist("3", 60)]  # 180 > 100
    snap = tracker.update(history=history)
    assert snap.tiers["L3"] == ("history:1", "history:2")  # 60 < 100, then 120 >= 100: stop
    assert snap.tiers["active"] == ("history:3",)
    assert snap.invalidated == {"L3"}
    assert snap.n["history:1"] == ENTRY_N["L3"]


def test_history_exactly_at_the_target_does_not_graduate() -> None:
    tracker = StabilityTracker(SMALL)
    snap = tracker.update(history=[hist("1", 50), hist("2", 50)])
    assert snap.tiers["L3"] == ()


def test_history_piggybacks_on_a_file_selection_ripple() -> None:
    tracker = StabilityTracker(SMALL)
    history = [hist("1"), hist("2")]
    tracker.update(history=history)
    snap = tracker.update(files=[file("a.py")], history=[*history, hist("3")])
    assert snap.tiers["L3"] == ("history:1", "history:2", "history:3")  # all, new one too


def test_history_piggybacks_on_a_graduation_ripple() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.update(files=[file("a.py")])  # ripple: nothing to piggyback yet
    history = [hist("1")]
    for _ in range(3):
        snap = tracker.update(files=[file("a.py")], history=history)
    assert snap.tiers["active"] == ("file:a.py", "history:1")  # selection unchanged: no ripple
    snap = tracker.update(files=[file("a.py")], history=history)  # a.py graduates at N=3
    assert snap.tiers["L3"] == ("file:a.py", "history:1")


def test_history_never_graduates_when_the_target_is_zero() -> None:
    tracker = StabilityTracker(TierConfig(cache_min_tokens=0))
    history = [hist(str(index), 5000) for index in range(3)]
    tracker.update(history=history)
    snap = tracker.update(files=[file("a.py")], history=history)  # ripple and lots of tokens
    assert snap.tiers["active"] == ("file:a.py", *(item.key for item in history))


def test_purge_history_removes_every_history_item_and_invalidates_their_tiers() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.update(files=[file("a.py")], history=[hist("1"), hist("2")])  # ripple: to L3
    tracker.purge_history()
    snap = tracker.update(files=[file("a.py")], history=[hist("summary")])
    assert snap.invalidated == {"L3"}
    assert snap.tiers["L3"] == ()
    assert snap.tiers["active"] == ("file:a.py", "history:summary")
    assert snap.n["history:summary"] == 0


def test_rewritten_history_demotes_every_later_history_item() -> None:
    tracker = StabilityTracker(SMALL)
    tracker.update(files=[file("a.py")], history=[hist("1"), hist("2"), hist("3")])
    changed = history_item("2", "user", "edited", 10)
    snap = tracker.update(files=[file("a.py")], history=[hist("1"), changed, hist("3")])
    assert snap.tiers["L3"] == ("history:1",)
    assert snap.tiers["active"] == ("file:a.py", "history:2", "history:3")
    assert snap.invalidated == {"L3"}


# ----- the per-tier algorithm


def three_tiers(tracker: StabilityTracker) -> list[Item]:
    """L1 = {a, f}, L2 = {b, c}, L3 = {d, e} (three mutual pairs of 200 tokens each)."""
    symbols = [sym(name + ".py") for name in "afbcde"]
    deps = {"a.py": {"f.py"}, "f.py": {"a.py"}, "b.py": {"c.py"}, "c.py": {"b.py"}}
    deps |= {"d.py": {"e.py"}, "e.py": {"d.py"}}
    tracker.initialize(symbols, deps)
    return symbols


def test_held_back_items_keep_n_and_the_rest_rotate_up_to_the_cap() -> None:
    # Each tier holds two items of 100 tokens and the target is 100: the walk holds back the
    # top item (N frozen) and N++ the other; the order is N descending, ties held-first.
    tracker = StabilityTracker(SMALL)
    symbols = three_tiers(tracker)
    trail = []
    for _ in range(6):
        tracker.update(symbols=symbols)
        trail.append((tracker.n_of("symbol:d.py"), tracker.n_of("symbol:e.py")))
    assert trail == [(3, 4), (4, 4), (5, 4), (5, 5), (5, 6), (6, 6)]  # L3 cap: 6
    assert (tracker.n_of("symbol:b.py"), tracker.n_of("symbol:c.py")) == (9, 9)  # L2 cap
    assert (tracker.n_of("symbol:a.py"), tracker.n_of("symbol:f.py")) == (12, 12)  # L1 cap


def test_without_token_gating_every_item_counts_up() -> None:
    tracker = StabilityTracker(TierConfig(cache_min_tokens=0))
    symbols = three_tiers(tracker)
    assert tracker.tier_of("symbol:d.py") == "L3"
    for _ in range(2):
        tracker.update(symbols=symbols)
    assert [tracker.n_of(s.key) for s in symbols] == [11, 11, 8, 8, 5, 5]


def test_an_invalidated_tier_below_a_stable_one_stops_the_cascade() -> None:
    tracker = StabilityTracker(SMALL)
    symbols = three_tiers(tracker)
    for _ in range(6):
        before = tracker.update(symbols=symbols)
    changed = [s if s.key != "symbol:d.py" else sym("d.py", version=1) for s in symbols]
    after = tracker.update(symbols=changed)
    assert after.invalidated == {"L3"}
    for tier in ("L0", "L1", "L2"):
        assert after.tiers[tier] == before.tiers[tier]
    assert after.n["symbol:e.py"] == PROMOTION_N["L3"]  # capped: L2 is stable
    assert after.tiers["L3"] == ("symbol:e.py",)


def test_user_checks_file_f_in_the_picker_worked_example() -> None:
    """The seed's example: F's symbol entry leaves L1 (L1 breaks), L2 veterans fill L1 (L2
    breaks), L3 veterans fill L2 (L3 breaks), active graduates fill L3, L0 stays cached."""
    tracker = StabilityTracker(SMALL, fixed_l0=[Item("system", "system prompt", 500)])
    symbols = [*three_tiers(tracker), sym("g.py", 40)]
    g = file("g.py", 200)
    history = [hist("1", 30), hist("2", 30, role="assistant")]
    # Four quiet requests: g.py (selected, so its symbol entry is excluded) counts 0..3 in
    # active; history arrives on the last one and stays active (no ripple, 60 <= 100 tokens).
    for request in range(4):
        quiet = tracker.update(files=[g], symbols=symbols, history=history if request == 3 else [])
    assert quiet.invalidated == frozenset()
    assert quiet.tiers == {
        "L0": (),
        "L1": ("symbol:a.py", "symbol:f.py"),
        "L2": ("symbol:b.py", "symbol:c.py"),
        "L3": ("symbol:d.py", "symbol:e.py"),
        "active": ("file:g.py", "history:1", "history:2"),
    }
    # Priority orders now: L1 [a 11, f 11], L2 [b 8, c 8], L3 [d 5, e 5]; the top one is held.
    assert [quiet.n[s.key] for s in symbols[:6]] == [11, 11, 8, 8, 5, 5]

    snap = tracker.update(files=[g, file("f.py", 300)], symbols=symbols, history=history)

    assert snap.tiers == {
        "L0": (),  # never invalidated: nothing moves into it
        "L1": ("symbol:a.py", "symbol:c.py"),  # f's entry removed; c promoted from L2
        "L2": ("symbol:b.py", "symbol:e.py"),  # c left; e promoted from L3
        "L3": ("symbol:d.py", "file:g.py", "history:1", "history:2"),  # graduates + history
        "active": ("file:f.py",),  # F's full content enters active
    }
    assert snap.invalidated == {"L1", "L2", "L3"}
    assert dict(snap.n) == {
        "symbol:a.py": 11,  # held back: frozen
        "symbol:c.py": 9,  # entry N of L1
        "symbol:b.py": 8,  # held back: frozen
        "symbol:e.py": 6,  # entry N of L2
        "symbol:d.py": 5,  # held back: frozen
        "file:g.py": 3,  # entry N of L3
        "history:1": 3,
        "history:2": 3,
        "file:f.py": 0,
    }
    assert snap.tokens == {"L0": 0, "L1": 200, "L2": 200, "L3": 360, "active": 300}


# ----- time order of history (the project's adaptation)


def test_younger_history_cannot_promote_past_an_older_held_back_item() -> None:
    # Clusters {u} (300 tokens) and {t1, t2} (200) fill two tiers, not three: L1 = u, L2 = t1, t2.
    tracker = StabilityTracker(SMALL)
    u, t1, t2 = sym("u.py", 300), sym("t1.py"), sym("t2.py")
    tracker.initialize([u, t1, t2], deps={"t1.py": {"t2.py"}, "t2.py": {"t1.py"}})
    assert [tracker.tier_of(s.key) for s in (u, t1, t2)] == ["L1", "L2", "L2"]
    history = [hist("1", 100), hist("2", 100)]
    tracker.update(files=[file("w.py")], symbols=[u, t1, t2], history=history)  # ripple: to L3
    trail = []
    for _ in range(4):
        tracker.update(symbols=[u, t1, t2], history=history)
        trail.append((tracker.n_of("history:1"), tracker.n_of("history:2")))
    assert trail == [(3, 4), (4, 4), (5, 4), (5, 5)]  # L3 order now [h1 5 (held), h2 5]

    # t1 changes: L2 breaks. h2 reaches 6 >= 6, but the older h1 is held back in L3, so h2 may
    # not leave: it is held like a stuck item, N capped at L3's threshold.
    t1 = sym("t1.py", version=1)
    snap = tracker.update(symbols=[u, t1, t2], history=history)
    assert snap.invalidated == {"L2"}
    assert snap.tiers["L3"] == ("history:1", "history:2")
    assert (snap.n["history:1"], snap.n["history:2"]) == (5, 6)

    # t2 changes: L2 breaks again. Order [h2 6 (held), h1 5]: h1 reaches 6 and, being the
    # oldest, promotes; time order holds across tiers (L2 history precedes L3 history).
    snap = tracker.update(symbols=[u, t1, sym("t2.py", version=1)], history=history)
    assert snap.invalidated == {"L2", "L3"}
    assert snap.tiers["L2"] == ("history:1",)
    assert snap.tiers["L3"] == ("history:2",)
    assert (snap.n["history:1"], snap.n["history:2"]) == (ENTRY_N["L2"], 6)


# ----- hypothesis: random request sequences

PATHS = ("a.py", "b.py", "c.py", "d.py", "e.py")
TOKENS = st.sampled_from([1, 40, 99, 100, 101, 300, 800, 1024, 1536, 1600])
CONFIGS = st.sampled_from(
    [
        SMALL,
        TierConfig(),
        TierConfig(cache_min_tokens=0),
        TierConfig(cache_min_tokens=300, cache_buffer_multiplier=2.0),
    ]
)


def n_bounds_hold(tier: str, n: int) -> bool:
    """What the rules allow: N starts at the tier's entry N and only grows, capped at the
    promotion threshold (an item at the threshold leaves or stays capped); L0 just grows."""
    threshold = PROMOTION_N[tier]  # type: ignore[index]
    low = ENTRY_N[tier]  # type: ignore[index]
    return n >= low and (threshold is None or n <= threshold)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=CONFIGS, data=st.data())
def test_invariants_over_random_request_sequences(config: TierConfig, data: st.DataObject) -> None:
    tracker = StabilityTracker(config, fixed_l0=[Item("system", "prompt", data.draw(TOKENS))])
    existing = {path: 0 for path in PATHS}  # path → version
    sizes = {path: data.draw(TOKENS) for path in PATHS}
    selected: set[str] = set()
    history: list[Item] = []
    next_id = 0
    deps = {path: set(data.draw(st.sets(st.sampled_from(PATHS)))) for path in PATHS}
    tracker.initialize([sym(p, sizes[p]) for p in PATHS], deps, active_files=[])
    previous: dict[str, tuple[str, ...]] = {tier: () for tier in TIERS}
    previous_content: dict[str, str] = {}

    for _ in range(data.draw(st.integers(5, 25))):
        modified: set[str] = set()
        deleted: set[str] = set()
        for path in list(existing):
            roll = data.draw(st.integers(0, 19))
            if roll == 0:
                selected ^= {path}
            elif roll == 1:
                existing[path] += 1  # content change (symbol and file)
            elif roll == 2 and path in selected:
                modified.add(f"file:{path}")  # edited by the assistant
            elif roll == 3:
                del existing[path]
                selected.discard(path)
                deleted.add(f"file:{path}")
        gone = [p for p in PATHS if p not in existing and f"file:{p}" not in deleted]
        if gone and data.draw(st.integers(0, 9)) == 0:
            path = data.draw(st.sampled_from(gone))
            existing[path] = 100  # re-created
        if history and data.draw(st.integers(0, 14)) == 0:
            tracker.purge_history()
            history = [history_item(f"s{next_id}", "user", "summary", data.draw(TOKENS))]
            next_id += 1
            previous_content = {k: v for k, v in previous_content.items() if "history:" not in k}
        for _ in range(data.draw(st.integers(0, 2))):
            history.append(history_item(str(next_id), "user", "m", data.draw(TOKENS)))
            next_id += 1

        files = [file(p, sizes[p], existing[p]) for p in PATHS if p in selected]
        symbols = [sym(p, sizes[p], existing[p]) for p in PATHS if p in existing]
        snap = tracker.update(
            files=files, symbols=symbols, history=history, modified=modified, deleted=deleted
        )
        sent = [*files, *(s for s in symbols if s.key[7:] not in selected), *history]
        content = {item.key: item.content for item in sent}
        tokens = {item.key: item.tokens for item in sent}

        # Every tracked item is in exactly one tier, and exactly the items sent are tracked.
        placed = [key for keys in snap.tiers.values() for key in keys]
        assert sorted(placed) == sorted(content)
        assert set(snap.n) == set(content)
        for tier, keys in snap.tiers.items():
            for key in keys:
                assert tracker.tier_of(key) == tier
                assert n_bounds_hold(tier, snap.n[key]), (tier, key, snap.n[key])
            assert snap.tokens[tier] == sum(tokens[key] for key in keys)
        # A cached tier not invalidated is byte-for-byte the previous one.
        for tier in CACHED_TIERS:
            if tier not in snap.invalidated:
                assert snap.tiers[tier] == previous[tier]
                assert all(previous_content[key] == content[key] for key in snap.tiers[tier])
        # History is in time order across the tiers, hence across the layout.
        segments = layout(
            snap, tokens, tracker.fixed_l0_tokens, cache_min_tokens=config.cache_min_tokens
        )
        laid_out = [key for segment in segments for key in segment.keys]
        assert [key for key in laid_out if key.startswith("history:")] == [i.key for i in history]
        assert sum(segment.breakpoint for segment in segments) <= 4
        assert not any(segment.breakpoint and segment.tier == "active" for segment in segments)
        if config.cache_min_tokens == 0:
            assert all(tier == "active" for tier in (tracker.tier_of(i.key) for i in history))

        for tier in CACHED_TIERS:  # coverage, shown by --hypothesis-show-statistics
            if any(key.startswith("history:") for key in snap.tiers[tier]):
                event(f"history in {tier}")
            if any(n >= ENTRY_N[tier] + 1 for key, n in snap.n.items() if key in snap.tiers[tier]):
                event(f"veteran in {tier}")
        previous = dict(snap.tiers)
        previous_content = content
