"""The built-in serving policies behind one registry: `register`, `create(name, weights)`,
`available()` (`registry`: the names and their factories; this package fills it).

Every policy here is a pure function of what it is given: an `Observation` (the rules in
`heuristics` and `session_rules`, the `learned` linear scorer, the `rule_grid` that `validate`
holds the suite against), or, for the planners, a copy of the simulator (`lookahead`; the
clairvoyant `bound`; the honest `expert`, which plays sampled futures from `worlds`). No I/O:
the episode runner and the results live in `evals.serving`. The planners search by the rubric's
reward (`Policy.optimises`): `create` builds them with the run's weights, the others ignore them."""

from __future__ import annotations

from .base import OrderedEvictionPolicy, Policy, SimulatorPolicy, blocks_to_free, decide
from .bound import BoundPolicy
from .expert import ExpertPolicy
from .heuristics import GRID_RULES, HEURISTICS, SESSION_RULES, SINGLE_ACTION
from .learned import LearnedPolicy
from .lookahead import BASE_HEURISTICS, LookaheadPolicy
from .regime_rule import RegimeRulePolicy
from .registry import (
    NOT_IN_POOL,
    available,
    bound_pool,
    create,
    optimises,
    register,
    registered,
)
from .session_rules import MinWastePolicy

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
    if _make().name not in registered():
        register(_make().name, _make)

REFERENCE = BoundPolicy.name
"""The leaderboard's reference (normalized scores run from noop to it)."""
ANCHORS: tuple[str, ...] = ("vllm-default", RegimeRulePolicy.name)
"""The leaderboard's anchor rows, each agent compared with them on paired seeds: "does it beat
what vLLM does?" and "does it beat the best fixed rule for the regime?"."""
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
    "NOT_IN_POOL",
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
    "registered",
]
