"""The honest `expert` and its worlds: what the observation shows of each request is derived
from the renderer (`sim.hidden`), the worlds treat every field as that allows (`worlds.TREATMENT`),
and a world shows the episode's own text. That the expert acts alike on episodes whose texts
agree, and the bound does not, is `test_honesty.py`."""

from dataclasses import fields

import numpy as np
import pytest

from kv_cache_env.policies import BUILTIN, bound_pool, create, worlds
from kv_cache_env.policies.base import SimulatorPolicy
from kv_cache_env.policies.bound import MACROS
from kv_cache_env.policies.expert import POOL, ExpertPolicy
from kv_cache_env.policies.heuristics import NoopPolicy, OffloadOrDiscardPolicy
from kv_cache_env.policies.rule_grid import REGIME_WINNERS
from kv_cache_env.policies.session_rules import MinWastePolicy
from kv_cache_env.policies.worlds import sample_world
from kv_cache_env.sim import SUITE, FollowUp, Request, Simulator, Status, get_scenario, render
from kv_cache_env.sim.hidden import (
    FIRST_CALL,
    PLACES,
    ROLE_OF,
    ROLES,
    SITUATIONS,
    coverage,
    hidden_fields,
    read_fields,
    record_fields,
)
from kv_cache_env.sim.sequence import Sequence
from rubrics import DEFAULT_WEIGHTS, score


def test_every_status_has_a_role_and_every_field_a_name():
    assert set(ROLE_OF) == set(Status)
    names = record_fields()
    assert {f"Sequence.{f.name}" for f in fields(Sequence)} <= names
    assert {f"Request.{f.name}" for f in fields(Request) if f.name not in FIRST_CALL} <= names
    calls = {f.name for f in fields(FollowUp)} | set(FIRST_CALL)
    assert {f"Call.{f}@{p}" for f in calls for p in PLACES} <= names
    for role in ROLES:
        assert read_fields(role) | hidden_fields(role) == names
        assert not read_fields(role) & hidden_fields(role)


def test_the_renderer_is_traced_over_every_situation():
    assert coverage() >= SITUATIONS


def test_each_role_shows_what_its_text_prints():
    listed, queued = read_fields("listed"), read_fields("queued")
    # a row: its type, priority, speed, plan, what it waits on, its call's budget, its history
    for name in (
        "Request.block_type",
        "Request.priority",
        "Request.decode_rate",
        "Request.plan",
        "Call.pause@next",
        "Call.output_tokens@current",
        "Sequence.pauses_done",
        "Sequence.log_ratio_sum",
    ):
        assert name in listed, name
    # the waiting line: an id and a need (its prompt, its prefix, where its KV is)
    assert {"Request.seq_id", "Request.prefix_hashes", "Sequence.private_prompt"} <= queued
    assert "Sequence.wait_since" in queued  # the header's oldest wait
    for name in ("Request.block_type", "Request.priority", "Request.decode_rate", "Request.plan"):
        assert name in hidden_fields("queued"), name
    assert not any(n.startswith("Call.") for n in queued)
    assert read_fields("unlisted") == {"Sequence.status"}  # (a discarded session is skipped)
    assert read_fields("unarrived") == frozenset()
    for role in ROLES:  # nobody's pace, pause lengths or calls after the next show
        read = read_fields(role)
        assert "Request.pace" not in read
        assert not any("pause_steps" in n or n.endswith("@later") for n in read)


def test_every_field_is_treated_as_the_renderer_allows():
    assert worlds.problems() == []
    # the server state a world keeps of a row although the row does not show it: its clocks,
    # and the server's log of what its client saw (read by the serving metrics, not the reward)
    assert worlds.server_state("listed") == {
        f"Sequence.{f}"
        for f in (
            "wait_since",
            "not_before",
            "first_token_by",
            "token_step",
            "admitted_order",
            "preemptions",
            "first_token_wait",
            "resumed_waits",
            "stalls",
            "lost_tokens",
        )
    }


def test_a_treatment_the_renderer_does_not_allow_is_refused(monkeypatch):
    table = {role: dict(t) for role, t in worlds.TREATMENT.items()}
    table["queued"]["Request.decode_rate"] = "shown"  # the waiting line does not print it
    table["listed"]["Request.block_type"] = "redrawn"  # a row prints it
    table["unlisted"]["Request.pace"] = "server"  # a request's own draw
    del table["listed"]["Sequence.token_step"]
    monkeypatch.setattr(worlds, "TREATMENT", table)
    found = worlds.problems()
    assert found == [
        "listed: Sequence.token_step is not classified",
        "listed: Request.block_type is read by the renderer, but redrawn freely",
        "queued: Request.decode_rate is kept as shown, but the renderer never reads it",
        "unlisted: Request.pace is a request's own draw, not server state",
    ]
    worlds._checked.cache_clear()
    try:
        with pytest.raises(AssertionError, match="disagrees with the renderer"):
            sample_world(Simulator(get_scenario("easy"), 0), np.random.default_rng(0))
    finally:
        monkeypatch.undo()
        worlds._checked.cache_clear()
    # a field the records gain is unclassified until the worlds say what they do with it
    monkeypatch.setattr(worlds, "record_fields", lambda: record_fields() | {"Sequence.new"})
    assert worlds.problems() == [f"{r}: Sequence.new is not classified" for r in ROLES]


def test_the_expert_is_registered_but_not_run_by_default_nor_in_the_bounds_pool():
    assert create("expert").name == "expert"
    assert "expert" not in BUILTIN
    assert "expert" not in {make().name for make in bound_pool()}


def test_the_experts_pool_holds_rules_that_read_the_observation_alone():
    # its grid rules are the grid's own two-liners over rendered fields; no member keeps state
    # or reads the simulator (a pool member that did would carry the truth into its play-outs)
    from kv_cache_env.policies.rule_grid import FIELDS, TwoLiner

    assert {f for pair in REGIME_WINNERS for _, f, _, _ in pair} <= FIELDS
    policies = [make() for make in POOL]
    assert sum(isinstance(p, TwoLiner) for p in policies) == len(REGIME_WINNERS)
    assert len({p.name for p in policies}) == len(policies)
    for policy in policies:
        assert not isinstance(policy, SimulatorPolicy) and not policy.keeps_state, policy.name
    sim = Simulator(get_scenario("agent-tools"), 3)
    for _ in range(4):
        sim.step()
    obs = sim.observe(hints=False)
    for policy in policies:
        assert policy.act(obs) == policy.act(obs)


def _played(scenario: str, seed: int, turns: int) -> Simulator:
    """An episode `turns` turns in, played by a rule that offloads and discards sessions."""
    sim = Simulator(get_scenario(scenario), seed)
    policy = create("offload-or-discard")
    for _ in range(turns):
        sim.play_turn(policy.act(sim.observe(hints=False)))
    return sim


@pytest.mark.parametrize("scenario", SUITE)
def test_a_world_shows_the_same_observation_as_the_episode(scenario):
    for seed, turns in ((11, 0), (12, 4), (13, 9)):
        sim = _played(scenario, seed, turns)
        text = render(sim.observe(hints=False))
        for k in range(2):
            world = sample_world(sim, np.random.default_rng(k))
            assert render(world.observe(hints=False)) == text
            world.check_invariants()
            while not world.done:  # and plays on to a scored end
                world.step()
            assert np.isfinite(score(world.record(), DEFAULT_WEIGHTS).reward)


def test_a_world_redraws_what_a_request_does_not_show_in_its_role():
    sim = _played("hard", 21, 6)
    engine = sim.engine
    roles = {s.seq_id: ROLE_OF[s.status] for s in engine.sequences.values()}
    assert {"listed", "queued", "unlisted"} <= set(roles.values())
    drawn = [sample_world(sim, np.random.default_rng(k)).engine.sequences for k in range(8)]
    for role in ("listed", "queued", "unlisted"):
        ids = [i for i, r in roles.items() if r == role]
        for field in ("block_type", "priority", "decode_rate", "pace"):
            true = [getattr(engine.sequences[i].request, field) for i in ids]
            seen = [[getattr(w[i].request, field) for i in ids] for w in drawn]
            if role == "listed" and field != "pace":  # a row shows it
                assert all(s == true for s in seen), (role, field)
            else:
                assert any(s != true for s in seen), (role, field)
                assert len({tuple(s) for s in seen}) > 1, (role, field)


def _small_expert() -> ExpertPolicy:
    return ExpertPolicy(
        worlds=2, pool=(NoopPolicy, OffloadOrDiscardPolicy, MinWastePolicy), macros=MACROS[:6]
    )


def test_the_expert_is_deterministic():
    def episode():
        sim = Simulator(get_scenario("chat-human"), 5)
        sim_steps = 4
        policy = _small_expert()
        policy.reset(5)
        for _ in range(sim_steps):
            for action in policy.act_in(sim):
                sim.apply(action)
            sim.step()
        return sim.record()

    assert episode() == episode()
