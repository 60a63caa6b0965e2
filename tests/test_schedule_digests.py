"""Arrival schedules pinned by digest: a change to which numbers are drawn, in which order, or
how they become requests (synthetic and trace replay alike) changes these digests.

The pins were computed on commit c772eb9, before the schedule builders were sped up (issue 13),
and every speed-up since had to keep them. A legitimate change of the workload model updates a
pin together with the golden files and says why in its commit.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kv_cache_env.sim import SCENARIOS, Schedule, get_scenario
from kv_cache_env.sim.workload import synthesize
from kv_cache_env.traces import Trace, load_trace, trace_scenario, trace_schedule

SEEDS = (0, 1, 2, 17, 123456)


def _schedule_rows(schedule: Schedule) -> list[object]:
    """Every field of every request, in order; json.dumps below rejects numpy scalars, so a
    value that stops being a plain int or float fails too."""
    return [
        schedule.horizon,
        [
            [
                r.seq_id,
                r.arrival_step,
                r.block_type.value,
                r.priority,
                r.prompt_tokens,
                r.output_tokens,
                r.decode_rate,
                list(r.prefix_hashes),
                r.shared_prefix_id,
                r.reasoning_tokens,
                [
                    [f.pause.value, f.pause_steps, f.prompt_tokens, f.output_tokens]
                    for f in r.followups
                ],
                r.plan,
                r.pace,
            ]
            for r in schedule.requests
        ],
    ]


def _digest(rows: object) -> str:
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def synthetic_digest(name: str) -> str:
    """`synthesize` for `SEEDS`, and the generator's next draw after each (the simulator draws
    the memory budget from the same generator afterwards)."""
    rows = []
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        rows.append(_schedule_rows(synthesize(get_scenario(name), rng)))
        rows.append(float(rng.random()))
    return _digest(rows)


def trace_digest(trace: Trace) -> str:
    return _digest(
        [[r.arrival_s, r.input_tokens, r.output_tokens, list(r.hash_ids)] for r in trace.requests]
    )


def replay_digest(trace: Trace, base: str, *, full: bool) -> str:
    scenario = trace_scenario(trace, get_scenario(base), full=full)
    seeds = SEEDS[:1] if full else SEEDS
    return _digest([_schedule_rows(trace_schedule(trace, scenario, s, full=full)) for s in seeds])


SYNTHETIC_PINS = {
    "agent-remote": "9f6ce5ed308a4059",  # agent-tools' arrivals (only the host link differs)
    "agent-tools": "9f6ce5ed308a4059",
    "big-cpu": "6d7c1b62da99d431",  # the same arrivals as slow-prefill (the engine differs)
    "chat-human": "4de51efff281b35a",
    "easy": "0cbd1ffdbfe4426d",
    "flash-crowd": "260e30c8375839f5",
    "hard": "bdf91bcc1cee3287",
    "medium": "6f2ee8c87aba3374",  # suite v3: the regimes' sessions (medium-128 keeps the old)
    "medium-128": "5fad0f232d24af82",
    "slow-prefill": "6d7c1b62da99d431",
}

TRACE_PINS = {
    "mooncake-conversation": {
        "trace": "11700c320fdb019c",
        "medium": "6e73d192a4fdec86",
        "hard": "96a777f19a088888",
        "full": "947c80a0d2029dbb",
    },
    "azure-conv-2023": {
        "trace": "2c9db9a1f10999fa",
        "medium": "5cfa1106cbc7f4b4",  # sessions drawn from medium's (now the regimes') mix
        "hard": "309e48948cef9ea4",
        "full": "a2fce75db69ff802",
    },
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_synthetic_schedules_match_their_pins(name):
    assert synthetic_digest(name) == SYNTHETIC_PINS[name]


@pytest.mark.parametrize("name", sorted(TRACE_PINS))
def test_trace_loading_and_replay_schedules_match_their_pins(name):
    trace = load_trace(name)
    got = {
        "trace": trace_digest(trace),
        "medium": replay_digest(trace, "medium", full=False),
        "hard": replay_digest(trace, "hard", full=False),
        "full": replay_digest(trace, "medium", full=True),
    }
    assert got == TRACE_PINS[name]


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    draws=st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 2**33), st.integers(0, 7), st.integers(0, 5)),
        max_size=12,
    ),
)
def test_scalar_integer_draws_equal_one_sized_draw(seed, draws):
    """`workload` draws a session's pause lengths as `count` scalar `rng.integers` calls, taking
    it to give the numbers (and leave the generator where) one `size=count` call would, also
    between other draws; ranges past 32 bits take numpy's other path, checked too."""
    sized, scalar = np.random.default_rng(seed), np.random.default_rng(seed)
    for lo, span, count, normals in draws:
        assert sized.integers(lo, lo + span + 1, size=count).tolist() == [
            int(scalar.integers(lo, lo + span + 1)) for _ in range(count)
        ]
        assert sized.standard_normal(normals).tolist() == scalar.standard_normal(normals).tolist()
    assert sized.bit_generator.state == scalar.bit_generator.state


def test_a_renamed_scenario_keeps_its_former_name():
    # `medium-128` was called `seed-compatible`: commands and results that name it still work
    assert get_scenario("seed-compatible") is get_scenario("medium-128")
