"""`kvarena validate` (serving suite v4) at CI size, and the pieces its checks rest on.

At CI size (3 proof seeds, the expert on one, a 24-rule grid screened on one tuning seed) the
benchmark-quality checks are too noisy to gate on: their figures are asserted to be computed and
printed; the mechanical checks (episodes run, determinism, no registered policy above the bound,
tool effects) must pass. The docs report the quality checks at full size.
"""

from __future__ import annotations

import math

import pytest

from evals.common.edge import InputError
from evals.serving import reference_table
from evals.serving.normalize import normalized_scores
from evals.serving.validate import (
    BLIND,
    CEILING,
    LABELS,
    NAMED,
    REFERENCE_TABLE_CHECK,
    RULES_BELOW_BOUND,
    SCORED,
    Sizes,
    Table,
    blind_check,
    ceiling_check,
    rule_solvable,
    rules_below_bound_check,
    run_validation,
    term_split,
    tool_effect_checks,
)
from evals.serving.validate_jobs import Job, run_jobs
from evals.serving.validate_results import EpisodeResult, Results
from evals.serving.validate_store import JobStore
from kv_cache_env.sim import SUITE

# scripts/test spreads the suite over xdist workers; one worker takes this whole module, so the
# module's `checks` (validate at CI size, ~2.5 min) is built once.
pytestmark = pytest.mark.xdist_group("validate-ci")


@pytest.fixture(scope="module")
def checks():
    return {c.name: c for c in run_validation(Sizes.ci(), workers=2)}


def test_validate_runs_every_check_at_ci_size(checks):
    assert "episodes run" not in checks  # no episode failed
    must_pass = [
        "determinism (reruns give byte-identical results)",
        "no registered policy beats the bound on the mean",
        *(name for name in checks if name.startswith("tool effect:")),
    ]
    for name in must_pass:
        assert checks[name].passed, f"{name}: {checks[name].detail}"
    # the shipped reference table: when current, every record computed here equals it (drift
    # fails); when stale (made by other code) validate fails it and says how to regenerate it,
    # which the test suite reports without failing (a stale table is never used)
    table, table_check = reference_table.shipped(), checks[REFERENCE_TABLE_CHECK]
    if table is not None and table.current:
        assert table_check.passed, table_check.detail
    else:
        assert not table_check.passed and reference_table.REGENERATE in table_check.detail
    reported = [
        "every scenario has a range (bound - noop >= 0.10, paired CI's lower end >= 0.05)",
        "the winning fixed rule differs across scenarios (>= 3 winners)",
        LABELS,
        "a last-turn dump on the bound's trajectory gains <= 0 on average",
        "reported: vllm-default, the classic orders, learned, min-waste",
        "the grid's screen (tuning seeds)",
        RULES_BELOW_BOUND,  # the grid's rules against the bound: reported at CI size
    ]
    for name in reported:
        assert name in checks and checks[name].detail
    named = {
        "ceiling": CEILING,
        "blind": BLIND,
        "single": "reported: the best single fixed rule's average",
        "rules": "reported: the best fixed rule of at most two lines",
        "stretch": "stretch (reported)",
        "ablation": "each tool matters",
    }
    found = {k: next(c for n, c in checks.items() if n.startswith(v)) for k, v in named.items()}
    assert all(
        f"without {tool}" in found["ablation"].detail for tool in ("evict", "compress", "swap")
    )
    assert all(sc in found["ceiling"].detail for sc in SCORED)
    assert all(sc in found["blind"].detail for sc in NAMED)
    assert all(
        sc in found["stretch"].detail and "told pauses" in found["stretch"].detail for sc in SCORED
    )
    timing = checks["CPU seconds per episode (reported; medians)"].detail
    assert all(scenario in timing for scenario in SUITE) and "play-outs" in timing


def test_tool_effects_hold_on_running_and_paused_sequences():
    results = tool_effect_checks(range(3))
    assert [c.name for c in results] == [
        "tool effect: compress",
        "tool effect: swap running",
        "tool effect: swap paused",
        "tool effect: evict paused",
        "tool effect: evict shared prefix",
    ]
    assert all(c.passed for c in results), [c.detail for c in results]


def test_the_range_and_the_per_term_split_are_shares_of_it():
    t = Table("x", noop=0.1, bound=0.5, range_half=0.01, normalized={})
    assert math.isclose(t.range, 0.4)
    parts = {"failure_penalty": -0.2, "throughput_reward": 0.8}

    def result(agent: str, failure: float, throughput: float) -> EpisodeResult:
        components = dict.fromkeys(
            ("headroom_bonus", "memory_efficiency", "eviction_quality", "latency_penalty"), 0.0
        )
        components |= {"risky_eviction_penalty": 0.0}
        components |= {"failure_penalty": failure, "throughput_reward": throughput}
        return EpisodeResult(agent, "x", 0, reward=0.0, components=components)

    results = Results()
    results.add(result("a", failure=0.0, throughput=0.9))
    results.add(result("b", parts["failure_penalty"], parts["throughput_reward"]))
    # a - b: failure +0.2 x 0.40 = +0.08, throughput +0.1 x 0.25 = +0.025; over a 0.4 range
    assert term_split(results, "x", "a", "b", [0], 0.4) == "failure +0.20, throughput +0.06"


def test_a_fixed_rule_above_the_bound_fails_the_ceiling_check():
    below = Table("x", noop=0.0, bound=1.0, range_half=0.0, normalized={"r": 1.0, "s": 0.4})
    above = Table("y", noop=0.0, bound=1.0, range_half=0.0, normalized={"r": 1.03, "s": 0.2})
    assert rules_below_bound_check({"x": below}, ["r", "s"]).passed
    check = rules_below_bound_check({"x": below, "y": above}, ["r", "s"])
    assert not check.passed and check.detail == "r on y (1.030)"


def test_normalized_scores_pair_seeds_and_need_a_range():
    def result(agent: str, seed: int, reward: float) -> dict:
        return {"scenario": "s", "agent": agent, "seed": seed, "status": "ok", "reward": reward}

    results = [
        result("noop", 0, 0.0),
        result("noop", 1, 0.2),
        result("bound", 0, 0.4),
        result("bound", 1, 0.6),
        result("lru", 0, 0.2),
        result("lru", 1, 0.5),
        result("lru", 2, 0.9),  # no noop or bound on seed 2: not paired, left out
    ]
    figures = normalized_scores(results)
    lru = figures["s", "lru"]
    assert lru.seeds == 2
    assert lru.score is not None and math.isclose(lru.score, (0.35 - 0.1) / (0.5 - 0.1))
    assert lru.to_bound is not None and math.isclose(lru.to_bound[0], 0.15)
    flat = normalized_scores(
        [result("noop", 0, 0.3), result("bound", 0, 0.32), result("x", 0, 0.31)]
    )
    assert flat["s", "x"].score is None  # a 0.02 range means nothing


NOT_PINNED = {"CPU seconds per episode (reported; medians)", REFERENCE_TABLE_CHECK}
"""Checks whose text depends on the machine (CPU time) or on whether the shipped reference
table is current for the code (it goes stale with any code change, and is tested above)."""


def test_validate_matches_the_golden_run(checks):
    """Every check's verdict and text at CI size, byte for byte (the layout refactor must keep
    them; regenerate with `KVARENA_UPDATE_GOLDEN=1` when a change is meant to alter them)."""
    import json
    import os
    from pathlib import Path

    golden = Path(__file__).parent / "golden" / "validate-ci.json"
    produced = json.dumps(
        [[n, c.passed, c.detail] for n, c in checks.items() if n not in NOT_PINNED], indent=0
    ).encode()
    if os.environ.get("KVARENA_UPDATE_GOLDEN") == "1":
        golden.write_bytes(produced)
    assert produced == golden.read_bytes(), (
        f"validate's checks differ from {golden} (if intended: KVARENA_UPDATE_GOLDEN=1, say why)"
    )


def _rewards(agent: str, scenario: str, rewards: list[float]) -> list[EpisodeResult]:
    return [EpisodeResult(agent, scenario, s, reward=r) for s, r in enumerate(rewards)]


def test_a_rule_fails_the_ceiling_only_when_it_is_surely_above_the_expert():
    seeds = range(4)
    scenarios = {sc: Table(sc, 0.0, 1.0, 0.0, {"expert": 0.5, "r": 0.5}) for sc in SCORED}

    def check(rule_rewards: list[float]) -> bool:
        results = Results()
        for sc in SCORED:
            for r in _rewards("expert", sc, [0.5, 0.5, 0.5, 0.5]):
                results.add(r)
            for r in _rewards("r", sc, rule_rewards if sc == "hard" else [0.5] * 4):
                results.add(r)
        return ceiling_check(results, scenarios, ["r"], seeds).passed

    assert check([0.5, 0.5, 0.5, 0.5])  # level
    assert check([0.51, 0.51, 0.51, 0.51])  # above, but by less than 0.02 of the range
    assert check([0.9, 0.1, 0.9, 0.1])  # +0.0 on average
    assert check([0.8, 0.4, 0.9, 0.4])  # +0.125 on average, but the CI reaches below 0
    assert not check([0.56, 0.55, 0.57, 0.56])  # +0.06, the CI above 0


def test_blind_rules_must_stay_at_half_the_range_on_the_named_regimes():
    tables = {sc: Table(sc, 0.0, 1.0, 0.0, {"all": 0.2, "gate": 0.5}) for sc in SCORED}
    assert blind_check(tables, ["all", "gate"]).passed
    tables["medium"].normalized["all"] = 0.95  # not a named regime
    assert blind_check(tables, ["all", "gate"]).passed
    tables["chat-human"].normalized["gate"] = 0.51
    check = blind_check(tables, ["all", "gate"])
    assert not check.passed and "chat-human 0.51 (gate)" in check.detail


def test_a_scenario_is_rule_solvable_when_its_best_fixed_rule_reaches_nine_tenths():
    tables = {sc: Table(sc, 0.0, 1.0, 0.0, {"a": 0.5, "regime-rule": 0.95}) for sc in SCORED}
    tables["hard"].normalized["a"] = 0.93
    assert rule_solvable(tables, ["a", "regime-rule"]) == {"hard": ("a", 0.93)}


JOBS = [Job("lru", "easy", 0), Job("noop", "easy", 0), Job("noop", "easy", 1)]


def test_a_stopped_validation_resumes_without_playing_its_finished_episodes(tmp_path, monkeypatch):
    from evals.serving import validate_jobs

    identity = {"sizes": {"episodes": 3}}
    store = JobStore(tmp_path, identity, resume=False)
    first = run_jobs(JOBS[:2], workers=1, store=store)
    store.close()
    with (tmp_path / "episodes.jsonl").open("a") as f:
        f.write('{"kind": "policy", "result": {"agent"')  # a line cut by a kill
    played = []
    real = validate_jobs.run_job
    monkeypatch.setattr(validate_jobs, "run_job", lambda job: played.append(job) or real(job))
    again = JobStore(tmp_path, identity, resume=True)
    assert again.skipped_lines == 1 and len(again.done) == 2
    resumed = run_jobs(JOBS, workers=1, store=again)
    again.close()
    assert played == [JOBS[2]]  # only the job the first run had not finished
    for result in first:
        assert resumed[result.key].fingerprint() == result.fingerprint()
    fresh = run_jobs(JOBS, workers=1)
    assert {r.key: r.fingerprint() for r in fresh} == {r.key: r.fingerprint() for r in resumed}


def test_a_validation_run_is_resumed_only_as_it_was_started(tmp_path):
    JobStore(tmp_path, {"sizes": {"episodes": 3}}, resume=False).close()
    with pytest.raises(InputError, match="already holds a validation run"):
        JobStore(tmp_path, {"sizes": {"episodes": 3}}, resume=False)
    with pytest.raises(InputError, match=r"cannot resume .*sizes"):
        JobStore(tmp_path, {"sizes": {"episodes": 4}}, resume=True)


def test_labels_are_shown_only_for_the_suite_version_they_were_measured_on(tmp_path):
    import json

    from evals.serving.labels import Label, shipped_labels, write_labels

    path = tmp_path / "labels.json"
    assert shipped_labels(path) is None  # not measured yet
    write_labels(path, {"hard": Label("swap-paused", 0.934)}, range(650_000, 650_100))
    assert shipped_labels(path) == {"hard": Label("swap-paused", 0.934)}
    data = json.loads(path.read_text())
    assert data["proof_seeds"] == [650_000, 650_099]
    path.write_text(json.dumps(data | {"suite_version": "3"}))
    assert shipped_labels(path) is None


def test_scenarios_and_the_report_show_the_labels_measured(tmp_path, monkeypatch):
    from evals.serving import labels

    monkeypatch.setattr(labels, "LABELS_PATH", tmp_path / "labels.json")
    assert labels.label_of("easy") == ("sanity tier", "")
    assert labels.label_of("hard") == ("", "")
    assert "not yet measured" in labels.labels_sentence(["easy", "hard"])
    labels.write_labels(labels.LABELS_PATH, {"hard": labels.Label("swap-paused", 0.95)}, range(9))
    assert labels.label_of("hard") == ("rule-solvable", "swap-paused")
    sentence = labels.labels_sentence(["easy", "hard", "medium"])
    assert "easy: the sanity tier" in sentence and "hard (swap-paused)" in sentence
