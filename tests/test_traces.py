"""Trace parsing (Mooncake JSONL, Azure CSV), malformed input and schedules."""

import gzip
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kv_cache_env.sim import PauseKind, Simulator, get_scenario
from kv_cache_env.traces import (
    TraceError,
    infinite_cache_hit_fraction,
    load_trace,
    trace_scenario,
    trace_schedule,
)
from kv_cache_env.traces.replay import _json_line
from kv_cache_env.traces.trace_data import BUILTIN_TRACES, DATA_DIR, resolve_trace

# the packaged copies (kv_cache_env.traces.trace_data), by their built-in names
MOONCAKE = "mooncake-conversation"
AZURE = "azure-conv-2023"


@pytest.fixture(scope="module")
def mooncake():
    return load_trace(MOONCAKE)


def test_mooncake_trace_facts(mooncake):
    assert len(mooncake.requests) == 12031
    assert mooncake.block_tokens == 512
    assert round(infinite_cache_hit_fraction(mooncake), 4) == 0.3664
    mean_input = sum(r.input_tokens for r in mooncake.requests) / len(mooncake.requests)
    assert round(mean_input) == 12035
    arrivals = [r.arrival_s for r in mooncake.requests]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0
    # 3-second buckets are spread out: far more distinct arrival times than 1,180 buckets
    assert len(set(arrivals)) > 10_000


def test_azure_trace_facts():
    azure = load_trace(AZURE)
    assert len(azure.requests) == 19366 and azure.block_tokens is None
    rate = len(azure.requests) / azure.duration_s
    assert 5.0 < rate < 6.0
    assert infinite_cache_hit_fraction(azure) == 0.0


def test_trace_window_is_seeded_and_replayable(mooncake):
    scenario = trace_scenario(mooncake)
    # 16-token engine blocks; a 512-token hash block is one prefix unit of 32 of them
    assert (scenario.block_size, scenario.prefix_hash_blocks) == (16, 32)
    a = trace_schedule(mooncake, scenario, 3)
    b = trace_schedule(mooncake, scenario, 3)
    c = trace_schedule(mooncake, scenario, 4)
    assert a == b and a != c
    assert all(0 <= r.arrival_step < a.horizon for r in a.requests)
    sim = Simulator(scenario, 3, schedule=a)
    while not sim.done:
        sim.step()
        sim.check_invariants()


def test_full_replay_covers_the_whole_trace(mooncake):
    scenario = trace_scenario(mooncake, full=True)
    schedule = trace_schedule(mooncake, scenario, 0, full=True)
    # every request of the trace is a session's first call or one of its later turns
    calls = sum(1 + len(r.followups) for r in schedule.requests)
    assert calls == len(mooncake.requests)
    sessions = [r for r in schedule.requests if r.followups]
    assert len(sessions) > 500
    assert all(
        f.pause == "human" and 1 <= f.pause_steps <= 60 for r in sessions for f in r.followups
    )
    assert scenario.warmup_steps == 0 and scenario.steps >= 3539


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_small_mooncake_file_parses_and_shares_prefixes(tmp_path):
    lines = [
        {"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]},
        {"timestamp": 3000, "input_length": 10, "output_length": 0, "hash_ids": [9]},
    ]
    path = _write(tmp_path, "t.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    trace = load_trace(path)
    assert [r.arrival_s for r in trace.requests] == [0.0, 1.5, 3.0]
    assert infinite_cache_hit_fraction(trace) == 2 / 6


def test_mooncake_chats_become_sessions_and_single_use_hashes_are_private(tmp_path):
    # A: a chat's first turn (3 hash blocks, the last one partial). B carries A's last full
    # block (2) 20 s later: A's next turn. C shares only hash 1 with the chat: a session of its
    # own: hash 7 is private to it, hash 1 (used by several sessions) a shared prefix block.
    # D carries B's last full block but comes 200 s later: past the longest pause, a session
    # of its own, which makes 2 and 4 shared too; 5, 6, 8 stay private.
    lines = [
        {"timestamp": 0, "input_length": 1200, "output_length": 90, "hash_ids": [1, 2, 3]},
        {"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 7]},
        {"timestamp": 20000, "input_length": 1600, "output_length": 45, "hash_ids": [1, 2, 4, 5]},
        {
            "timestamp": 220000,
            "input_length": 2100,
            "output_length": 5,
            "hash_ids": [1, 2, 4, 6, 8],
        },
    ]
    trace = load_trace(_write(tmp_path, "chat.jsonl", "\n".join(json.dumps(x) for x in lines)))
    scenario = trace_scenario(trace, full=True)
    schedule = trace_schedule(trace, scenario, 0, full=True)
    by_prompt = {r.prompt_tokens: r for r in schedule.requests}
    assert sorted(by_prompt) == [600, 1200, 2100]
    chat = by_prompt[1200]
    # mid decode rate 45 tokens/step: A's estimated call is 1 + 90/45 = 3 steps
    (turn,) = chat.followups
    assert (turn.pause, turn.pause_steps) == ("human", 20 - 3)
    assert (turn.prompt_tokens, turn.output_tokens) == (1600 - 1200 - 90, 45)
    # D shares 1, 2 and 4 with the chat (hash 3 is A's partial last block: not shareable)
    assert chat.prefix_hashes == (1, 2) and by_prompt[600].prefix_hashes == (1,)
    assert by_prompt[2100].prefix_hashes == (1, 2, 4) and not by_prompt[2100].followups
    sim = Simulator(scenario, 0, schedule=schedule)
    while not sim.done:
        sim.step()
        sim.check_invariants()
    record = sim.record()
    sim.check_invariants()
    assert record.drain_steps > 0


def test_azure_sessions_are_drawn_from_the_scenario_mix():
    azure = load_trace(AZURE)
    scenario = trace_scenario(azure, get_scenario("hard"))
    a = trace_schedule(azure, scenario, 5)
    assert a == trace_schedule(azure, scenario, 5)
    sessions = [r for r in a.requests if r.followups]
    assert sessions and len(sessions) < len(a.requests)
    lo, hi = scenario.followups
    assert all(lo <= len(r.followups) <= hi for r in sessions)
    kinds = {k for k, w in scenario.tool_mix if w > 0} | {PauseKind.HUMAN}
    assert {f.pause for r in sessions for f in r.followups} <= kinds
    assert {r.block_type for r in sessions} <= {"system", "context", "generation"}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "bad.jsonl",
            '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\nnot json\n',
            "bad.jsonl:2:",
        ),
        (
            "bad.jsonl",
            '{"timestamp": 0, "input_length": 10, "output_length": 1}\n',
            "bad.jsonl:1: missing field 'hash_ids'",
        ),
        (
            "bad.jsonl",
            '{"timestamp": 0, "input_length": 2000, "output_length": 1, "hash_ids": [1]}\n',
            "bad.jsonl:1: 1 hash_ids for 2000 tokens (expected 4)",
        ),
        (
            "bad.jsonl",
            '{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []}\n',
            "input_length must be >= 0",
        ),
        (
            "bad.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10\n",
            "bad.csv:2: expected 3 columns",
        ),
        (
            "bad.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,x,1\n",
            "bad.csv:2: ContextTokens must be an integer",
        ),
        ("bad.csv", "when,what\n", "bad.csv:1: expected header"),
        ("empty.jsonl", "\n", "holds no requests"),
        ("trace.txt", "x", "unknown trace format"),
    ],
)
def test_malformed_traces_name_file_and_line(tmp_path, name, text, message):
    path = _write(tmp_path, name, text)
    with pytest.raises(TraceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_trace(path)


def test_missing_trace_file(tmp_path):
    with pytest.raises(TraceError, match="no such trace file"):
        load_trace(tmp_path / "nope.jsonl")


def test_gzipped_traces_read_like_plain_ones(tmp_path):
    lines = [
        {"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 3000, "input_length": 10, "output_length": 0, "hash_ids": [9]},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    csv_text = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,10,2\n2023-11-16 18:15:47.1,20,3\n"
    )
    for name, body in (("t.jsonl", text), ("t.csv", csv_text)):
        plain = _write(tmp_path, name, body)
        packed = tmp_path / f"{name}.gz"
        packed.write_bytes(gzip.compress(body.encode()))
        assert load_trace(packed).requests == load_trace(plain).requests
        assert load_trace(packed).kind == load_trace(plain).kind
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress(text.encode() + b"{oops\n"))
    with pytest.raises(TraceError, match=r"bad\.jsonl\.gz:3:"):
        load_trace(bad)
    with pytest.raises(TraceError, match="unknown trace format"):
        load_trace(_write(tmp_path, "t.txt.gz", "x"))


def test_builtin_names_resolve_to_packaged_files_and_paths_stay_paths(tmp_path):
    for name, info in BUILTIN_TRACES.items():
        file = resolve_trace(name)
        assert file.parent == DATA_DIR and file.name == info.file and file.is_file()
        assert load_trace(name).path == name  # results are labelled by the name asked for
    path = _write(tmp_path, "mine.jsonl", "")
    assert resolve_trace(path) == path and resolve_trace(str(path)) == path
    readme = (DATA_DIR / "README.md").read_text()
    for info in BUILTIN_TRACES.values():
        assert info.file in readme and info.name in readme
    assert "Apache-2.0" in readme and "CC-BY 4.0" in readme and "Splitwise" in readme


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ['{"a": 1}', "[1, 2]", "7", " ", "\t", "\r", "\n", "\x0c", "\ufeff", "x", "{", '"', "]"]
        ),
        min_size=1,
        max_size=5,
    ).map("".join)
)
def test_json_lines_read_as_json_loads_reads_them(line):
    """The loader's faster line parser accepts what `json.loads` accepts, with the same value,
    and raises its errors on the rest."""
    try:
        expected = json.loads(line)
    except ValueError as error:
        with pytest.raises(ValueError, match=re.escape(str(error))):
            _json_line(line)
    else:
        assert _json_line(line) == expected


def test_numbers_outside_the_fast_path_load_as_before(tmp_path):
    """Numbers written as strings or floats take the checked path and load as they did;
    bools, NaN and out-of-range numbers still fail with their field's message."""
    plain = {"timestamp": 1500, "input_length": 600, "output_length": 3, "hash_ids": [4, 5]}
    spelled = {
        "timestamp": "1500",
        "input_length": " 600",
        "output_length": "3",
        "hash_ids": [4, 5],
    }
    floated = {"timestamp": 1500.0, "input_length": 600, "output_length": 3, "hash_ids": [4, 5]}
    loaded = [
        load_trace(_write(tmp_path, f"{k}.jsonl", json.dumps(x))).requests
        for k, x in (("plain", plain), ("spelled", spelled), ("floated", floated))
    ]
    assert loaded[0] == loaded[1] == loaded[2]
    for field, value, message in (
        ("timestamp", True, "timestamp must be a number"),
        ("timestamp", float("nan"), "timestamp must be finite"),
        ("timestamp", -1, "timestamp is -0.001 s"),
        ("input_length", 2**21, "input_length 2097152 exceeds"),
        ("output_length", 1.5, "output_length must be an integer"),
        ("output_length", False, "output_length must be an integer"),
    ):
        path = _write(tmp_path, "bad.jsonl", json.dumps(plain | {field: value}))
        with pytest.raises(TraceError, match=f"bad.jsonl:1: {re.escape(message)}"):
            load_trace(path)
