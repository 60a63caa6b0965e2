"""`kvarena bench`'s speed table: fresh probe processes, a second tree measured beside this one."""

import gzip

from evals.serving.speed import HERE, run_speed
from kv_cache_env.trace_data import open_trace_text


def test_the_speed_table_measures_both_trees_and_checks_the_targets(tmp_path):
    trace = tmp_path / "small.jsonl.gz"
    with open_trace_text(
        HERE / "environments/kv_cache_env/trace_data/mooncake_conversation_trace.jsonl.gz"
    ) as source:
        head = [line for _, line in zip(range(150), source, strict=False)]
    with gzip.open(trace, "wt", encoding="utf-8") as out:
        out.writelines(head)
    # the "before" tree is this one: the mechanism is exercised, the ratios sit near 1
    table = run_speed(
        before=HERE,
        trace=str(trace),
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
    assert set(table["ratio"]) >= {"hard.lru.turns_per_s", "mooncake.replay_s"}
    target = table["targets"]["mooncake.memory_mib_per_12k_requests"]
    assert target["target"] == "<= 30.0"
    assert target["met"] == (target["value"] <= 30.0)
