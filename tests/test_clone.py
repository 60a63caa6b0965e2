"""`Simulator.clone`, `Scheduler.clone` and its parts' (`KVCacheManager`, `HostLink`) are each
built from one declaration of every field: the declaration matches a live object's fields,
shared fields are immutable or declared read-only, and mutating every field of a clone in place
(append, setitem, nested attributes, every copied sequence) leaves the original as it was. A
forgotten field would leak state between the bound's play-outs."""

from __future__ import annotations

import dataclasses
import enum
import pickle
from collections import deque

import pytest

from kv_cache_env.sim import Simulator, Status, compress, get_scenario, swap
from kv_cache_env.sim.block_pool import BlockPool
from kv_cache_env.sim.host_link import HostLink
from kv_cache_env.sim.kv_manager import KVCacheManager
from kv_cache_env.sim.scheduler import Scheduler
from kv_cache_env.sim.sequence import Sequence

DONE = (Status.FINISHED, Status.FAILED)
IMMUTABLE = (int, float, bool, str, bytes, tuple, frozenset, enum.Enum, type(None))


def _busy_simulator() -> Simulator:
    """A `hard` episode a few turns in, with running, paused, offloaded and compressed KV."""
    sim = Simulator(get_scenario("hard"), 3)
    for _ in range(4):
        obs = sim.observe()
        actions = [swap(e.seq_id) for e in obs.entries if e.paused][:2]
        actions += [compress(e.seq_id) for e in obs.entries if not e.paused][:3]
        sim.play_turn(actions)
    assert sim.engine.running and sim.engine.paused and sim.engine.waiting
    return sim


def _frozen(value: object) -> bool:
    params = getattr(value, "__dataclass_params__", None)
    return dataclasses.is_dataclass(value) and params is not None and params.frozen


OWNERS = {
    Simulator: lambda sim: sim,
    Scheduler: lambda sim: sim.engine,
    KVCacheManager: lambda sim: sim.engine.kv,
    HostLink: lambda sim: sim.engine.host,
}
"""Each class that declares its clone groups, and where a simulator holds one."""


@pytest.mark.parametrize("cls", list(OWNERS), ids=lambda c: c.__name__)
def test_every_field_is_declared_once_and_cloned(cls):
    sim = _busy_simulator()
    obj = OWNERS[cls](sim)
    shared, own = set(cls.SHARED_FIELDS), set(cls.OWN_FIELDS)
    assert not shared & own and len(shared) == len(cls.SHARED_FIELDS)
    assert set(vars(obj)) == shared | own
    assert set(vars(OWNERS[cls](sim.clone()))) == shared | own
    for name in cls.SHARED_FIELDS:  # shared: immutable, or read-only by declaration
        value = getattr(obj, name)
        assert isinstance(value, IMMUTABLE) or _frozen(value) or name in cls.READ_ONLY_FIELDS, (
            f"{cls.__name__}.{name} is shared by clones but mutable ({type(value).__name__})"
        )


@pytest.mark.parametrize("cls", list(OWNERS), ids=lambda c: c.__name__)
def test_a_clone_refuses_an_undeclared_field(cls):
    sim = _busy_simulator()
    OWNERS[cls](sim).extra = []
    with pytest.raises(AssertionError, match="extra"):
        sim.clone()


def _mutate(value: object) -> None:
    """Change `value` in place, as deep as a copy should reach."""
    if isinstance(value, list | deque):
        for item in list(value):
            _mutate(item)
        value.append(object())
    elif isinstance(value, dict):
        for item in list(value.values()):
            _mutate(item)
        value["mutated"] = object()
    elif isinstance(value, Sequence):
        if value.status in DONE:
            return  # a finished request is shared by clones: nothing changes it again
        value.generated += 1
        value.gpu_blocks += 1
        value.status = None  # type: ignore[assignment]
    elif isinstance(value, BlockPool):
        value.num_free += 1
        value.num_private += 1
    elif isinstance(value, Scheduler | KVCacheManager | HostLink):
        for name in type(value).OWN_FIELDS:
            _mutate(getattr(value, name))


def test_mutating_every_field_of_a_clone_leaves_the_original_unchanged():
    sim = _busy_simulator()
    before = {
        **{
            f"sim.{n}": pickle.dumps(getattr(sim, n))
            for n in Simulator.OWN_FIELDS
            if n != "_tables"
        },
        **{f"engine.{n}": pickle.dumps(getattr(sim.engine, n)) for n in Scheduler.OWN_FIELDS},
    }
    clone = sim.clone()
    for name in Simulator.OWN_FIELDS:
        _mutate(getattr(clone, name))
    after = {
        **{
            f"sim.{n}": pickle.dumps(getattr(sim, n))
            for n in Simulator.OWN_FIELDS
            if n != "_tables"
        },
        **{f"engine.{n}": pickle.dumps(getattr(sim.engine, n)) for n in Scheduler.OWN_FIELDS},
    }
    changed = [name for name in before if before[name] != after[name]]
    shared = [s for k, s in sim.engine.sequences.items() if clone.engine.sequences[k] is s]
    assert shared and all(s.status in DONE for s in shared)  # only finished requests
    assert not changed, f"a clone's mutation reached the original: {changed}"
    sim.check_invariants()
