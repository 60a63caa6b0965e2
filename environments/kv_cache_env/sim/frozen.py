"""Building many frozen records quickly: `slot_constructor` (issue 13, engine speed).

A frozen dataclass's generated `__init__` sets every field through `object.__setattr__`, which
is what freezing costs; a schedule builds a `Request` per arrival (~10,700 for the full Mooncake
trace) and a trace a `TraceRequest` per line. `slot_constructor(cls)` returns a constructor
taking every field (by position or by name) that sets each slot through its own descriptor:
the same object as `cls(...)` (equal, same hash, repr and pickle), built in about 40% of the
time (`Request`: 2.7 -> 1.0 us). Like dataclasses' own `__init__`, it is generated source.
Only for frozen, slotted dataclasses without `__post_init__`; fields with defaults must be
passed too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")

_RESERVED = {"_cls", "_new", "_record"}


def slot_constructor(cls: type[T]) -> Callable[..., T]:
    """A faster equivalent of `cls(...)` for a frozen, slotted dataclass `cls` (see above)."""
    names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    params = getattr(cls, "__dataclass_params__", None)
    if (
        getattr(cls, "__slots__", None) != names
        or params is None
        or not params.frozen
        or hasattr(cls, "__post_init__")
        or _RESERVED & set(names)
    ):
        raise TypeError(f"{cls.__name__}: not a frozen, slotted dataclass without __post_init__")
    setters = {f"_set_{name}": getattr(cls, name).__set__ for name in names}
    source = (
        f"def make({', '.join(names)}):\n"
        "    _record = _new(_cls)\n"
        + "".join(f"    _set_{name}(_record, {name})\n" for name in names)
        + "    return _record\n"
    )
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, **setters}
    exec(source, namespace)
    make: Callable[..., T] = namespace["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    make.__doc__ = f"`{cls.__name__}(...)` with every field given, faster (`slot_constructor`)."
    return make
