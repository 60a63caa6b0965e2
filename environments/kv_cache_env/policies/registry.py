"""The policy registry: each built-in policy's name and the factory that builds it.

The package root (`kv_cache_env.policies`) registers every built-in policy at import; the
modules that read the registry back (the bound's pool of rules, the regime rule's candidates)
import it from here, which imports no policy module, so no import goes round in a circle."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from rubrics import DEFAULT_WEIGHTS, Weights

from .base import Policy

_REGISTRY: dict[str, Callable[[], Policy]] = {}


def register(name: str, factory: Callable[[], Policy]) -> None:
    """Make `create(name)` build policies with `factory`; a name can be registered once."""
    if name in _REGISTRY:
        raise ValueError(f"policy {name!r} is already registered")
    _REGISTRY[name] = factory


def create(name: str, weights: Weights = DEFAULT_WEIGHTS) -> Policy:
    """A new policy `name`; a planner (`optimises`) is built with `weights`, the weights its
    episodes will be scored under. ValueError for an unknown name."""
    factory = _factory(name)
    if optimises(name):
        return factory(weights=weights)  # type: ignore[call-arg]
    policy = factory()
    if policy.optimises:  # a planner behind a factory that cannot be given the weights
        raise TypeError(f"policy {name!r} optimises the rubric: register its class")
    return policy


def optimises(name: str) -> bool:
    """Whether policy `name` searches by the rubric's reward, so that what it plays depends on
    the weights (`Policy.optimises`). ValueError for an unknown name."""
    factory = _factory(name)
    return isinstance(factory, type) and issubclass(factory, Policy) and factory.optimises


def _factory(name: str) -> Callable[[], Policy]:
    try:
        return _REGISTRY[name]
    except KeyError:
        from kv_cache_env.suggest import unknown_name

        raise ValueError(unknown_name("policy", name, available(), "policies")) from None


def available() -> list[str]:
    return list(_REGISTRY)


def registered() -> Mapping[str, Callable[[], Policy]]:
    """Every registered policy's factory, by name, in registration order (read-only)."""
    return MappingProxyType(_REGISTRY)


NOT_IN_POOL = frozenset({"random", "bound", "lookahead", "expert"})


def bound_pool() -> list[Callable[[], Policy]]:
    """The bound's pool: every registered observation policy except `random` (a pool member must
    be a rule, not noise) — the eviction orders (FIFO, LRU, priority), the session rules, the
    single-action strategies, the rule the grid found (`purge-when-full`) and lookahead's
    variants."""
    return [make for name, make in _REGISTRY.items() if name not in NOT_IN_POOL]
