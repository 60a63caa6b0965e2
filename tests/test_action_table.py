"""One action table: the simulator, the Gymnasium mask, the valid-call set and the rule grid all
ask the table's rule, so they agree on every (tool, sequence) of every reachable state; and a
tool registered in the table alone reaches the tool schemas, the valid calls, the prompt and the
Gymnasium spaces."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kv_cache_env.llm.prompt import system_prompt
from kv_cache_env.llm.tools import call_tool, tool_schemas
from kv_cache_env.llm.valid_calls import valid_targets
from kv_cache_env.policies.rule_grid import OneLiner, grid_tools
from kv_cache_env.rl.gym import ServingEnv, ServingTurnsEnv, action_mask, turns_action_mask
from kv_cache_env.sim import (
    ACTIONS,
    SUITE,
    Action,
    ActionResult,
    AgentTool,
    Observation,
    Simulator,
    get_scenario,
    parse,
    render,
)
from kv_cache_env.sim.record import RECORD_FIELDS
from rubrics.metrics import METRIC_NAMES

SLOTS = 128


def _disagreements(sim: Simulator) -> tuple[list[tuple[str, str, bool, bool, bool]], int]:
    """(tool, seq, accepted by apply, in the mask, in the valid calls) wherever the three differ,
    and how many loading-back entries were checked. The mask and the valid calls are read from
    the observation and from its text alike."""
    obs = sim.observe(hints=False)
    text_obs = parse(render(obs))
    mask = action_mask(obs)
    assert (action_mask(text_obs) == mask).all()
    assert (turns_action_mask(obs)[:, 1:].T.ravel() == mask[1:]).all()
    targets = valid_targets(obs)
    assert valid_targets(text_obs) == targets
    bad = []
    loading = 0
    for slot, entry in enumerate(obs.entries[:SLOTS]):
        loading += bool(entry.moving and not entry.swapped)
        for index, tool in enumerate(ACTIONS.targeted):
            accepted = sim.clone().apply(Action(tool.name, entry.seq_id)).ok
            masked = bool(mask[1 + index * SLOTS + slot])
            listed = entry.seq_id in targets[tool.name]
            if not accepted == masked == listed:
                bad.append((tool.name, entry.seq_id, accepted, masked, listed))
    return bad, loading


def _random_valid_calls(sim: Simulator, rng: np.random.Generator) -> None:
    """A few valid calls, offloads favoured (they make link backlogs and loading-back KV)."""
    draws = [t.name for t in ACTIONS.targeted for _ in range(1 + t.needs_cpu_room)]
    targets = valid_targets(sim.observe(hints=False))
    for _ in range(int(rng.integers(0, 4))):
        tool = draws[int(rng.integers(0, len(draws)))]
        if targets[tool]:
            sim.apply(Action(tool, str(rng.choice(targets[tool]))))
            targets = valid_targets(sim.observe(hints=False))


def test_the_mask_the_valid_calls_and_apply_agree_where_kv_is_loading_back():
    # agent-remote's slow host link, random offloads: sessions return while their KV is still
    # loading back, which the Gymnasium mask once let compress and swap act on
    checked_loading = 0
    for seed in range(6):
        sim = Simulator(get_scenario("agent-remote"), seed)
        rng = np.random.default_rng(seed)
        while not sim.done:
            bad, loading = _disagreements(sim)
            assert bad == [], (seed, sim.turn, bad[:3])
            checked_loading += loading
            _random_valid_calls(sim, rng)
            sim.step()
    assert checked_loading >= 10  # the state that drifted is really exercised


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=st.sampled_from(SUITE),
    seed=st.integers(0, 1_000_000),
    walk=st.integers(0, 2**32 - 1),
    every=st.integers(2, 4),
)
def test_the_mask_the_valid_calls_and_apply_agree_on_random_states(scenario, seed, walk, every):
    sim = Simulator(get_scenario(scenario), seed)
    rng = np.random.default_rng(walk)
    while not sim.done:
        if sim.turn % every == 0:
            bad, _ = _disagreements(sim)
            assert bad == [], (scenario, seed, sim.turn, bad[:3])
        _random_valid_calls(sim, rng)
        sim.step()


def test_every_built_in_tool_has_its_record_counter_and_metric():
    for tool in ACTIONS:
        assert tool.counter in RECORD_FIELDS and tool.counter in METRIC_NAMES
    assert [t.name for t in ACTIONS] == ["evict", "compress", "swap", "noop"]
    assert [t.name for t in ACTIONS.targeted] == ["evict", "compress", "swap"]


def test_a_tool_name_is_registered_once_and_must_be_an_identifier():
    with pytest.raises(ValueError, match="already registered"):
        ACTIONS.register(ACTIONS["evict"])
    with pytest.raises(ValueError, match="identifier"):
        ACTIONS.register(AgentTool("two words", "d", "g", carry_out=lambda e, s: _DONE))


_DONE = ActionResult(True, "done")


def _mark(engine, seq) -> ActionResult:  # a throwaway tool's effect: it changes nothing
    return ActionResult(True, f"mark {seq.seq_id}: marked")


@contextmanager
def _registered(tool: AgentTool) -> Iterator[AgentTool]:
    ACTIONS.register(tool)
    try:
        yield tool
    finally:
        ACTIONS.remove(tool.name)


def test_a_tool_registered_in_the_table_alone_reaches_every_reader():
    mark = AgentTool(
        "mark",
        description="Mark a sequence on the GPU (a throwaway tool of a test).",
        guide="mark it (nothing else happens).",
        carry_out=_mark,
        needs_cpu_room=True,  # valid where its private blocks fit in the free CPU blocks
    )
    with _registered(mark):
        sim = Simulator(get_scenario("chat-human"), 3)
        for _ in range(3):
            sim.step()
        obs: Observation = sim.observe(hints=False)
        assert obs.entries
        fits = [e.seq_id for e in obs.entries if not e.moving and e.private_blocks <= obs.cpu_room]
        # the valid calls and the masks
        assert valid_targets(obs)["mark"] == [e for e in fits if not obs.entry(e).swapped]
        mask = action_mask(obs)
        assert mask.shape == (1 + 4 * SLOTS,)
        row = 1 + 3 * SLOTS
        assert [bool(mask[row + i]) for i in range(len(obs.entries))] == [
            e.seq_id in valid_targets(obs)["mark"] for e in obs.entries
        ]
        assert turns_action_mask(obs).shape == (SLOTS, 5)
        # the tool schemas, the dispatcher and the prompt
        schemas = {t["function"]["name"]: t["function"] for t in tool_schemas()}
        assert schemas["mark"]["description"] == mark.description
        assert schemas["mark"]["parameters"]["required"] == ["seq_id"]
        target = valid_targets(obs)["mark"][0]
        outcome = call_tool(sim, "mark", f'{{"seq_id": "{target}"}}')
        assert outcome.ok and outcome.message == f"mark {target}: marked"
        assert "- mark(seq_id): mark it (nothing else happens)." in system_prompt(sim.scenario)
        # the Gymnasium spaces
        env = ServingEnv("chat-human", max_slots=8)
        assert env.action_space.n == 1 + 4 * 8
        assert env.observation_space["action_mask"].n == 1 + 4 * 8
        turns = ServingTurnsEnv("chat-human", max_slots=8)
        assert list(turns.action_space.nvec) == [5] * 8
        obs_t, _ = turns.reset(seed=0, options={"seed": 3})
        assert obs_t["action_mask"].shape == (8, 5)
        # the rule grid
        assert "mark" in grid_tools()
        assert OneLiner("mark").act(obs) == [Action("mark", t) for t in _room_order(obs)]
    assert "mark" not in ACTIONS and "mark" not in {t["function"]["name"] for t in tool_schemas()}


def _room_order(obs: Observation) -> list[str]:
    """What a one-liner of a tool that needs CPU room takes: GPU entries not in flight that fit,
    the free CPU blocks counted down, largest first."""
    room = obs.cpu_room
    out = []
    for e in obs.entries:
        if e.swapped or e.moving or e.private_blocks > room:
            continue
        room -= e.private_blocks
        out.append(e.seq_id)
    return out
