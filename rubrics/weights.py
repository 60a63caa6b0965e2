"""A rubric's weights as one value: checked once, where a user's option enters, then passed
unchanged to everything that scores or optimises by the rubric.

`RubricWeights` is generic over a family's component set (`rubrics.serving.Weights`: the seven
serving components; `rubrics.context.ContextWeights`: the context family's three). A value holds
every component's weight (the family's defaults with the overrides applied). It is frozen,
hashable and picklable (jobs carry it into worker processes), a read-only mapping of component ->
weight in the family's component order, and it is built only through its validating constructor
(unpickling goes through it too): an override must name a known component and be a real number
(not a bool), finite and of size at most `MAX_WEIGHT`, so a reward can always be written as
JSON. A refused override raises `WeightError` (a ValueError) whose message names the component;
the CLI's edge prefixes it with the option (`--weights: ...`) and exits 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from numbers import Real
from typing import Any, ClassVar, NoReturn

from kv_cache_env.limits import MAX_WEIGHT


class WeightError(ValueError):
    """A refused weight override; `key` is the component (or non-component) it named."""

    def __init__(self, key: object, message: str) -> None:
        super().__init__(message)
        self.key = key


class RubricWeights(Mapping[str, float]):
    """Every component's weight of one rubric (module docstring). Subclasses name the family:
    `COMPONENTS` (the order), `DEFAULTS` (a weight for each) and `NOUN` (what a component is
    called in messages)."""

    __slots__ = ("_hash", "_values")

    COMPONENTS: ClassVar[tuple[str, ...]]
    DEFAULTS: ClassVar[Mapping[str, float]]
    NOUN: ClassVar[str]

    _values: dict[str, float]
    """Component -> weight, in `COMPONENTS` order; never changed after `__init__`."""
    _hash: int

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if tuple(cls.DEFAULTS) != tuple(cls.COMPONENTS):
            raise TypeError(f"{cls.__name__}: DEFAULTS must give COMPONENTS' weights, in order")

    def __init__(self, overrides: Mapping[Any, Any] | None = None) -> None:
        """The defaults with `overrides` (component -> weight) applied; WeightError naming the
        first bad entry (unknown component, not a number, not finite, too large)."""
        if overrides is not None and not isinstance(overrides, Mapping):
            raise WeightError(
                None, f"weights must map {self.NOUN}s to numbers, got {_shown(overrides)}"
            )
        values = dict(self.DEFAULTS)
        for name, weight in (overrides or {}).items():
            values[self._known(name)] = self._checked(name, weight)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_hash", hash((type(self).__name__, *values.values())))

    @classmethod
    def _known(cls, name: object) -> str:
        if not isinstance(name, str) or name not in cls.DEFAULTS:
            known = ", ".join(cls.COMPONENTS)
            raise WeightError(name, f"unknown {cls.NOUN} {name!r}; known: {known}")
        return name

    @staticmethod
    def _checked(name: str, weight: object) -> float:
        if isinstance(weight, bool) or not isinstance(weight, Real):
            raise WeightError(name, f"{name} must be a number, got {_shown(weight)}")
        if not abs(weight) <= MAX_WEIGHT:  # NaN and the infinities fail too; no float overflow
            raise WeightError(
                name,
                f"{name} must be finite and at most {MAX_WEIGHT:g} in size, got {_shown(weight)}",
            )
        return float(weight)

    # --- the value ---------------------------------------------------------------------------
    def overrides(self) -> dict[str, float]:
        """The components whose weight differs from the default, by name: what `run.json`
        records (empty for the default weights), and what rebuilds this value."""
        return {
            name: self._values[name]
            for name in sorted(self._values)
            if self._values[name] != self.DEFAULTS[name]
        }

    @property
    def is_default(self) -> bool:
        """Whether every weight is the family's default."""
        return all(self._values[name] == self.DEFAULTS[name] for name in self.COMPONENTS)

    # --- a read-only mapping -----------------------------------------------------------------
    def __getitem__(self, name: str) -> float:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RubricWeights):
            return type(self) is type(other) and self._values == other._values
        if isinstance(other, Mapping):
            return self._values == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.overrides()!r})"

    def __reduce__(self) -> tuple[type[RubricWeights], tuple[dict[str, float]]]:
        """Pickled as its weights; unpickling validates them again (one constructor)."""
        return type(self), (dict(self._values),)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is frozen")


def _shown(value: object) -> str:
    """A refused value as the user wrote it (JSON where it is JSON), at most 40 characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text[:40]


__all__ = ["RubricWeights", "WeightError"]
