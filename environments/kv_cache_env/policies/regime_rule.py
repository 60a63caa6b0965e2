"""`regime-rule`: the best fixed rule for the regime, as an anchor row for the leaderboard.

In each scenario it plays the fixed rule that scored best there on tuning seeds, and elsewhere
(trace replays, scenarios of one's own) the rule best on average over the suite. It knows the
regime only from what every agent is shown: the scenario's name in each observation's header
(`Observation.scenario`). So it answers "does an agent beat the best fixed rule *for this
regime*?", next to `vllm-default`'s "does it beat vLLM?".

The rules it chooses among (`candidates()`) are the fixed rules the project knows: every
registered observation policy that is a rule (not the planners, `random`, or the trained
`learned`) and the rule grid's regime winners the `expert` plays (`rule_grid.REGIME_WINNERS`). Which
one it plays where is data (`regime_rules.json`, beside this module), written by
`scripts/regime_rules.py` from episodes on tuning seeds (900000+, never the proof block); the
file records the seeds and each candidate's mean reward per scenario, and a rule it names that
no longer exists fails loudly.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from kv_cache_env.bounded_read import SMALL_JSON_LIMITS, read_json
from kv_cache_env.sim import Action, Observation

from .base import Policy
from .registry import registered
from .rule_grid import REGIME_WINNERS, grid_rule

PICKS_FILE = Path(__file__).with_name("regime_rules.json")
NOT_RULES = frozenset({"random", "learned", "bound", "expert", "lookahead", "regime-rule"})
"""Registered policies that are not fixed rules: noise, a trained scorer, the planners, itself."""


def candidates() -> dict[str, Callable[[], Policy]]:
    """Every fixed rule it may play, by name (module doc)."""
    rules = {name: make for name, make in registered().items() if name not in NOT_RULES}
    for first, second in REGIME_WINNERS:
        make = grid_rule(first, second)
        rules.setdefault(make().name, make)
    return rules


@cache
def picks() -> tuple[dict[str, str], str]:
    """(scenario -> rule name, the rule for any other scenario), from `PICKS_FILE`."""
    data: dict[str, Any] = read_json(PICKS_FILE, SMALL_JSON_LIMITS)
    known = candidates()
    chosen = dict(data["picks"])
    fallback = str(data["fallback"])
    unknown = sorted({*chosen.values(), fallback} - set(known))
    if unknown:
        raise ValueError(
            f"{PICKS_FILE.name} names rules that no longer exist ({', '.join(unknown)}): "
            "rerun scripts/regime_rules.py"
        )
    stateful = sorted(n for n in {*chosen.values(), fallback} if known[n]().keeps_state)
    if stateful:  # it claims to be stateless: the bound reuses its play-outs
        raise ValueError(f"{PICKS_FILE.name} names rules that keep state: {', '.join(stateful)}")
    return chosen, fallback


def rule_for(scenario: str) -> str:
    """The name of the rule played in `scenario`."""
    chosen, fallback = picks()
    return chosen.get(scenario, fallback)


class RegimeRulePolicy(Policy):
    """The fixed rule chosen for the observation's scenario (module doc)."""

    name = "regime-rule"

    def __init__(self) -> None:
        self._rules: dict[str, Policy] = {}

    def act(self, obs: Observation) -> list[Action]:
        rule = self._rules.get(obs.scenario)
        if rule is None:
            rule = self._rules[obs.scenario] = candidates()[rule_for(obs.scenario)]()
        return rule.act(obs)


__all__ = ["NOT_RULES", "PICKS_FILE", "RegimeRulePolicy", "candidates", "picks", "rule_for"]
