"""The rule grid validate holds the suite against: built from every rendered field, one-liners
and two-liners that act as their names say."""

import re

import numpy as np

from kv_cache_env.policies.rule_grid import (
    FIELDS,
    NOT_CONDITIONS,
    Condition,
    OneLiner,
    TwoLiner,
    conditions,
    field_values,
    one_liners,
    quoted_rules,
    two_liners,
)
from kv_cache_env.sim import Simulator, get_scenario
from kv_cache_env.sim.text import _HEADER, TABLE_HEADER, render

# the header's named groups and the grid field each one is
HEADER_FIELDS = {
    "turn": "turn",
    "turns": "turns",
    "block_size": "block",
    "step_seconds": "step",
    "prefill": "prefill",
    "used": "gpu used",
    "capacity": "capacity",
    "cached": "cached",
    "cpu_used": "cpu used",
    "cpu_capacity": "cpu capacity",
    "link": "link",
    "backlog": "backlog",
    "arrivals": "arrivals",
    "waiting": "queue",
    "oldest": "oldest",
    "max_wait": "max wait",
    "head": "head",
    "demand": "demand",
    "preempted": "preempted",
}


def test_every_rendered_field_is_a_condition_of_the_grid_or_says_why_not():
    named = set(_HEADER.groupindex) - {"scenario"}
    assert named == set(HEADER_FIELDS), "a new header field needs a rule"
    assert "scenario" in NOT_CONDITIONS  # a name, not a condition
    assert set(HEADER_FIELDS.values()) <= FIELDS
    assert {"usage", "free"} <= FIELDS  # the header's unnamed numbers (usage %, free)
    columns = set(TABLE_HEADER.split())
    assert columns - FIELDS == {"seq"} and "seq" in NOT_CONDITIONS
    # the other lines of the text
    sim = Simulator(get_scenario("chat-human"), 3)
    for _ in range(6):
        sim.step()
    lines = {line.split(":")[0] for line in render(sim.observe()).splitlines()[2:] if ":" in line}
    assert lines <= set(NOT_CONDITIONS)


def _observations(n=2):
    out = []
    for scenario in ("agent-tools", "chat-human"):
        for seed in range(n):
            sim = Simulator(get_scenario(scenario), 900_000 + seed)
            while not sim.done:
                out.append(sim.observe(hints=False))
                sim.step()
    return out


def test_conditions_sit_at_the_quartiles_both_ways_and_every_category():
    values = field_values(_observations())
    grid = conditions(values)
    tokens = [c for c in grid if c.field == "tokens"]
    quartiles = {round(float(q), 2) for q in np.percentile(values["tokens"], (25, 50, 75))}
    assert {c.value for c in tokens} == quartiles
    assert {c.op for c in tokens} == {">=", "<="}
    assert {c.value for c in grid if c.field == "pause"} >= {"-", "human", "tts", "search"}
    rules = one_liners(grid)
    assert len(rules) == 3 * (len(grid) + 1)
    assert len({r.name for r in rules}) == len(rules)


def test_a_one_liner_acts_on_what_its_condition_selects_and_a_tool_can_take():
    obs = _observations(1)[20]
    paused = OneLiner("evict", Condition("pause", "=", "-")).act(obs)
    assert {a.seq_id for a in paused} == {e.seq_id for e in obs.entries if not e.paused and e.frees}
    room = obs.cpu_capacity - obs.cpu_used
    swaps = OneLiner("swap").act(obs)
    sizes = {e.seq_id: e.private_blocks for e in obs.entries}
    assert sum(sizes[a.seq_id] for a in swaps) <= room
    gated = OneLiner("compress", Condition("usage", ">=", 2.0)).act(obs)
    assert gated == []  # usage never reaches 2: the gate is shut


def test_a_two_liner_leaves_what_its_first_line_took():
    obs = _observations(1)[20]
    first = OneLiner("swap", Condition("phase", "=", "idle"))
    rule = TwoLiner(first, OneLiner("compress"))
    actions = rule.act(obs)
    swapped = {a.seq_id for a in actions if a.kind == "swap"}
    assert swapped == {a.seq_id for a in first.act(obs)}
    assert not swapped & {a.seq_id for a in actions if a.kind == "compress"}
    assert re.match(r"swap where phase = idle; then compress all", rule.name)
    pairs = two_liners({"evict": [OneLiner("evict")], "swap": [first], "compress": []})
    assert [p.name for p in pairs] == [
        "evict all; then swap where phase = idle",
        "swap where phase = idle; then evict all",
    ]
    assert len(quoted_rules()) == 2


def test_purge_when_full_is_the_grids_two_liner_and_in_the_bounds_pool():
    # the registered rule acts exactly as the grid rule it was taken from, on every turn of
    # episodes that cross its 95% gate (agent-tools' small GPUs), played under that rule
    from kv_cache_env.policies import bound_pool, create
    from kv_cache_env.policies.expert import POOL

    grid = TwoLiner(
        OneLiner("evict", Condition("usage", ">=", 0.95)),
        OneLiner("compress", Condition("eviction_score", "<=", 0.39)),
    )
    rule = create("purge-when-full")
    gated = 0
    for seed in range(3):
        sim = Simulator(get_scenario("agent-tools"), seed)
        while not sim.done:
            obs = sim.observe(hints=False)
            actions = rule.act(obs)
            assert actions == grid.act(obs)
            gated += obs.usage >= 0.95 and any(a.kind == "evict" for a in actions)
            for action in actions:
                sim.apply(action)
            sim.step()
    assert gated  # the purge happened
    assert "purge-when-full" in {make().name for make in bound_pool()}
    assert "purge-when-full" in {make().name for make in POOL}
