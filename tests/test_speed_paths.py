"""The engine's speed and memory tricks change no result: each is checked against the plain path."""

import dataclasses
import pickle

import numpy as np
import pytest

from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.policies import blocks_to_free
from kv_cache_env.rl.features import growth_at_most, growth_blocks
from kv_cache_env.sim import Simulator, get_scenario, make_action, run_reference
from kv_cache_env.sim import simulator as simulator_module
from kv_cache_env.sim.block_pool import BlockPool
from kv_cache_env.sim.observation import Queue, QueueView, Table, build_observation


def _episodes():
    for name, seed in (("hard", 1), ("agent-tools", 2), ("flash-crowd", 3)):
        yield get_scenario(name), Simulator(get_scenario(name), seed).schedule
    yield EpisodeSpec("medium", 4, trace="mooncake-conversation", steps=40).resolve()


@pytest.mark.parametrize("episode", list(_episodes()), ids=lambda e: e[0].name)
def test_the_reference_mode_gives_the_plain_engines_reference(episode, monkeypatch):
    scenario, schedule = episode
    lean = simulator_module.run_reference_stepwise(scenario, schedule)
    assert run_reference(scenario, schedule) == lean  # the specialised run (sim/reference.py)
    plain_engine = simulator_module.Scheduler

    def plain(*args, reference=False):
        return plain_engine(*args)  # an ordinary engine: LRU cache, every request indexed

    monkeypatch.setattr(simulator_module, "Scheduler", plain)
    assert simulator_module.run_reference_stepwise(scenario, schedule) == lean


def test_a_pool_built_without_reclaims_refuses_to_reclaim():
    pool = BlockPool(3, reclaims=False)
    pool.acquire_prefix([1, 2])
    pool.release_prefix([1, 2])
    assert pool.available == 3
    with pytest.raises(AssertionError, match="reclaims=False"):
        pool.allocate(2)


def test_release_counts_the_blocks_it_frees():
    pool = BlockPool(10)
    pool.acquire_prefix([1, 2, 3])
    pool.acquire_prefix([1, 2])
    assert pool.release_prefix([1, 2, 3]) == 1  # only 3 was held alone
    assert pool.release_prefix([1, 2]) == 2


def _random_calls(sim, entries, rng) -> None:
    """0-2 random evict / compress / swap calls on the observed `entries` (valid or not)."""
    for _ in range(int(rng.integers(0, 3))):
        if entries:
            target = entries[int(rng.integers(0, len(entries)))].seq_id
            sim.apply(make_action(("evict", "compress", "swap")[int(rng.integers(0, 3))], target))


@pytest.mark.parametrize("name", ["hard", "agent-tools", "chat-human"])
def test_observed_frees_and_order_match_the_engine(name):
    """`frees` is counted once per prefix chain; check it against the engine's own count for
    every entry, and the memory order against the documented key, through random play."""
    sim = Simulator(get_scenario(name), 9)
    rng = np.random.default_rng(9)
    while not sim.done:
        obs = sim.observe()
        seqs = sim.engine.sequences
        for entry in obs.entries:
            assert entry.frees == sim.engine.kv.freeable_blocks(seqs[entry.seq_id])
            seq = seqs[entry.seq_id]
            assert entry.out == seq.generated - (seq.call_end - seq.call_output)
            assert entry.out <= entry.budget
        keys = [(-e.gpu_cost, e.seq_id) for e in obs.entries]
        assert keys == sorted(keys)
        _random_calls(sim, obs.entries, rng)
        sim.step()


def test_a_sequence_copy_copies_every_field():
    """`Sequence.copy` sets the fields one by one: a field added later must be added there."""
    seq = next(iter(Simulator(get_scenario("agent-tools"), 5).engine.sequences.values()))
    for name in type(seq).__slots__:
        setattr(seq, name, object())  # a distinct marker in every field
    copy = seq.copy()
    assert copy is not seq
    for name in type(seq).__slots__:
        assert getattr(copy, name) is getattr(seq, name), name


@pytest.mark.parametrize("name", ["hard", "agent-tools"])
def test_a_lazy_table_is_the_eager_one(name):
    """Without hints the entries are a lazy `Table` and the queue a lazy `Queue`: equal,
    printed and pickled as the eager tuple and `QueueView`, with the same decode growth and
    queue counts unbuilt, and an observation held across actions and steps keeps showing the
    state it was taken in."""
    sim = Simulator(get_scenario(name), 3)
    rng = np.random.default_rng(3)
    held = []
    while not sim.done:
        eager = build_observation(
            sim.engine, turn=sim.turn, turns=sim.scenario.steps, warmup=sim.scenario.warmup_steps
        )
        unread = sim.observe(hints=False)
        assert isinstance(unread.entries, Table) and not unread.entries.built
        assert isinstance(unread.queue, Queue) and not unread.queue.built
        assert growth_blocks(unread) == growth_blocks(eager)
        assert growth_at_most(unread) >= growth_blocks(eager)
        queue = unread.queue
        assert (queue.waiting, queue.oldest_wait) == (
            eager.queue.waiting,
            eager.queue.oldest_wait,
        )
        assert not unread.entries.built and not queue.built
        for target in (0.0, 0.5, 0.8, 0.9, 0.95, 1.0):  # the early return changes no answer
            urgent = eager.queue.head_blocks if eager.queue.oldest_wait >= eager.max_wait - 1 else 0
            plain = eager.used + growth_blocks(eager) + (urgent if eager.queue.waiting else 0)
            assert blocks_to_free(unread, target) == max(0, plain - int(target * eager.capacity))
        lazy = sim.observe(hints=False)
        assert lazy.entries == eager.entries and repr(lazy.entries) == repr(eager.entries)
        assert lazy.queue.head_blocks == eager.queue.head_blocks
        assert lazy.queue == eager.queue and repr(lazy.queue) == repr(eager.queue)
        assert hash(lazy.queue) == hash(eager.queue) and tuple(lazy.queue) == eager.queue
        assert pickle.loads(pickle.dumps(lazy)) == lazy
        assert type(pickle.loads(pickle.dumps(lazy)).queue) is QueueView
        assert lazy == dataclasses.replace(eager, candidates=None)
        held.append((sim.observe(hints=False), eager.entries, eager.queue))  # read at the end
        _random_calls(sim, eager.entries, rng)
        sim.step()
    for obs, entries, queue in held:
        assert obs.entries == entries
        assert obs.queue == queue and obs.queue.demand_blocks == queue.demand_blocks
