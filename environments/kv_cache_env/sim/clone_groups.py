"""Copies built from one declaration of every field: `shared_copy`.

The simulator's stateful classes (`Simulator`, `Scheduler`, `KVCacheManager`, `HostLink`) each
declare every field once, in the group that says how a clone treats it: `SHARED_FIELDS` (the
clone holds the same object: numbers, frozen records, the tables named in `READ_ONLY_FIELDS`)
or `OWN_FIELDS` (the class's `clone` gives the copy its own). `shared_copy` starts every such
clone, and refuses an object holding a field no group declares, so a field added later cannot
be forgotten by its clone (`tests/test_clone.py` checks the groups against live objects and
mutates every field of a clone in place).
"""

from __future__ import annotations

from typing import ClassVar, Protocol, TypeVar


class Declared(Protocol):
    SHARED_FIELDS: ClassVar[tuple[str, ...]]
    OWN_FIELDS: ClassVar[tuple[str, ...]]


T = TypeVar("T", bound=Declared)


def shared_copy(obj: T) -> T:
    """A new instance of `obj`'s class holding `obj`'s shared fields (the caller adds its own)."""
    cls = type(obj)
    state = obj.__dict__
    if len(state) != len(cls.SHARED_FIELDS) + len(cls.OWN_FIELDS):
        declared = {*cls.SHARED_FIELDS, *cls.OWN_FIELDS}
        raise AssertionError(
            f"{cls.__name__} fields no clone group declares: {set(state) - declared}"
        )
    clone = cls.__new__(cls)
    clone.__dict__.update({name: state[name] for name in cls.SHARED_FIELDS})
    return clone
