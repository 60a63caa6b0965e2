"""BlockCache: absolute block mapping, prioritized-LRU engine evictions, tail protection, and
the token mask of the masking design agreeing with every per-message query."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kv_context_env.sim.cache import BlockCache
from kv_context_env.vocabulary import (
    DEFAULT_PRIORITY,
    SYSTEM_PRIORITY,
    BlocksRemoved,
    Message,
    Role,
)

B = 16


def msg(index: int, role: Role, n: int) -> Message:
    kind = "system" if role == "system" else "chat"
    return Message(index=index, role=role, kind=kind, text=f"m{index}", n_tokens=n)


def build(sizes: list[tuple[Role, int]], max_blocks: int = 100) -> BlockCache:
    cache = BlockCache(max_blocks)
    for i, (role, n) in enumerate(sizes):
        cache.append(msg(i, role, n), step=i)
    return cache


def mixed() -> BlockCache:
    # tokens: system [0,20)  user [20,25)  assistant [25,55)  user [55,71)
    # blocks:  b0=[0,15] b1=[16,31] b2=[32,47] b3=[48,63] b4=[64,79] (tail, 7 tokens written)
    return build([("system", 20), ("user", 5), ("assistant", 30), ("user", 16)])


def test_block_mapping_exact() -> None:
    cache = mixed()
    assert [cache.message_span(i) for i in range(4)] == [(0, 20), (20, 25), (25, 55), (55, 71)]
    assert [cache.blocks_of(i) for i in range(4)] == [
        range(0, 2),
        range(1, 2),
        range(1, 4),
        range(3, 5),
    ]
    assert cache.n_blocks == 5 and cache.n_tokens == 71 and cache.tail_block == 4
    table = cache.block_table()
    assert [b.messages for b in table] == [(0,), (0, 1, 2), (2,), (2, 3), (3,)]
    # any system token makes the block a system block (TensorRT token-range retention)
    assert [b.priority for b in table] == [SYSTEM_PRIORITY] * 2 + [DEFAULT_PRIORITY] * 3
    assert [b.last_access for b in table] == [0, 2, 2, 3, 3]
    assert all(b.active for b in table) and cache.active_blocks == 5


def test_block_boundaries_are_16k_to_16k_plus_15() -> None:
    cache = build([("system", 16), ("user", 16), ("assistant", 1)])
    assert cache.blocks_of(0) == range(0, 1)  # tokens 0..15
    assert cache.blocks_of(1) == range(1, 2)  # tokens 16..31
    assert cache.blocks_of(2) == range(2, 3)  # token 32 opens block 2
    assert cache.n_blocks == 3


def test_partial_eviction_queries() -> None:
    cache = mixed()
    event = cache.evict_blocks([2], step=9)
    assert event == BlocksRemoved(step=9, blocks=(2,), cause="agent")
    assert not cache.is_active(2) and cache.active_blocks == 4
    assert cache.visible_tokens(2) == 30 - 16
    assert cache.visible_tokens(1) == 5
    assert not cache.fully_resident(2)
    assert cache.resident_messages() == [0, 1, 3]


def test_evict_message_skips_tail_and_evicted_blocks() -> None:
    cache = mixed()
    assert cache.evict_message(3, step=5) == BlocksRemoved(5, (3,), "agent")  # b4 is the tail
    assert cache.evict_message(2, step=6) == BlocksRemoved(6, (1, 2), "agent")
    assert cache.evict_message(3, step=7) is None
    assert cache.resident_messages() == []  # message 0 lost b1, message 1 lives in b1


def test_evict_blocks_validation_is_atomic() -> None:
    cache = mixed()
    for bad, words in [(-1, "does not exist"), (5, "does not exist"), (4, "tail block")]:
        with pytest.raises(ValueError, match=words):
            cache.evict_blocks([1, bad], step=1)
        assert cache.active_blocks == 5  # nothing evicted, not even the valid block 1
    assert cache.evict_blocks([2, 1, 2], step=1) == BlocksRemoved(1, (1, 2), "agent")
    with pytest.raises(ValueError, match="already evicted"):
        cache.evict_blocks([3, 2], step=2)
    assert cache.is_active(3)
    assert cache.evict_blocks([], step=3) is None


def test_append_validation() -> None:
    cache = BlockCache(4)
    with pytest.raises(ValueError, match="out of order"):
        cache.append(msg(1, "system", 3), step=0)
    with pytest.raises(ValueError, match="tokens"):
        cache.append(Message(0, "system", "system", "", 0), step=0)
    with pytest.raises(ValueError, match="max_blocks"):
        BlockCache(0)
    with pytest.raises(ValueError, match="message 0 does not exist"):
        cache.blocks_of(0)
    assert cache.tail_block is None and cache.enforce_limit(0) is None


def test_tail_block_is_protected_until_the_next_message_moves_on() -> None:
    cache = build([("system", 16), ("user", 10)], max_blocks=1)
    assert cache.tail_block == 1
    with pytest.raises(ValueError, match="tail block"):
        cache.evict_blocks([1], step=1)
    # The engine cannot evict the tail either: it goes below the limit without it.
    assert cache.enforce_limit(step=1) == BlocksRemoved(1, (0,), "engine")
    assert cache.active_blocks == 1 and cache.is_active(1)
    cache.append(msg(2, "assistant", 6), step=2)  # fills block 1 exactly: still the tail
    assert cache.tail_block == 1 and cache.enforce_limit(step=2) is None
    cache.append(msg(3, "user", 1), step=3)  # block 2 is the tail now
    assert cache.enforce_limit(step=3) == BlocksRemoved(3, (1,), "engine")


def test_engine_evicts_oldest_first_one_message_per_step() -> None:
    # system = block 0; each later message is exactly one block; limit 3 active blocks.
    cache = BlockCache(3)
    events = []
    for i in range(7):
        cache.append(msg(i, "system" if i == 0 else "user", B), step=i)
        cache.touch_all(i)
        events.append(cache.enforce_limit(step=i))
    assert events == [
        None,
        None,
        None,
        BlocksRemoved(3, (1,), "engine"),
        BlocksRemoved(4, (2,), "engine"),
        BlocksRemoved(5, (3,), "engine"),
        BlocksRemoved(6, (4,), "engine"),
    ]
    assert [b.index for b in cache.block_table() if b.active] == [0, 5, 6]


def test_engine_prioritized_lru_order() -> None:
    # b0 system | b1 b2 user | b3 system (a later system message) | b4 b5 user | b6 tail
    sizes: list[tuple[Role, int]] = [
        ("system", 16),
        ("user", 32),
        ("system", 16),
        ("user", 16),
        ("assistant", 16),
        ("user", 1),
    ]
    for max_blocks, evicted in [
        (5, (1, 2)),  # oldest default-priority blocks first
        (3, (1, 2, 4, 5)),  # every default block before any system block
        (2, (0, 1, 2, 4, 5)),  # then system blocks, oldest first
        (1, (0, 1, 2, 3, 4, 5)),  # never the tail
    ]:
        cache = build(sizes, max_blocks)
        cache.touch_all(step=10)
        event = cache.enforce_limit(step=11)
        assert event == BlocksRemoved(11, evicted, "engine"), max_blocks


def test_most_recently_appended_blocks_are_evicted_last() -> None:
    # Without touch_all, the most recently appended blocks are the most recently used.
    cache = build([("system", 16), ("user", 16), ("assistant", 16), ("user", 5)], 2)
    assert [b.last_access for b in cache.block_table()] == [0, 1, 2, 3]
    assert cache.enforce_limit(step=4) == BlocksRemoved(4, (1, 2), "engine")


ROLES: list[Role] = ["system", "user", "assistant", "tool"]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.sampled_from(ROLES), st.integers(1, 40)), min_size=1, max_size=25),
    max_blocks=st.integers(1, 8),
    agent=st.lists(st.integers(0, 200), max_size=25),
)
def test_queries_agree_with_the_token_mask(
    sizes: list[tuple[Role, int]], max_blocks: int, agent: list[int]
) -> None:
    """The masking design's mask (block status repeated over its 16 tokens) decides every query, and
    the engine never keeps a non-tail block that sorts before one it evicted."""
    cache = BlockCache(max_blocks)
    for step, (role, n) in enumerate(sizes):
        cache.append(msg(step, role, n), step)
        if agent and agent[step % len(agent)] % 3 == 0:
            candidates = [
                k for k in range(cache.n_blocks) if cache.is_active(k) and k != cache.tail_block
            ]
            if candidates:
                cache.evict_blocks([candidates[agent[step % len(agent)] % len(candidates)]], step)
        cache.touch_all(step)
        before = {b.index: (b.priority, b.last_access, b.index) for b in cache.block_table()}
        event = cache.enforce_limit(step)
        assert cache.active_blocks == sum(b.active for b in cache.block_table())
        assert cache.active_blocks <= max_blocks
        if event is not None:
            kept = [
                before[b.index]
                for b in cache.block_table()
                if b.active and b.index != cache.tail_block
            ]
            assert all(before[k] < key for k in event.blocks for key in kept)
        accesses = [b.last_access for b in cache.block_table() if b.active]
        assert accesses == sorted(accesses)  # so LRU order = position order (class docstring)
        mask = [int(b.active) for b in cache.block_table() for _ in range(B)]
        for i in range(cache.n_messages):
            start, end = cache.message_span(i)
            assert cache.visible_tokens(i) == sum(mask[start:end])
            assert cache.fully_resident(i) == all(mask[start:end])
        assert cache.resident_messages() == [
            i for i in range(cache.n_messages) if cache.fully_resident(i)
        ]


def test_fast_enough_for_a_long_episode() -> None:
    """200 messages x 100 turns of reads, limits and resident queries."""
    cache = BlockCache(max_blocks=120)
    started = time.perf_counter()
    for step in range(200):
        cache.append(msg(step, "system" if step == 0 else "user", 20 + step % 37), step)
        if step >= 100:
            cache.touch_all(step)
            cache.enforce_limit(step)
            cache.resident_messages()
            cache.block_table()
    assert cache.active_blocks == 120
    assert time.perf_counter() - started < 2.0
