"""BlockPool: exact counts and the LRU order of cached prefix blocks."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kv_cache_env.sim.block_pool import BlockPool


def test_private_allocation_and_free_are_exact():
    pool = BlockPool(10)
    assert pool.allocate(4) == []
    assert (pool.num_free, pool.num_private, pool.used, pool.available) == (6, 4, 4, 6)
    pool.free(3)
    assert (pool.num_free, pool.num_private, pool.used) == (9, 1, 1)
    pool.check()


def test_misuse_raises_value_error():
    pool = BlockPool(3)
    with pytest.raises(ValueError, match="no free blocks"):
        pool.allocate(4)
    with pytest.raises(ValueError, match="cannot free"):
        pool.free(1)
    with pytest.raises(ValueError):
        BlockPool(0)


def test_prefix_chain_is_shared_by_reference_count():
    pool = BlockPool(10)
    hits, stored, reclaimed = pool.acquire_prefix([1, 2, 3])
    assert (hits, stored, reclaimed) == (0, [1, 2, 3], [])
    hits, stored, _ = pool.acquire_prefix([1, 2, 9])
    assert (hits, stored) == (2, [9])
    assert pool.ref_counts == {1: 2, 2: 2, 3: 1, 9: 1}
    assert pool.used == 4
    pool.check()


def test_released_chain_stays_cached_tail_first_and_is_reclaimed_lru():
    pool = BlockPool(4)
    pool.acquire_prefix([1, 2, 3])
    pool.release_prefix([1, 2, 3])
    # released tail first, so the tail sits at the LRU end: 3 -> 2 -> 1
    assert list(pool.cached) == [3, 2, 1]
    assert pool.used == 0 and pool.available == 4
    assert pool.cached_hit_length([1, 2, 3]) == (3, 3)
    assert pool.allocate(2) == [3]  # one fresh free block, then the LRU cached block
    assert list(pool.cached) == [2, 1]
    # the chain now breaks at its second block
    assert pool.cached_hit_length([1, 2, 3]) == (2, 2)
    pool.check()


def test_hit_on_cached_block_takes_it_off_the_queue():
    pool = BlockPool(4)
    pool.acquire_prefix([1, 2])
    pool.release_prefix([1, 2])
    hits, stored, _ = pool.acquire_prefix([1, 2, 5])
    assert (hits, stored) == (2, [5])
    assert not pool.cached and pool.ref_counts == {1: 1, 2: 1, 5: 1}
    pool.check()


def test_copy_is_independent():
    pool = BlockPool(5)
    pool.acquire_prefix([1])
    clone = pool.copy()
    clone.allocate(2)
    clone.release_prefix([1])
    assert pool.used == 1 and pool.ref_counts == {1: 1}
    assert clone.used == 2 and list(clone.cached) == [1]


def test_a_prefix_hash_can_name_a_unit_of_blocks():
    # a trace's 512-token hash block over 16-token engine blocks: 32 blocks per hash
    pool = BlockPool(100, unit=32)
    assert pool.acquire_prefix([1, 2]) == (0, [1, 2], [])
    assert (pool.used, pool.available) == (64, 36)
    pool.allocate(30)
    pool.release_prefix([1, 2])
    assert (pool.used, pool.cached_blocks, pool.available) == (30, 64, 70)
    # 40 blocks: 6 free, then the least recently used unit (hash 2, released first as the tail)
    # is reclaimed whole and 34 - 32 = 2 more from hash 1; the unused rest returns to free
    assert pool.allocate(40) == [2, 1]
    assert (pool.num_free, pool.num_private, pool.cached_blocks) == (30, 70, 0)
    pool.check()
    with pytest.raises(ValueError, match="no free blocks"):
        pool.acquire_prefix([3])


_CHAINS = ((1, 2, 3, 4), (1, 2, 7), (5, 6), (8,), (1, 2, 3, 4, 9, 10))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("acquire", "release", "allocate", "free")),
            st.integers(0, len(_CHAINS) - 1),
            st.integers(1, 4),
        ),
        max_size=40,
    )
)
def test_remembered_hit_lengths_equal_a_fresh_lookup(ops):
    """`cached_hit_length` remembers its answer per chain until a hash changes state; after
    any sequence of pool operations every chain's answer equals a fresh pool's (a copy
    remembers nothing)."""
    pool = BlockPool(12)
    held: list[tuple[int, ...]] = []
    for op, index, n in ops:
        chain = _CHAINS[index]
        for c in _CHAINS:  # ask first, so that stale answers would be served below
            pool.cached_hit_length(c)
        if op == "acquire":
            hits, cached = pool.cached_hit_length(chain)
            if (len(chain) - hits) <= pool.available - cached:
                pool.acquire_prefix(chain, hits)
                held.append(chain)
        elif op == "release" and held:
            pool.release_prefix(held.pop(index % len(held)))
        elif op == "allocate" and n <= pool.available:
            pool.allocate(n)
        elif op == "free" and pool.num_private:
            pool.free(min(n, pool.num_private))
        fresh = pool.copy()
        for c in _CHAINS:
            assert pool.cached_hit_length(c) == fresh.cached_hit_length(c), (op, c)
        pool.check()


def test_a_chain_held_twice_counts_its_hashes_once_and_its_last_holder_releases_them():
    pool = BlockPool(10)
    chain = (1, 2, 3)
    pool.acquire_prefix(chain)
    assert pool.acquire_prefix((1, 2, 3)) == (3, [], [])  # the same content: the same chain
    pool.acquire_prefix((1, 2))
    assert pool.shared == {1: 2, 2: 2, 3: 1}  # per distinct chain
    assert pool.ref_counts == {1: 3, 2: 3, 3: 2}  # per holder, as vLLM's ref_cnt
    assert pool.sole_held(chain) == 0 and pool.sole_held((1, 2)) == 0
    assert pool.release_prefix(chain) == 0  # the other holder of (1, 2, 3) keeps all of it
    assert pool.sole_held(chain) == 1  # 3: (1, 2) is also held through the chain (1, 2)
    pool.check()
    assert pool.release_prefix([1, 2, 3]) == 1 and list(pool.cached) == [3]
    assert pool.ref_counts == {1: 1, 2: 1} and pool.sole_held((1, 2)) == 2
    pool.check()


def test_an_empty_chain_references_nothing():
    pool = BlockPool(4)
    assert pool.acquire_prefix(()) == (0, [], []) and pool.release_prefix(()) == 0
    assert not pool.holders and not pool.shared
    pool.check()


def test_hashes_that_are_not_a_chain_are_counted_per_occurrence():
    pool = BlockPool(10)
    pool.acquire_prefix((7, 8))
    pool.release_prefix((7, 8))
    assert list(pool.cached) == [8, 7]
    # 9 misses first; 8, cached, is shared again without a fresh block; 5 repeats
    assert pool.acquire_prefix((9, 8, 5, 5)) == (0, [9, 5], [])
    assert pool.ref_counts == {9: 1, 8: 1, 5: 2} and list(pool.cached) == [7]
    assert (pool.used, pool.num_free) == (3, 6)  # two fresh blocks: 9 and 5
    pool.check()
    assert pool.release_prefix((9, 8, 5, 5)) == 3 and list(pool.cached) == [7, 5, 8, 9]
    pool.check()
