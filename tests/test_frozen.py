"""`sim.frozen.slot_constructor`: the same records as the dataclass's own constructor."""

import ast
import pickle
from dataclasses import FrozenInstanceError, dataclass, fields
from pathlib import Path

import pytest

from kv_cache_env.sim import BlockType, FollowUp, PauseKind, Request
from kv_cache_env.sim.frozen import slot_constructor
from kv_cache_env.sim.record import EvictionRecord
from kv_cache_env.sim.scheduler import StepStats
from kv_cache_env.traces import TraceRequest


def test_records_equal_those_of_the_dataclass_constructor():
    follow = (FollowUp(PauseKind.SEARCH, 2, 150, 80),)
    values = {
        "seq_id": "r3",
        "arrival_step": 7,
        "block_type": BlockType.CONTEXT,
        "priority": 0.42,
        "prompt_tokens": 900,
        "output_tokens": 120,
        "decode_rate": 40,
        "prefix_hashes": (1, 2),
        "shared_prefix_id": "p0",
        "reasoning_tokens": 0,
        "followups": follow,
        "plan": 2,
        "pace": 1.3,
    }
    for cls, args in (
        (Request, values),
        (
            FollowUp,
            {"pause": PauseKind.HUMAN, "pause_steps": 9, "prompt_tokens": 60, "output_tokens": 5},
        ),
        (
            TraceRequest,
            {"arrival_s": 1.5, "input_tokens": 600, "output_tokens": 3, "hash_ids": (4, 5)},
        ),
        (StepStats, {f.name: i + 0.5 * (i % 3 == 1) for i, f in enumerate(fields(StepStats))}),
        (
            EvictionRecord,
            dict(
                zip(
                    [f.name for f in fields(EvictionRecord)],
                    (3, "r1", BlockType.GENERATION, 0.5, 0.25, True, 7, False),
                    strict=True,
                )
            ),
        ),
    ):
        make = slot_constructor(cls)
        fast, plain = make(**args), cls(**args)
        assert type(fast) is cls and fast == plain and hash(fast) == hash(plain)
        assert repr(fast) == repr(plain)
        assert pickle.loads(pickle.dumps(fast)) == plain
        assert make(*args.values()) == plain
        with pytest.raises(FrozenInstanceError):
            fast.__setattr__(next(iter(args)), None)
        with pytest.raises(TypeError):
            make(*list(args.values())[:-1])  # every field must be given


def test_only_frozen_slotted_dataclasses_without_post_init():
    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(slots=True)
    class NotFrozen:
        x: int

    @dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            assert self.x >= 0

    for cls in (NoSlots, NotFrozen, Checked):
        with pytest.raises(TypeError, match="not a frozen, slotted dataclass"):
            slot_constructor(cls)


def test_no_source_is_generated_at_run_time():
    """The package builds no code from strings (`exec`/`eval`): a reader can find every line
    that runs."""
    root = Path(__file__).resolve().parents[1] / "environments"
    calls = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("exec", "eval")
    ]
    assert calls == []
