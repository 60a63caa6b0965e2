"""`kvarena bench`'s speed table: fresh probe processes, a second tree measured beside this one."""

import gzip

import pytest

from evals.serving.speed import HERE, run_speed
from kv_cache_env.traces.trace_data import open_trace_text


@pytest.mark.long_running
def test_the_speed_table_measures_both_trees_and_checks_the_targets(tmp_path):
    trace = tmp_path / "small.jsonl.gz"
    with open_trace_text(
        HERE / "environments/kv_cache_env/traces/trace_data/mooncake_conversation_trace.jsonl.gz"
    ) as source:
        head = [line for _, line in zip(range(150), source, strict=False)]
    with gzip.open(trace, "wt", encoding="utf-8") as out:
        out.writelines(head)
    # a stand-in for the naive replay: it checks what it is given and notes the capacity
    naive = tmp_path / "naive.py"
    seen = tmp_path / "seen.txt"
    naive.write_text(
        "import json, sys\n"
        "path, capacity = sys.argv[1], int(sys.argv[2])\n"
        "assert path.endswith('.jsonl'), path\n"
        "rows = [json.loads(line) for line in open(path)]\n"
        "assert len(rows) == 150\n"
        "sum(range(2_000_000))\n"
        f"open({str(seen)!r}, 'a').write(f'{{capacity}}\\n')\n"
    )
    # the "before" tree is this one: the mechanism is exercised, the ratios sit near 1
    table = run_speed(
        before=HERE,
        trace=str(trace),
        naive=naive,
        repeats=1,
        hard_episodes=2,
        bound_episodes=1,
        vector_episodes=4,
    )
    after, before = table["after"], table["before"]
    assert table["trees"] == {"after": str(HERE), "before": str(HERE)}
    for figures in (after, before):
        assert figures["mooncake.requests"] == 150
        assert figures["hard.lru.turns_per_s"] > 0 and figures["hard.reset_ms_median"] > 0
        assert figures["mooncake.whole_process_s"] > figures["mooncake.replay_s"] > 0
        assert figures["mooncake.memory_mib_per_12k_requests"] > 0
    assert table["bound_rewards_identical"] is True
    assert after["vector.workers_2_steps_per_s"] > 0
    assert after["vector.speedup_2_workers"] > 0  # the median of the pairs' ratios
    assert set(table["ratio"]) >= {"hard.lru.turns_per_s", "mooncake.replay_s"}
    target = table["targets"]["mooncake.memory_mib_per_12k_requests"]
    assert target["target"] == "<= 30.0"
    assert target["met"] == (target["value"] <= 30.0)
    # the yardstick ran once, on the capacity this tree's replay used, and scales both figures
    assert seen.read_text().split() == [str(after["mooncake.capacity_blocks"])]
    naive_s = table["naive_replay_s"]
    assert naive_s > 0
    for figures in (after, before):
        assert figures["mooncake.replay_over_naive"] == figures["mooncake.replay_s"] / naive_s
        assert figures["mooncake.whole_process_over_naive"] == (
            figures["mooncake.whole_process_s"] / naive_s
        )
    assert table["targets"]["mooncake.replay_over_naive"]["target"] == "<= 0.93"
    assert table["targets"]["mooncake.whole_process_over_naive"]["target"] == "<= 2.07"
