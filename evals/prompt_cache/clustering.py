"""Initial tier assignment by clustering the mutual-reference graph (seed 002, "Initialization
from Reference Graph Clustering").

Owns the three steps that turn a file reference graph into an L1/L2/L3 assignment of symbol
entries; the tracker (`tiers.StabilityTracker.initialize`) places the result. Pure functions:

1. `mutual_adjacency`: keep only bidirectional edges (A references B *and* B references A).
2. `cluster_files`: connected components of that graph; files without a mutual edge are
   singletons.
3. `distribute`: clusters sorted by tokens descending (ties: smallest path first) are bin-packed
   greedily, each cluster whole, into the tier with the fewest tokens so far (ties: L1, then L2,
   then L3). To respect `cache_target_tokens`, three tiers are tried, then two (L1, L2), then
   one (L1): the first packing whose every tier reaches the target is kept, and one tier (all in
   L1) is the fallback. With a target of 0 there is no minimum and three tiers are used.

L0 is never assigned, files in active context get no assignment (their full content is sent
instead), and only files that have a symbol entry are assigned. Paths here are bare file paths
(``"src/a.py"``), not item keys.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Literal

ClusterTier = Literal["L1", "L2", "L3"]
CLUSTER_TIERS: tuple[ClusterTier, ...] = ("L1", "L2", "L3")
"""Tiers clustering may fill, in preference order (L0 is earned, never assigned)."""


def mutual_adjacency(
    deps: Mapping[str, Collection[str]],
    refs: Mapping[str, Collection[str]] | None = None,
) -> dict[str, set[str]]:
    """Undirected adjacency of the bidirectional pairs.

    `deps[A]` is the set of files A references; `refs[B]` (optional, derivable from `deps`) the
    set of files that reference B, so ``A in refs[B]`` is the edge A → B too. A pair {A, B} is
    kept only when both A → B and B → A exist. Self-references are ignored.
    """
    directed: set[tuple[str, str]] = set()
    for source, targets in deps.items():
        directed.update((source, target) for target in targets)
    for target, sources in (refs or {}).items():
        directed.update((source, target) for source in sources)
    adjacency: dict[str, set[str]] = {}
    for source, target in directed:
        if source != target and (target, source) in directed:
            adjacency.setdefault(source, set()).add(target)
    return adjacency


def cluster_files(
    deps: Mapping[str, Collection[str]],
    refs: Mapping[str, Collection[str]] | None = None,
    files: Iterable[str] = (),
) -> list[frozenset[str]]:
    """Connected components of the mutual-reference graph over every file named in `deps`,
    `refs` or `files`, ordered by their smallest path."""
    adjacency = mutual_adjacency(deps, refs)
    nodes: set[str] = set(files) | set(deps) | set(refs or {})
    for targets in deps.values():
        nodes.update(targets)
    for sources in (refs or {}).values():
        nodes.update(sources)
    seen: set[str] = set()
    clusters: list[frozenset[str]] = []
    for start in sorted(nodes):
        if start in seen:
            continue
        component: set[str] = set()
        stack = [start]
        while stack:
            node = stack.pop()
            if node in component:
                continue
            component.add(node)
            stack.extend(adjacency.get(node, ()))
        seen |= component
        clusters.append(frozenset(component))
    return clusters


def distribute(
    cluster_tokens: Sequence[tuple[frozenset[str], int]],
    cache_target_tokens: int,
) -> dict[frozenset[str], ClusterTier]:
    """Tier of each (cluster, tokens) pair: greedy bin-packing respecting the minimum (see the
    module docstring for the rule and its tie-breaks)."""
    ordered = sorted(cluster_tokens, key=lambda pair: (-pair[1], min(pair[0], default="")))
    if cache_target_tokens == 0:
        return _pack(ordered, 3)[0]
    for tier_count in (3, 2):
        assignment, totals = _pack(ordered, tier_count)
        if all(total >= cache_target_tokens for total in totals):
            return assignment
    return _pack(ordered, 1)[0]


def _pack(
    ordered: Sequence[tuple[frozenset[str], int]], tier_count: int
) -> tuple[dict[frozenset[str], ClusterTier], list[int]]:
    """Greedy packing into the first `tier_count` tiers: each cluster to the lightest tier."""
    totals = [0] * tier_count
    assignment: dict[frozenset[str], ClusterTier] = {}
    for cluster, tokens in ordered:
        lightest = min(range(tier_count), key=lambda index: (totals[index], index))
        totals[lightest] += tokens
        assignment[cluster] = CLUSTER_TIERS[lightest]
    return assignment, totals


def assign_tiers(
    symbol_tokens: Mapping[str, int],
    deps: Mapping[str, Collection[str]],
    *,
    cache_target_tokens: int,
    refs: Mapping[str, Collection[str]] | None = None,
    active_files: Collection[str] = (),
) -> dict[str, ClusterTier]:
    """Tier of every file path in `symbol_tokens` (path → tokens of its symbol entry) that is not
    in `active_files`.

    Clusters come from the whole graph: an active file still couples its neighbours (the
    coupling is structural), it only gets no assignment itself. A cluster's tokens are the sum
    of its assigned files' symbol tokens; clusters with no such file are dropped.
    """
    if cache_target_tokens < 0:
        raise ValueError(f"cache_target_tokens must be >= 0, got {cache_target_tokens}")
    excluded = set(active_files)
    assignable = {path: tokens for path, tokens in symbol_tokens.items() if path not in excluded}
    pairs: list[tuple[frozenset[str], int]] = []
    for cluster in cluster_files(deps, refs, assignable):
        members = frozenset(path for path in cluster if path in assignable)
        if members:
            pairs.append((members, sum(assignable[path] for path in members)))
    tier_of_cluster = distribute(pairs, cache_target_tokens)
    return {path: tier for cluster, tier in tier_of_cluster.items() for path in cluster}
