"""The leaderboard's ranking: normalized scores on paired seeds, the suite mean over the
scenarios with a range, and bootstrap intervals of the score and the rank."""

from __future__ import annotations

import itertools
import re

import pytest

from evals.report.figures import FLOOR_GREY, PALETTE, agent_styles, series_style
from evals.report.ranking import rank_agents
from evals.report.svg import CHAR_W, WIDTH, Series, dot_chart, nice_ticks
from evals.report.tables import ranking_cells, ranking_headers


def result(agent: str, scenario: str, seed: int, reward: float) -> dict:
    return {"agent": agent, "scenario": scenario, "seed": seed, "status": "ok", "reward": reward}


def suite(offsets: dict[str, float], seeds: int = 20) -> list[dict]:
    """noop at 0 and the bound at 1 on two scenarios (plus seed noise), agents at offsets; a
    third scenario with no range (bound = noop + 0.01)."""
    out = []
    for scenario, shift in (("hard", 0.0), ("agent-tools", -0.5)):
        for seed in range(seeds):
            noise = 0.05 * ((seed * 7919) % 11 - 5) / 5
            out.append(result("noop", scenario, seed, shift + noise))
            out.append(result("bound", scenario, seed, shift + 1.0 + noise))
            for agent, offset in offsets.items():
                out.append(result(agent, scenario, seed, shift + offset + noise))
    for seed in range(seeds):
        out.append(result("noop", "easy", seed, 0.36))
        out.append(result("bound", "easy", seed, 0.37))
        out.append(result("good", "easy", seed, 0.365))
    return out


def test_scores_are_normalized_per_scenario_and_averaged_over_those_with_a_range():
    ranking = rank_agents(suite({"good": 0.8, "weak": 0.3}), ["easy", "hard", "agent-tools"])
    by = {r.agent: r for r in ranking.rows}
    assert ranking.normalized == ["hard", "agent-tools"]  # easy's range is under 0.05
    assert by["good"].score == pytest.approx(0.8)
    assert by["weak"].per_scenario["hard"] == pytest.approx(0.3)
    assert by["good"].per_scenario["easy"] is None
    assert by["bound"].score == pytest.approx(1.0) and by["noop"].score == pytest.approx(0.0)
    assert [r.agent for r in ranking.rows] == ["bound", "good", "weak", "noop"]
    assert [r.rank for r in ranking.rows] == [1, 2, 3, 4]
    # paired: the noise is shared by every agent on a seed, so the intervals are tight
    assert by["good"].ci == pytest.approx((0.8, 0.8), abs=1e-9)
    assert by["good"].rank_interval == (2, 2)


def test_close_agents_get_overlapping_rank_intervals():
    results = suite({"a": 0.5, "b": 0.5})
    # unpaired noise between a and b: their order is a coin flip over seeds
    for r in results:
        if r["agent"] in ("a", "b") and r["scenario"] != "easy":
            r["reward"] += (
                0.2 * (((r["seed"] * 31 + len(r["agent"] * 3) + ord(r["agent"])) % 7) - 3) / 3
            )
    ranking = rank_agents(results, ["hard", "agent-tools"])
    by = {r.agent: r for r in ranking.rows}
    assert by["a"].rank_interval[0] <= 3 and by["a"].rank_interval[1] >= 2
    assert by["b"].rank_interval[0] <= 3 and by["b"].rank_interval[1] >= 2
    low, high = by["a"].ci
    assert low < by["a"].score < high


def test_without_noop_and_the_bound_nothing_is_ranked_but_rows_remain():
    results = [result("lru", "hard", s, 0.3) for s in range(3)]
    ranking = rank_agents(results, ["hard"])
    assert [(r.agent, r.rank, r.score) for r in ranking.rows] == [("lru", None, None)]
    assert ranking.normalized == []
    # ... unless the shipped reference supplies them
    reference = [result("noop", "hard", s, 0.0) for s in range(3)]
    reference += [result("bound", "hard", s, 1.0) for s in range(3)]
    ranked = rank_agents(results, ["hard"], reference)
    assert [(r.agent, r.rank) for r in ranked.rows] == [("lru", 1)]
    assert ranked.rows[0].score == pytest.approx(0.3)


def test_the_palette_gives_noop_and_lru_distinct_hues():
    styles = agent_styles(["noop", "lru", "fifo", "bound", *[f"p{i}" for i in range(10)]])
    assert styles["noop"][0] != styles["lru"][0] != styles["fifo"][0]
    assert styles["bound"] == ("#000000", "")
    assert len(set(styles.values())) == len(styles)  # colour and dash tell every agent apart


def test_ticks_cover_the_range_with_round_steps():
    ticks = nice_ticks(-0.23, 0.41)
    assert ticks[0] <= -0.23 and ticks[-1] >= 0.41
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1 and steps.pop() in (0.1, 0.2, 0.25)


def test_every_agent_is_compared_with_the_anchors_on_paired_draws():
    from evals.report.tables import beats, ranking_cells, ranking_headers
    from kv_cache_env.policies import ANCHORS

    offsets = {"good": 0.8, "vllm-default": 0.3, "regime-rule": 0.8, "weak": 0.2}
    ranking = rank_agents(suite(offsets), ["hard", "agent-tools"], anchors=ANCHORS)
    by = {r.agent: r for r in ranking.rows}
    assert ranking.anchors == ["vllm-default", "regime-rule"]
    diff, low, high = by["good"].versus["vllm-default"]
    assert diff == pytest.approx(0.5) and low == pytest.approx(0.5) and high == pytest.approx(0.5)
    assert beats(by["good"].versus["vllm-default"])[0].startswith("yes +0.500")
    assert beats(by["good"].versus["regime-rule"])[0].startswith("tie +0.000")
    assert beats(by["weak"].versus["regime-rule"])[0].startswith("no -0.600")
    assert "regime-rule" not in by["regime-rule"].versus  # not against itself
    headers = ranking_headers(ranking)
    assert headers[4:6] == ["beats vllm-default", "beats regime-rule"]
    cells = dict(zip(headers, ranking_cells(by["regime-rule"], ranking), strict=True))
    assert cells["agent"][0] == "regime-rule (anchor)" and cells["beats regime-rule"][0] == "–"
    without = rank_agents(suite({"good": 0.8}), ["hard"], anchors=ANCHORS)
    assert without.anchors == [] and "beats" not in " ".join(ranking_headers(without))


def test_the_terminal_ranking_keeps_whole_cells_beside_the_anchors():
    from io import StringIO

    from rich.console import Console

    from evals.report.terminal import ranking_table
    from kv_cache_env.policies import ANCHORS

    offsets = {"a-long-agent-name+with-parts": 0.8, "vllm-default": 0.3, "regime-rule": 0.7}
    ranking = rank_agents(suite(offsets), ["hard", "agent-tools"], anchors=ANCHORS)
    for width in (80, 100, 120, 200):
        buffer = StringIO()
        ranking_table(ranking, "ranking", width=width).print(Console(file=buffer, width=width))
        text = buffer.getvalue()
        assert "…" not in text and max(map(len, text.splitlines())) <= width
        header = next(line for line in text.splitlines() if " agent " in line)
        assert ("beats regime-rule" in header) == (width >= 200), width


def test_each_series_has_its_own_colour_then_its_own_marker():
    styles = [series_style(k) for k in range(3 * len(PALETTE))]
    assert len({colour for colour, _, _ in styles[: len(PALETTE)]}) == len(PALETTE)
    assert len(PALETTE) >= 11  # the suite's scenarios and a trace: a colour each
    assert len({(colour, marker) for colour, marker, _ in styles}) == len(styles)
    assert "#000000" not in PALETTE and FLOOR_GREY not in PALETTE  # the bound's and noop's


def test_legend_labels_are_whole_and_inside_the_figure():
    labels = ["trace:mooncake-conversation", "discard-paused+compress-all", "x" * 40]
    svg = dot_chart(
        ["a", "b"],
        [Series(label, [0.1, 0.2], PALETTE[k]) for k, label in enumerate(labels)],
        x_label="score",
        title="t",
    )
    for label in labels:
        text = re.search(rf"<text x='([0-9.]+)'[^>]*>{re.escape(label)}</text>", svg)
        assert text, label
        assert float(text.group(1)) + CHAR_W * len(label) <= WIDTH


def test_category_labels_are_whole_and_inside_the_figure():
    long = "<b>m</b><script>alert(1)</script>" + "x" * 6  # 40 characters, a cut name's length
    svg = dot_chart([long, "lru"], [Series("s", [0.1, 0.2], PALETTE[0])], x_label="x", title="t")
    text = re.search(r"<text x='([0-9.]+)' [^>]*text-anchor='end'[^>]*>&lt;b&gt;m", svg)
    assert text and float(text.group(1)) - CHAR_W * len(long) >= 0


def test_a_scenario_with_too_few_paired_episodes_is_shown_but_not_in_the_mean():
    results = suite({"good": 0.8}, seeds=20)
    # a short replay: two seeds, where good is at 0 (it would pull the mean down by 0.4)
    for seed in range(2):
        results += [
            result("noop", "trace:x", seed, 0.0),
            result("bound", "trace:x", seed, 1.0),
            result("good", "trace:x", seed, 0.0),
        ]
    scenarios = ["hard", "agent-tools", "trace:x"]
    flagged = rank_agents(results, scenarios, min_seeds=3)
    counted = rank_agents(results, scenarios, min_seeds=1)
    good = {r.agent: r for r in flagged.rows}["good"]
    assert flagged.few == {"trace:x": 2} and "trace:x" not in flagged.normalized
    assert good.per_scenario["trace:x"] == pytest.approx(0.0)  # shown all the same
    assert good.score == pytest.approx(0.8, abs=0.05)
    assert {r.agent: r for r in counted.rows}["good"].score == pytest.approx(0.8 * 2 / 3, abs=0.05)
    # the table shows the scenario, its header saying why it is not counted
    headers = ranking_headers(flagged)
    assert "trace:x (2 ep.: not in the mean)" in headers and "trace:x" not in headers
    cells = ranking_cells(good, flagged)
    assert cells[headers.index("trace:x (2 ep.: not in the mean)")][0] == "0.00"
