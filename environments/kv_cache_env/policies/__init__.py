"""The built-in serving policies behind one registry: `register`, `create(name)`, `available()`.

Every policy here is a pure function of what it is given: an `Observation` (the rules in
`heuristics` and `session_rules`, the `learned` linear scorer, the `rule_grid` that `validate`
holds the suite against), or, for the planners, a copy of the simulator (`lookahead`; the
clairvoyant `bound`; the honest `expert`, which plays sampled futures from `worlds`). No I/O:
the episode runner and the results live in `evals.serving`."""

from __future__ import annotations

from collections.abc import Callable

from .base import OrderedEvictionPolicy, Policy, SimulatorPolicy, blocks_to_free, decide
from .bound import BoundPolicy
from .expert import ExpertPolicy
from .heuristics import GRID_RULES, HEURISTICS, SESSION_RULES, SINGLE_ACTION
from .learned import LearnedPolicy
from .lookahead import BASE_HEURISTICS, LookaheadPolicy
from .session_rules import MinWastePolicy

_REGISTRY: dict[str, Callable[[], Policy]] = {}


def register(name: str, factory: Callable[[], Policy]) -> None:
    """Make `create(name)` build policies with `factory`; a name can be registered once."""
    if name in _REGISTRY:
        raise ValueError(f"policy {name!r} is already registered")
    _REGISTRY[name] = factory


def create(name: str) -> Policy:
    try:
        factory = _REGISTRY[name]
    except KeyError:
        from kv_cache_env.suggest import unknown_name

        raise ValueError(unknown_name("policy", name, available(), "policies")) from None
    return factory()


def available() -> list[str]:
    return list(_REGISTRY)


for _cls in (
    *HEURISTICS,
    *SESSION_RULES,
    MinWastePolicy,
    LearnedPolicy,
    BoundPolicy,
    ExpertPolicy,
    LookaheadPolicy,
    *SINGLE_ACTION,
    *GRID_RULES,
):
    register(_cls.name, _cls)
for _make in BASE_HEURISTICS:  # lookahead's own variants (e.g. priority@0.8), for checks
    if _make().name not in _REGISTRY:
        register(_make().name, _make)

REFERENCE = BoundPolicy.name
"""The leaderboard's reference (normalized scores run from noop to it)."""
NOT_IN_POOL = frozenset({"random", "bound", "lookahead", "expert"})


def bound_pool() -> list[Callable[[], Policy]]:
    """The bound's pool: every registered observation policy except `random` (a pool member must
    be a rule, not noise) — the seed-004 orders, the session rules, the single-action
    strategies, the rule the grid found (`purge-when-full`) and lookahead's variants."""
    return [make for name, make in _REGISTRY.items() if name not in NOT_IN_POOL]


BUILTIN: tuple[str, ...] = tuple(
    c.name for c in (*HEURISTICS, *SESSION_RULES, MinWastePolicy, LearnedPolicy, BoundPolicy)
)
"""The policies `kvarena eval` runs by default (the single-action strategies are for checks)."""

__all__ = [
    "BASE_HEURISTICS",
    "BUILTIN",
    "REFERENCE",
    "OrderedEvictionPolicy",
    "Policy",
    "SimulatorPolicy",
    "available",
    "blocks_to_free",
    "bound_pool",
    "create",
    "decide",
    "register",
]
