"""Numeric features of an `Observation`: one row per sequence slot plus a global vector.

The Gymnasium environment (`kv_cache_env.rl.gym`) shows exactly these arrays, and the `learned`
baseline scores sequences with a linear function of them, so both see what every built-in
policy sees (`sim.observe()`, or its text form) and nothing else — never the hidden return time
of a paused session. Numpy only (Gymnasium is an optional extra).

Slots follow the observation's order (largest GPU cost first); rows past the last entry are 0
and `present` tells which rows are real. At most `max_slots` entries are shown: the rest stay
invisible and cannot be acted on. The cap is `MAX_SLOTS` = 128: over 30 seeds per scenario of
the suite under `int8-everything`, `compress-all` and `offload-or-discard`, the most sequences
held at once were 89 (`hard`, compressing everything admits more) and 69 (`flash-crowd`). Every
value is scaled to a few units and clipped to [`LOW`, `HIGH`].
"""

from __future__ import annotations

import math

import numpy as np

from ..sim import (
    EVICTION_VALUE,
    BlockType,
    EntryView,
    Observation,
    PauseKind,
    Phase,
    Quantization,
)
from ..sim.catalogue import expected_remaining
from ..sim.observation import Table

MAX_SLOTS = 128
LOW, HIGH = -4.0, 8.0
_TYPES = tuple(BlockType)
_KINDS = tuple(PauseKind)
_QUANT = tuple(Quantization)
_PHASES = (Phase.PREFILL, Phase.DECODE, Phase.REASONING)

SLOT_FEATURES: tuple[str, ...] = (
    "present",  # 1 for a real entry, 0 for an empty row
    "running",  # computing (prefill, decode, reasoning)
    "paused_gpu",  # paused between two calls, KV on the GPU
    "swapped",  # paused, KV offloaded to CPU
    *(f"pause_{k}" for k in _KINDS),  # what a paused session waits on (one-hot)
    *(f"type_{t}" for t in _TYPES),  # block type (one-hot)
    *(f"phase_{p}" for p in _PHASES),  # phase of a running sequence (one-hot; idle = paused)
    *(f"kv_{q}" for q in _QUANT),  # storage precision (one-hot)
    "priority",  # request priority in [0, 1]
    "progress",  # its current call's output so far / that call's max_tokens
    "tokens",  # tokens whose KV is held / 8192
    "rate",  # decode tokens per step / 64
    "private_blocks",  # own blocks / GPU capacity (on CPU when swapped)
    "shared_blocks",  # shared prefix blocks referenced / GPU capacity
    "frees",  # GPU blocks evicting it frees now / GPU capacity
    "compress_gain",  # GPU blocks one compress frees now / GPU capacity
    "since_access",  # turns since its KV was last read / turns per episode
    "paused_for",  # steps paused so far / 15
    "expected_left",  # expected steps until it returns, from the signal table, / 15
    "eviction_score",  # the original design's eviction value by priority and progress, 0..1
    "swap_fits",  # on the GPU and its private blocks fit in the free CPU blocks
    "moving",  # blocks still crossing the host link for it / GPU capacity
    "budget",  # its current call's max_tokens / 4096
    "history",  # earlier pauses on tools that last more than a step / 4
    "pace",  # log of their geometric mean over the tool's median
    "calls_left",  # further calls its plan shows / 8 (-1/8 when no plan is known)
)
GLOBAL_FEATURES: tuple[str, ...] = (
    "turn",  # turn / turns per episode
    "usage",  # used / capacity
    "cached",  # cached prefix blocks / capacity
    "free",  # free blocks / capacity
    "usage_next",  # (used + next step's decode growth) / capacity
    "over_080",  # max(0, usage_next - 0.80)
    "over_095",  # max(0, usage_next - 0.95)
    "cpu_used",  # CPU blocks used / CPU capacity (0 without a CPU tier)
    "cpu_free",  # free CPU blocks / GPU capacity
    "queue",  # waiting requests / 16
    "oldest_wait",  # steps the oldest waiting request has waited / max_wait
    "urgent",  # 1 if the oldest waiting request fails after one more step of waiting
    "head_blocks",  # blocks the queue head needs / capacity
    "demand_blocks",  # blocks the whole queue needs / capacity
    "preempted",  # waiting requests that were preempted / 16
    "entries",  # sequences holding KV / MAX_SLOTS (all of them, shown or not)
    "paused_share",  # GPU blocks held by paused sessions / capacity
    "fp16_share",  # share of GPU-resident entries stored at fp16
    "link",  # blocks the host link moves per step / capacity (0: no limit)
    "backlog",  # blocks queued on the host link / capacity
    "arrivals",  # arrivals over the last TREND_STEPS steps / 16
)
F = len(SLOT_FEATURES)
G = len(GLOBAL_FEATURES)
SLOT = {name: i for i, name in enumerate(SLOT_FEATURES)}
GLOBAL = {name: i for i, name in enumerate(GLOBAL_FEATURES)}


def growth_at_most(obs: Observation) -> int:
    """An upper bound of `growth_blocks` that is cheap on an unbuilt table (the exact sum
    otherwise)."""
    entries = obs.entries
    if isinstance(entries, Table) and not entries.built:
        return entries.decode_growth_at_most()
    return growth_blocks(obs)


def growth_blocks(obs: Observation) -> int:
    """Blocks the decoding sequences take next step (an upper estimate, one block rounding up
    per sequence)."""
    entries = obs.entries
    if isinstance(entries, Table) and not entries.built:
        return entries.decode_growth()  # the same sum, without building the table
    total = 0
    for e in entries:
        if e.paused or e.swapped or e.phase is Phase.PREFILL:
            continue
        per_block = obs.block_size * e.quantization.packing
        total += -(-e.rate // per_block)
    return total


def expected_left(entry: EntryView, step_seconds: float = 1.0) -> float:
    """Steps a paused session is still expected to be away, from the published signal table:
    its tool's median, its own history and how long it has waited
    (`catalogue.expected_remaining`; 0 when computing)."""
    if entry.pause is None:
        return 0.0
    return expected_remaining(entry.pause, entry.paused_for, entry.pauses, entry.pace, step_seconds)


def compress_gain(entry: EntryView) -> int:
    """GPU blocks one compress call frees on `entry` (each level halves its private blocks)."""
    if entry.quantization.next_level is None or entry.swapped:
        return 0
    return entry.private_blocks - -(-entry.private_blocks // 2)


def slot_features(obs: Observation, max_slots: int = MAX_SLOTS) -> np.ndarray:
    """(max_slots, F) float32: one row per entry in observation order, zero rows after."""
    out = np.zeros((max_slots, F), dtype=np.float32)
    cap = float(obs.capacity)
    room = obs.cpu_capacity - obs.cpu_used
    turns = max(obs.turns, 1)
    turn = obs.turn
    step_seconds = obs.step_seconds
    # Rows are built as Python lists and converted to float32 in one call: the same double ->
    # float32 casts as assigning each element, without ~30 numpy item assignments per entry
    # (a third of the `learned` policy's turn, which the bound plays in every rollout).
    rows = []
    for e in obs.entries[:max_slots]:
        pause = e.pause
        swapped = e.swapped
        # present, running, paused_gpu, swapped (the first four columns)
        row = [1.0, pause is None, pause is not None and not swapped, swapped, *_ONE_HOT_ZEROS]
        if pause is not None:
            row[_KIND_COLUMN[pause]] = 1.0
        row[_TYPE_COLUMN[e.block_type]] = 1.0
        phase_column = _PHASE_COLUMN.get(e.phase)
        if phase_column is not None:
            row[phase_column] = 1.0
        row[_QUANT_COLUMN[e.quantization]] = 1.0
        priority = e.priority
        progress = e.progress
        row += (  # the scalar columns, in SLOT_FEATURES order (checked below the function)
            priority,
            progress,
            e.tokens / 8192,
            e.rate / 64,
            e.private_blocks / cap,
            e.shared_blocks / cap,
            e.frees / cap,
            compress_gain(e) / cap,
            (turn - e.last_access) / turns,
            e.paused_for / 15,
            expected_left(e, step_seconds) / 15,
            EVICTION_VALUE[e.block_type] * (1 - priority / 2) * (1 - progress / 2),
            (not swapped) and e.private_blocks <= room,
            e.moving / cap,
            e.budget / 4096,
            e.pauses / 4,
            math.log(e.pace) if e.pace > 0 else 0.0,
            e.left / 8,
        )
        rows.append(row)
    if rows:
        out[: len(rows)] = rows
    np.clip(out, LOW, HIGH, out=out)
    return out


_KIND_COLUMN = {k: SLOT[f"pause_{k}"] for k in _KINDS}
_TYPE_COLUMN = {t: SLOT[f"type_{t}"] for t in _TYPES}
_PHASE_COLUMN = {p: SLOT[f"phase_{p}"] for p in _PHASES}
_QUANT_COLUMN = {q: SLOT[f"kv_{q}"] for q in _QUANT}
_ONE_HOT_ZEROS = (0.0,) * (SLOT["priority"] - SLOT["pause_" + _KINDS[0]])
"""The one-hot columns (pause kind, type, phase, precision) start at 0 in every row."""
# slot_features writes the first four columns, then the one-hot block, then these in order:
assert SLOT_FEATURES[:4] == ("present", "running", "paused_gpu", "swapped")
assert SLOT["pause_" + _KINDS[0]] == 4
assert SLOT_FEATURES[SLOT["priority"] :] == (
    *("priority", "progress", "tokens", "rate", "private_blocks", "shared_blocks", "frees"),
    *("compress_gain", "since_access", "paused_for", "expected_left", "eviction_score"),
    *("swap_fits", "moving", "budget", "history", "pace", "calls_left"),
)


def global_features(obs: Observation) -> np.ndarray:
    """(G,) float32: the memory, CPU tier and queue state of this turn."""
    cap = float(obs.capacity)
    usage_next = (obs.used + growth_blocks(obs)) / cap
    queue = obs.queue
    gpu_entries = [e for e in obs.entries if not e.swapped]
    out = np.array(
        [
            obs.turn / max(obs.turns, 1),
            obs.usage,
            obs.cached / cap,
            obs.free / cap,
            usage_next,
            max(0.0, usage_next - 0.80),
            max(0.0, usage_next - 0.95),
            obs.cpu_used / obs.cpu_capacity if obs.cpu_capacity else 0.0,
            (obs.cpu_capacity - obs.cpu_used) / cap,
            queue.waiting / 16,
            queue.oldest_wait / max(obs.max_wait, 1),
            float(queue.waiting > 0 and queue.oldest_wait >= obs.max_wait - 1),
            queue.head_blocks / cap,
            queue.demand_blocks / cap,
            queue.preempted / 16,
            len(obs.entries) / MAX_SLOTS,
            sum(e.gpu_cost for e in gpu_entries if e.paused) / cap,
            (
                sum(e.quantization is Quantization.FP16 for e in gpu_entries) / len(gpu_entries)
                if gpu_entries
                else 0.0
            ),
            obs.link / cap,
            obs.backlog / cap,
            obs.arrivals / 16,
        ],
        dtype=np.float32,
    )
    np.clip(out, LOW, HIGH, out=out)
    return out
