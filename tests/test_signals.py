"""The published signal table (`sim.catalogue`): what the observation shows of each session's
future, and that the generator draws the hidden values with exactly those forms."""

import math

import numpy as np
import pytest
from conftest import call, req, steps, tiny_sim

from kv_cache_env.sim import PauseKind, Simulator, get_scenario
from kv_cache_env.sim import catalogue as cat
from kv_cache_env.sim.workload import draw_sessions


def test_max_tokens_bounds_the_output_by_a_factor_of_two():
    for output in [1, 2, 64, 127, 128, 129, 255, 256, 257, 1000, 4096, 16384]:
        budget = cat.max_tokens(output)
        lo, hi = cat.output_bounds(budget)
        assert lo <= output <= hi and budget >= 2 * output
        assert budget == cat.MIN_MAX_TOKENS or budget // 4 < output


def test_a_sessions_history_and_plan_show_in_its_row():
    # two TTS pauses of 20 and 10 steps (median 17 s at 1 s a step): the row shows pace
    # exp(mean(log(20/17), log(10/17))) after both; a calculator pause is not informative
    follow = (
        call(20, kind=PauseKind.TTS),
        call(1, kind=PauseKind.CALCULATOR),
        call(10, kind=PauseKind.TTS),
        call(5, kind=PauseKind.TTS),
    )
    request = req("s", prompt=8, output=4, rate=4, followups=follow)
    sim = tiny_sim([request.__class__(**{**_fields(request), "plan": 5})], capacity=40, steps=60)
    seen = {}
    while not sim.done:
        entry = sim.observe().entry("s")
        if entry is not None and entry.paused:
            seen[entry.pause, entry.pauses] = (entry.pace, entry.left)
        steps(sim, 1)
    ratio = math.exp((math.log(20 / 17) + math.log(10 / 17)) / 2)
    assert seen[PauseKind.TTS, 0] == (1.0, 5)
    assert seen[PauseKind.CALCULATOR, 1] == (round(20 / 17, 2), 4)
    assert seen[PauseKind.TTS, 1] == (round(20 / 17, 2), 3)
    assert seen[PauseKind.TTS, 2] == (round(ratio, 2), 2)


def _fields(request):
    return {name: getattr(request, name) for name in request.__slots__}


def test_the_generator_draws_pauses_with_the_published_spreads():
    scenario = get_scenario("agent-tools")
    rng = np.random.default_rng(5)
    sessions = draw_sessions(scenario, [scenario.type_mix[0][0]] * 4000, rng)
    assert sessions
    paces, residuals, plans = [], [], []
    for draw in sessions.values():
        paces.append(math.log(draw.pace))
        plans.append((draw.plan, len(draw.followups)))
        for f in draw.followups:
            if cat.informative(f.pause, scenario.step_seconds) and f.pause_steps >= 5:
                residuals.append(cat.log_ratio(f.pause, f.pause_steps, 1.0) - math.log(draw.pace))
    assert np.std(paces) == pytest.approx(cat.PACE_SIGMA, rel=0.1)
    assert abs(np.mean(paces)) < 0.05
    assert np.std(residuals) == pytest.approx(cat.CALL_SIGMA, rel=0.15)
    lo, hi = scenario.followups
    assert all(lo <= n <= hi for _, n in plans)
    ratio = [math.log(p / n) for p, n in plans if n]
    assert np.std(ratio) < 0.45 and abs(np.mean(ratio)) < 0.1


def test_expected_remaining_uses_the_history_and_the_time_waited():
    base = cat.expected_remaining(PauseKind.HUMAN, 0, 0, 1.0, 1.0)
    assert base == pytest.approx(28.6 * math.exp((0.5**2 + 0.35**2) / 2), rel=1e-6)
    slow = cat.expected_remaining(PauseKind.HUMAN, 0, 3, 2.0, 1.0)
    fast = cat.expected_remaining(PauseKind.HUMAN, 0, 3, 0.5, 1.0)
    assert fast < base < slow
    assert cat.expected_remaining(PauseKind.CALCULATOR, 3, 0, 1.0, 1.0) == 1.0


def test_the_load_trend_counts_the_last_steps_arrivals():
    sim = Simulator(get_scenario("hard"), 4)
    t = sim.engine.t
    arrivals = sim.schedule.arrivals_by_step()
    assert sim.observe().arrivals == sum(len(arrivals[k]) for k in range(t - cat.TREND_STEPS, t))
