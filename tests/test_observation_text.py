"""The text observation carries everything: parse(render(obs)) == obs, and it stays small."""

import numpy as np
import pytest

from kv_cache_env.sim import Simulator, approx_tokens, get_scenario, make_action, parse, render


def _states(scenario: str, seed: int):
    sim = Simulator(get_scenario(scenario), seed)
    rng = np.random.default_rng(seed)
    while not sim.done:
        yield sim
        entries = sim.observe().entries
        for _ in range(int(rng.integers(0, 4))):
            kind = ("evict", "compress", "swap")[int(rng.integers(0, 3))]
            if entries:
                sim.apply(make_action(kind, entries[int(rng.integers(0, len(entries)))].seq_id))
        paused = [e for e in entries if e.paused and not e.swapped]
        if paused and rng.random() < 0.5:  # offload a paused session now and then
            sim.apply(make_action("swap", paused[int(rng.integers(0, len(paused)))].seq_id))
        sim.step()


@pytest.mark.parametrize("scenario", ["easy", "medium", "hard", "medium-128"])
@pytest.mark.parametrize("hints", [True, False])
def test_text_round_trips_exactly(scenario, hints):
    seen_swapped = seen_compressed = seen_paused = False
    for seed in range(3):
        for sim in _states(scenario, seed):
            obs = sim.observe(hints=hints)
            assert parse(render(obs)) == obs
            seen_swapped |= any(e.swapped for e in obs.entries)
            seen_compressed |= any(e.quantization != "fp16" for e in obs.entries)
            seen_paused |= any(e.pause is not None and e.paused_for > 0 for e in obs.entries)
    # the round trip covered those columns (offloaded paused sessions, precision, pauses)
    assert seen_swapped and seen_compressed and seen_paused


def test_entries_are_ranked_by_gpu_memory_cost():
    sim = Simulator(get_scenario("hard"), 3)
    costs = [e.gpu_cost for e in sim.observe().entries]
    assert costs == sorted(costs, reverse=True)


def test_hints_switch_off_the_candidates_line():
    sim = Simulator(get_scenario("hard"), 3)
    assert "candidates:" in render(sim.observe(hints=True))
    assert "candidates:" not in render(sim.observe(hints=False))


def test_observation_on_hard_stays_small():
    sizes = [approx_tokens(render(s.observe())) for seed in range(5) for s in _states("hard", seed)]
    assert max(sizes) < 1500


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no observation header"),
        ("hello\nworld", "no observation header"),
        (
            "turn 0/15 | scenario easy | block 16 | step 1s prefill 64/step | gpu 1/10 used 10.0% "
            "cached 0 free 9 | cpu 0/5 | link none | arrivals 0 in 5 steps | queue 0 oldest 0/5 "
            "head 0 demand 0 preempted 0\nseq type",
            "line 2 is not the table header",
        ),
    ],
)
def test_malformed_text_is_rejected_with_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_text_before_the_header_is_skipped():
    obs = Simulator(get_scenario("medium"), 2).observe()
    assert parse("step done: 40 tokens\n" + render(obs)) == obs


def test_bad_row_names_its_line_number():
    sim = Simulator(get_scenario("easy"), 1)
    lines = render(sim.observe()).splitlines()
    lines[2] = lines[2].replace("gpu", "moon")
    with pytest.raises(ValueError, match="line 3"):
        parse("\n".join(lines))
