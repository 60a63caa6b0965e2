"""`learned`: a linear scoring policy whose weights were trained on the training seeds.

Each turn, for every sequence on the GPU (in the observation's order, largest first), it scores
each tool it was trained for (the action table's tools that take a sequence, recorded in its
weights file) with a linear function of that sequence's features and the turn's global
features (`kv_cache_env.rl.features`, the same numbers the Gymnasium environment shows), and
applies the best-scoring tool the simulator would accept if its score is above 0 — at most one
call per sequence per turn, so compressing twice takes two turns. Offloads count down the free
CPU blocks as they are chosen, so a session whose KV no longer fits falls to its next-best tool.

There are two weight sets: one for fp16 deployments (`easy`, `medium-128`) and one for
deployments that store KV at fp8/int8 already (`medium`, `hard` and the named regimes; the
weights were trained when `medium` and `hard` were fp16), chosen by whether any sequence stored
at fp16 has been seen since turn 0 of the episode — a fact of the observation, not of the
scenario's name. The weights (`learned_weights.json`, beside this module) come from
`scripts/train_learned.py` (cross-entropy method over training seeds, selected on a separate
range); the file records the feature names, so a mismatch fails loudly. Observation-only: it
acts through `act(observation)` and runs behind the policy server like any other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kv_cache_env.bounded_read import SMALL_JSON_LIMITS, read_json
from kv_cache_env.rl.features import (
    GLOBAL,
    HIGH,
    LOW,
    expected_left,
    global_features,
)
from kv_cache_env.sim import (
    ACTIONS,
    EVICTION_VALUE,
    Action,
    BlockType,
    CpuRoom,
    Observation,
    PauseKind,
    Quantization,
)

from .base import Policy

WEIGHTS_FILE = Path(__file__).with_name("learned_weights.json")
GROUPS = ("fp16", "fp8")

ENTRY_INPUTS: tuple[str, ...] = (
    "running",
    "paused_gpu",
    *(f"pause_{k}" for k in PauseKind),
    "type_system",
    "type_context",
    "type_generation",
    "type_reasoning",
    "type_ephemeral",
    "kv_fp16",
    "kv_int8",
    "priority",
    "progress",
    "tokens",
    "private_blocks",
    "paused_for",
    "expected_left",
    "eviction_score",
    "moving",
    "budget",
    "history",
    "pace",
    "calls_left",
)
GLOBAL_INPUTS: tuple[str, ...] = (
    "turn",
    "usage_next",
    "over_080",
    "over_095",
    "urgent",
    "cpu_free",
    "paused_share",
    "queue",
    "link",
    "backlog",
    "arrivals",
)
INPUTS: tuple[str, ...] = (*ENTRY_INPUTS, *(f"g_{n}" for n in GLOBAL_INPUTS), "bias")
"""The inputs of each tool's score, in weight-column order."""
_GLOBAL_IDX = np.array([GLOBAL[n] for n in GLOBAL_INPUTS])


def table_tools() -> tuple[str, ...]:
    """The tools a linear policy is trained to score: the action table's tools that take a
    sequence, in its order (one weight row each)."""
    return tuple(tool.name for tool in ACTIONS.targeted)


@dataclass(frozen=True)
class LinearWeights:
    """One (len(tools), len(INPUTS)) matrix per deployment group: one row per tool."""

    fp16: np.ndarray
    fp8: np.ndarray
    tools: tuple[str, ...] = field(default_factory=table_tools)
    """The tools its rows score, in row order (what it was trained for)."""

    def group(self, name: str) -> np.ndarray:
        return self.fp16 if name == "fp16" else self.fp8

    def to_json(self) -> dict[str, object]:
        return {
            "inputs": list(INPUTS),
            "tools": list(self.tools),
            **{g: np.round(self.group(g), 6).tolist() for g in GROUPS},
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> LinearWeights:
        tools = data.get("tools")
        targeted = table_tools()
        if (
            data.get("inputs") != list(INPUTS)
            or not isinstance(tools, list)
            or not tools
            or any(t not in targeted for t in tools)
            or len(set(tools)) != len(tools)
        ):
            raise ValueError("learned weights were made for other inputs or tools; retrain them")
        mats = {}
        for g in GROUPS:
            mat = np.asarray(data[g], dtype=np.float64)
            if mat.shape != (len(tools), len(INPUTS)) or not np.isfinite(mat).all():
                raise ValueError(
                    f"learned weights {g!r}: expected finite {len(tools)}x{len(INPUTS)}"
                )
            mats[g] = mat
        return cls(**mats, tools=tuple(tools))

    @classmethod
    def load(cls, path: Path = WEIGHTS_FILE) -> LinearWeights:
        return cls.from_json(read_json(path, SMALL_JSON_LIMITS))


def inputs(obs: Observation) -> np.ndarray:
    """(entries, len(INPUTS)): each entry's score inputs (every entry, no slot cap): the
    `ENTRY_INPUTS` columns of `slot_features` (see `_entry_rows`), the `GLOBAL_INPUTS` of
    `global_features`, and the bias."""
    n = len(obs.entries)
    out = np.empty((n, len(INPUTS)))
    if n:
        block = np.array(_entry_rows(obs), dtype=np.float32)  # the same casts and clip
        np.clip(block, LOW, HIGH, out=block)
        out[:, : len(ENTRY_INPUTS)] = block
    out[:, len(ENTRY_INPUTS) : -1] = global_features(obs)[_GLOBAL_IDX]
    out[:, -1] = 1.0
    return out


def _entry_rows(obs: Observation) -> list[list[float]]:
    """`slot_features(obs)[:, ENTRY_INPUTS]` before its float32 cast: only the columns the
    policy reads, with the same expressions (the bound plays this policy in most of its
    rollouts, and the other columns were a third of its turn). A test keeps the two equal."""
    cap = float(obs.capacity)
    step_seconds = obs.step_seconds
    rows = []
    for e in obs.entries:
        pause = e.pause
        # running, paused_gpu, then the one-hot block (pause kind, type, precision)
        row = [pause is None, pause is not None and not e.swapped, *_ONE_HOT_ZEROS]
        if pause is not None:
            row[_PAUSE_AT[pause]] = 1.0
        row[_TYPE_AT[e.block_type]] = 1.0
        kv = _KV_AT[e.quantization]
        if kv is not None:
            row[kv] = 1.0
        priority = e.priority
        progress = e.progress
        row += (  # the scalar inputs, in ENTRY_INPUTS order (checked below)
            priority,
            progress,
            e.tokens / 8192,
            e.private_blocks / cap,
            e.paused_for / 15,
            expected_left(e, step_seconds) / 15,
            EVICTION_VALUE[e.block_type] * (1 - priority / 2) * (1 - progress / 2),
            e.moving / cap,
            e.budget / 4096,
            e.pauses / 4,
            math.log(e.pace) if e.pace > 0 else 0.0,
            e.left / 8,
        )
        rows.append(row)
    return rows


_AT = {name: i for i, name in enumerate(ENTRY_INPUTS)}
_PAUSE_AT = {k: _AT[f"pause_{k}"] for k in PauseKind}
_TYPE_AT = {t: _AT[f"type_{t}"] for t in BlockType}
_KV_AT = {q: _AT.get(f"kv_{q}") for q in Quantization}
_ONE_HOT_ZEROS = (0.0,) * (_AT["priority"] - 2)
assert ENTRY_INPUTS[:2] == ("running", "paused_gpu")
assert ENTRY_INPUTS[_AT["priority"] :] == (
    *("priority", "progress", "tokens", "private_blocks", "paused_for", "expected_left"),
    *("eviction_score", "moving", "budget", "history", "pace", "calls_left"),
)


def decide_linear(
    obs: Observation, weights: np.ndarray, tools: tuple[str, ...] | None = None
) -> list[Action]:
    """One turn of the linear policy with one weight matrix (the training script's inner loop);
    `tools` names its rows (default: `table_tools()`). A tool is applied where the action
    table's rule accepts it (`AgentTool.valid_on`), offloads counting down the free CPU blocks."""
    if not obs.entries:
        return []
    table = [ACTIONS[name] for name in (tools or table_tools())]
    # (entries, tools), as Python floats: the same values, compared without numpy scalars
    scores = (inputs(obs) @ weights.T).tolist()
    room = CpuRoom(obs.cpu_room)
    actions: list[Action] = []
    for e, row in zip(obs.entries, scores, strict=True):
        if e.swapped:
            continue
        best, best_tool = 0.0, -1
        for t, tool in enumerate(table):
            if row[t] > best and tool.valid_on(e, room):
                best, best_tool = row[t], t
        if best_tool < 0:
            continue
        chosen = table[best_tool]
        if chosen.needs_cpu_room:
            room.cpu_room -= e.private_blocks
        actions.append(Action(chosen.name, e.seq_id))
    return actions


class LearnedPolicy(Policy):
    """Linear tool scores per sequence, trained by `scripts/train_learned.py` (module doc)."""

    name = "learned"
    keeps_state = True  # whether it has seen fp16 KV in this episode (its deployment group)

    def __init__(self, weights: LinearWeights | None = None) -> None:
        self.weights = weights if weights is not None else _shipped()
        self._fp16_seen = False

    def reset(self, seed: int) -> None:
        self._fp16_seen = False

    def act(self, obs: Observation) -> list[Action]:
        if obs.turn == 0:
            self._fp16_seen = False  # also right where reset is not called (policy server)
        if not self._fp16_seen and any(e.quantization is Quantization.FP16 for e in obs.entries):
            self._fp16_seen = True
        group = "fp16" if self._fp16_seen else "fp8"
        return decide_linear(obs, self.weights.group(group), self.weights.tools)


_CACHE: list[LinearWeights] = []


def _shipped() -> LinearWeights:
    if not _CACHE:
        _CACHE.append(LinearWeights.load())
    return _CACHE[0]
