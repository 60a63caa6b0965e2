"""The built-in serving policies behind one registry: `register`, `create(name, weights)`,
`available()`.

Every policy here is a pure function of what it is given: an `Observation` (the rules in
`heuristics` and `session_rules`, the `learned` linear scorer, the `rule_grid` that `validate`
holds the suite against), or, for the planners, a copy of the simulator (`lookahead`; the
clairvoyant `bound`; the honest `expert`, which plays sampled futures from `worlds`). No I/O:
the episode runner and the results live in `evals.serving`. The planners search by the rubric's
reward (`Policy.optimises`): `create` builds them with the run's weights, the others ignore them."""

from __future__ import annotations

from collections.abc import Callable

from rubrics import DEFAULT_WEIGHTS, Weights

from .base import OrderedEvictionPolicy, Policy, SimulatorPolicy, blocks_to_free, decide
from .bound import BoundPolicy
from .expert import ExpertPolicy
from .heuristics import GRID_RULES, HEURISTICS, SESSION_RULES, SINGLE_ACTION
from .learned import LearnedPolicy
from .lookahead import BASE_HEURISTICS, LookaheadPolicy
from .regime_rule import RegimeRulePolicy
from .session_rules import MinWastePolicy

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


for _cls in (
    *HEURISTICS,
    *SESSION_RULES,
    MinWastePolicy,
    RegimeRulePolicy,
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
ANCHORS: tuple[str, ...] = ("vllm-default", RegimeRulePolicy.name)
"""The leaderboard's anchor rows, each agent compared with them on paired seeds: "does it beat
what vLLM does?" and "does it beat the best fixed rule for the regime?"."""
NOT_IN_POOL = frozenset({"random", "bound", "lookahead", "expert"})


def bound_pool() -> list[Callable[[], Policy]]:
    """The bound's pool: every registered observation policy except `random` (a pool member must
    be a rule, not noise) — the seed-004 orders, the session rules, the single-action
    strategies, the rule the grid found (`purge-when-full`) and lookahead's variants."""
    return [make for name, make in _REGISTRY.items() if name not in NOT_IN_POOL]


_DEFAULT_SET = (
    *HEURISTICS,
    *SESSION_RULES,
    MinWastePolicy,
    RegimeRulePolicy,
    LearnedPolicy,
    BoundPolicy,
)
BUILTIN: tuple[str, ...] = tuple(c.name for c in _DEFAULT_SET)
"""The policies `kvarena eval` runs by default (the single-action strategies are for checks)."""

__all__ = [
    "ANCHORS",
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
    "optimises",
    "register",
]
