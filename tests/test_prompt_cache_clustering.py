"""Initial tier assignment from the mutual-reference graph (seed 002): exact small graphs and
hypothesis properties of the bin-packing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evals.prompt_cache.clustering import (
    CLUSTER_TIERS,
    assign_tiers,
    cluster_files,
    distribute,
    mutual_adjacency,
)
from evals.prompt_cache.tiers import ENTRY_N, Item, StabilityTracker, TierConfig

# The seed's examples: streaming ↔ context_builder ↔ stability_tracker are mutual; models.py is
# imported by everyone and imports nothing back.
DEPS = {
    "streaming.py": {"context_builder.py", "models.py"},
    "context_builder.py": {"streaming.py", "stability_tracker.py", "models.py"},
    "stability_tracker.py": {"context_builder.py", "models.py"},
    "fetcher.py": {"cache.py"},
    "cache.py": {"fetcher.py", "models.py"},
    "extensions.py": set(),
}


def test_only_bidirectional_edges_are_kept() -> None:
    adjacency = mutual_adjacency(DEPS)
    assert adjacency == {
        "streaming.py": {"context_builder.py"},
        "context_builder.py": {"streaming.py", "stability_tracker.py"},
        "stability_tracker.py": {"context_builder.py"},
        "fetcher.py": {"cache.py"},
        "cache.py": {"fetcher.py"},
    }


def test_refs_supply_the_reverse_direction() -> None:
    # x → y from deps, y → x only from refs[x] (files that reference x).
    assert mutual_adjacency({"x": {"y"}}, refs={"x": {"y"}}) == {"x": {"y"}, "y": {"x"}}
    assert mutual_adjacency({"x": {"y"}}) == {}
    assert mutual_adjacency({"x": {"x"}}) == {}  # a self-reference is no edge


def test_connected_components_with_singletons() -> None:
    assert cluster_files(DEPS) == [
        frozenset({"cache.py", "fetcher.py"}),
        frozenset({"context_builder.py", "stability_tracker.py", "streaming.py"}),
        frozenset({"extensions.py"}),
        frozenset({"models.py"}),
    ]


def test_greedy_packing_into_the_lightest_tier_keeps_clusters_whole() -> None:
    clusters = [
        (frozenset({name}), tokens)
        for name, tokens in zip("abcde", (500, 400, 300, 250, 200), strict=True)
    ]
    placed = distribute(clusters, cache_target_tokens=100)
    # 500 → L1, 400 → L2, 300 → L3, 250 → L3 (300 lightest), 200 → L2 (400 < 500 < 550).
    assert {next(iter(c)): tier for c, tier in placed.items()} == {
        "a": "L1",
        "b": "L2",
        "c": "L3",
        "d": "L3",
        "e": "L2",
    }


def test_fewer_tiers_when_three_cannot_each_reach_the_target() -> None:
    clusters = [(frozenset({"a"}), 200), (frozenset({"b"}), 150), (frozenset({"c"}), 30)]
    # Three tiers would leave L3 with 30 < 100; two tiers: 200 | 150 + 30, both >= 100.
    placed = distribute(clusters, cache_target_tokens=100)
    assert {next(iter(c)): tier for c, tier in placed.items()} == {"a": "L1", "b": "L2", "c": "L2"}


def test_greedy_imbalance_falls_back_to_one_tier() -> None:
    # 340 >= 3 × 100 tokens, but a whole 250-token cluster leaves the others at 60 and 30.
    clusters = [(frozenset({"big"}), 250)] + [(frozenset({name}), 30) for name in "xyz"]
    placed = distribute(clusters, cache_target_tokens=100)
    assert set(placed.values()) == {"L1"}


def test_everything_small_goes_to_l1_and_no_target_uses_three_tiers() -> None:
    clusters = [(frozenset({"a"}), 40), (frozenset({"b"}), 30)]
    assert set(distribute(clusters, cache_target_tokens=1536).values()) == {"L1"}
    placed = distribute(clusters, cache_target_tokens=0)
    assert {next(iter(c)): tier for c, tier in placed.items()} == {"a": "L1", "b": "L2"}


def test_assign_tiers_sums_symbol_tokens_and_excludes_active_files() -> None:
    tokens = {
        "streaming.py": 400,
        "context_builder.py": 500,
        "stability_tracker.py": 300,
        "fetcher.py": 350,
        "cache.py": 250,
        "models.py": 700,
        "extensions.py": 100,
    }
    placed = assign_tiers(tokens, DEPS, cache_target_tokens=500)
    # Clusters: llm 1200, url 600, models 700, extensions 100 → L1 1200 | L2 700 | L3 600 + 100.
    assert placed == {
        "streaming.py": "L1",
        "context_builder.py": "L1",
        "stability_tracker.py": "L1",
        "models.py": "L2",
        "fetcher.py": "L3",
        "cache.py": "L3",
        "extensions.py": "L3",
    }
    # context_builder.py in active context: no assignment, but it still couples its
    # neighbours, which stay one cluster (700 tokens: ties with models.py, smaller path first).
    active = assign_tiers(
        tokens, DEPS, cache_target_tokens=500, active_files={"context_builder.py"}
    )
    assert "context_builder.py" not in active
    assert active["streaming.py"] == active["stability_tracker.py"]
    assert set(active.values()) <= set(CLUSTER_TIERS)


def test_tracker_initialize_places_symbol_entries_at_entry_n() -> None:
    tracker = StabilityTracker(TierConfig(cache_min_tokens=100, cache_buffer_multiplier=1.0))
    symbols = [Item(f"symbol:{p}", p, 200) for p in ("a.py", "b.py", "c.py", "d.py")]
    deps = {"a.py": {"b.py"}, "b.py": {"a.py"}}
    tracker.initialize(symbols, deps, active_files={"d.py"})
    # Clusters {a, b} 400, {c} 200 → L1, L2 (L3 would be empty, below the target).
    assert [(tracker.tier_of(k), tracker.n_of(k)) for k in ("symbol:a.py", "symbol:c.py")] == [
        ("L1", ENTRY_N["L1"]),
        ("L2", ENTRY_N["L2"]),
    ]
    assert tracker.tier_of("symbol:b.py") == "L1"
    assert tracker.snapshot().n.keys() == {"symbol:a.py", "symbol:b.py", "symbol:c.py"}


GRAPHS = st.dictionaries(
    st.sampled_from([f"f{i}.py" for i in range(8)]),
    st.sets(st.sampled_from([f"f{i}.py" for i in range(8)])),
)


@settings(max_examples=80, deadline=None)
@given(
    deps=GRAPHS,
    tokens=st.dictionaries(
        st.sampled_from([f"f{i}.py" for i in range(8)]), st.integers(0, 2000), min_size=1
    ),
    target=st.sampled_from([0, 100, 1536]),
)
def test_assignment_properties(
    deps: dict[str, set[str]], tokens: dict[str, int], target: int
) -> None:
    placed = assign_tiers(tokens, deps, cache_target_tokens=target)
    assert placed.keys() == tokens.keys()  # every symbol entry placed, L0 never
    assert set(placed.values()) <= {"L1", "L2", "L3"}
    for cluster in cluster_files(deps, files=tokens):  # clusters are never split
        assert len({placed[path] for path in cluster if path in placed}) <= 1
    totals = {
        tier: sum(tokens[p] for p, t in placed.items() if t == tier) for tier in CLUSTER_TIERS
    }
    used = [tier for tier in CLUSTER_TIERS if any(t == tier for t in placed.values())]
    assert used == list(CLUSTER_TIERS[: len(used)]) or target == 0  # L1 first, then L2, L3
    if target and len(used) > 1:
        assert all(totals[tier] >= target for tier in used)
