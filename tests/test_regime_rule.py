"""`regime-rule`: the tuned fixed rule per scenario, told the regime only by the observation."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evals.serving.runner import run_policy_episode
from kv_cache_env.policies import BUILTIN, create
from kv_cache_env.policies.regime_rule import PICKS_FILE, candidates, picks, rule_for
from kv_cache_env.sim import SUITE, Simulator, get_scenario, parse, render

ROOT = Path(__file__).resolve().parents[1]


def test_the_picks_cover_the_suite_with_known_stateless_rules():
    chosen, fallback = picks()
    assert set(chosen) == set(SUITE)
    known = candidates()
    for rule in {*chosen.values(), fallback}:
        assert rule in known and not known[rule]().keeps_state
    data = json.loads(PICKS_FILE.read_text())
    assert data["seeds"][0] >= 900_000, "picked on validate's tuning block, never its proof block"
    for scenario, rule in chosen.items():  # each pick is the best mean the file records
        assert data["means"][rule][scenario] == max(m[scenario] for m in data["means"].values())


def test_a_scenario_outside_the_suite_gets_the_fallback():
    _, fallback = picks()
    assert rule_for("trace:azure-conv-2023") == fallback
    assert rule_for("no-such-scenario") == fallback


@pytest.mark.parametrize("scenario", SUITE)
def test_it_plays_the_rule_picked_for_the_scenario(scenario):
    seed = 900_123
    ours = run_policy_episode(create("regime-rule"), get_scenario(scenario), seed)
    theirs = run_policy_episode(candidates()[rule_for(scenario)](), get_scenario(scenario), seed)
    assert ours.to_dict() == theirs.to_dict()


def test_it_reads_the_regime_from_the_text():
    """Behind a chat endpoint it sees only the rendered text: the same calls as in-process."""
    for scenario in ("medium", "agent-remote", "flash-crowd"):
        sim = Simulator(get_scenario(scenario), 4)
        policy, served = create("regime-rule"), create("regime-rule")
        for _ in range(6):
            obs = sim.observe(hints=False)
            calls = policy.act(obs)
            assert parse(render(obs)).scenario == scenario
            assert served.act(parse(render(obs))) == calls
            sim.play_turn(calls)


def test_it_is_an_anchor_of_the_default_run():
    assert "regime-rule" in BUILTIN and "vllm-default" in BUILTIN


def test_choose_takes_the_best_mean_and_the_best_scaled_average():
    path = ROOT / "scripts" / "regime_rules.py"
    spec = importlib.util.spec_from_file_location("regime_rules_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    means = {
        "a": {sc: 0.0 for sc in SUITE} | {"medium": 0.9},
        "b": {sc: 0.5 for sc in SUITE},
        "c": {sc: 0.1 for sc in SUITE},
    }
    chosen, fallback = module.choose(means)
    assert chosen["medium"] == "a" and chosen["hard"] == "b"
    assert fallback == "b"  # best on every scenario but one


def test_the_docs_name_each_pick():
    row = next(
        line
        for line in (ROOT / "docs" / "serving.md").read_text().splitlines()
        if line.startswith("| `regime-rule` |")
    )
    chosen, _ = picks()
    for scenario, rule in chosen.items():
        assert f"`{scenario}`" in row and f"`{rule}`" in row, (scenario, rule)
