"""Arrival schedules: the requests of one episode, fixed before the first step.

A `Schedule` is drawn once at reset (synthetically from a `Scenario`, or from a trace) and never
depends on the agent's actions, so every policy faces the same future. Requests are immutable;
the engine keeps each request's mutable state in a `Sequence`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from .frozen import slot_constructor
from .scenario import PAUSES, PauseProfile, Scenario
from .types import BlockType, PauseKind

# Prefix block hashes of synthetic prefix k are PREFIX_HASH_BASE * (k + 1) + i, i = block index.
PREFIX_HASH_BASE = 1_000_000


@dataclass(frozen=True, slots=True)
class FollowUp:
    """One further call of a session: after its previous call completes, the session pauses
    for `pause_steps` (hidden from the agent; it sees `pause`), then appends `prompt_tokens` new
    prompt tokens (a tool's output, a user's message) and generates `output_tokens`."""

    pause: PauseKind
    pause_steps: int
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Request:
    """One request as it arrives. `arrival_step` is on the engine clock (warm-up included)."""

    seq_id: str
    arrival_step: int
    block_type: BlockType
    priority: float
    """0-1, rounded to 2 decimals (what observations show)."""
    prompt_tokens: int
    """Whole prompt, shared prefix included."""
    output_tokens: int
    """Tokens to generate before the request completes (>= 1)."""
    decode_rate: int
    """Tokens generated per step while decoding (seed 003's token_gen_rate)."""
    prefix_hashes: tuple[int, ...] = ()
    """Content hashes of the prompt's leading shareable blocks, in order (a hash chain)."""
    shared_prefix_id: str | None = None
    reasoning_tokens: int = 0
    """The first `reasoning_tokens` outputs are decoded in the `reasoning` phase."""
    followups: tuple[FollowUp, ...] = ()
    """Further calls of the session, in order (empty: a single call). `output_tokens` and
    `prompt_tokens` describe the first call."""

    @property
    def total_output(self) -> int:
        """Tokens the session generates over all its calls."""
        return self.output_tokens + sum(f.output_tokens for f in self.followups)


@dataclass(frozen=True, slots=True)
class Schedule:
    """All arrivals of an episode, sorted by arrival step; `horizon` = engine steps in total."""

    requests: tuple[Request, ...]
    horizon: int

    def arrivals_by_step(self) -> list[list[Request]]:
        by_step: list[list[Request]] = [[] for _ in range(self.horizon)]
        for request in self.requests:
            if 0 <= request.arrival_step < self.horizon:
                by_step[request.arrival_step].append(request)
        return by_step

    def max_request_blocks(self, block_size: int) -> int:
        """fp16 blocks the largest session needs at its full length (capacity floor)."""
        # One pass over plain sums, and one ceil of the longest (ceil is monotonic), instead
        # of a generator and a `total_output` sum per request: ~0.15 ms of a `hard` reset.
        longest = 0
        for r in self.requests:
            total = r.prompt_tokens + r.output_tokens
            for f in r.followups:
                total += f.prompt_tokens + f.output_tokens
            if total > longest:
                longest = total
        return math.ceil(longest / block_size) if self.requests else 1


# `Request(...)` and `FollowUp(...)` at ~40% of the cost (`frozen.py`): a `hard` schedule
# builds ~100 requests and ~180 follow-ups, a full Mooncake replay ~10,700 requests.
make_request = slot_constructor(Request)
make_followup = slot_constructor(FollowUp)


def synthesize(scenario: Scenario, rng: np.random.Generator) -> Schedule:
    """Draw the arrival schedule of one episode of `scenario` from `rng`."""
    horizon = scenario.warmup_steps + scenario.steps
    rate = rng.uniform(*scenario.arrival_rate) * scenario.step_seconds
    bursts = rng.random(horizon) < scenario.burst_probability
    counts = rng.poisson(np.where(bursts, rate * scenario.burst_multiplier, rate))
    total = int(counts.sum())
    steps = np.repeat(np.arange(horizon), counts)

    types = [t for t, _ in scenario.type_mix]
    weights = np.array([w for _, w in scenario.type_mix], dtype=float)
    type_index = rng.choice(len(types), size=total, p=weights / weights.sum())

    prefixes = _prefix_catalogue(scenario, rng)
    popularity = 1.0 / np.arange(1, len(prefixes) + 1)
    prefix_choice = (
        rng.choice(len(prefixes), size=total, p=popularity / popularity.sum())
        if (prefixes)
        else np.zeros(total, dtype=int)
    )
    uses_prefix = rng.random(total) < scenario.shared_prefix_probability
    normals = rng.standard_normal((total, 2))
    uniforms = rng.random(total)
    decode_lo, decode_hi = scenario.decode_tokens_per_step
    decode_rates = rng.integers(decode_lo, decode_hi + 1, size=total)
    # Sessions: drawn after everything above so that the first calls of a schedule do not depend
    # on the session parameters.
    sessions = draw_sessions(scenario, [types[int(k)] for k in type_index], rng)

    # The draws are read as Python numbers (`tolist`: the same int64 and float64 values)
    # instead of numpy scalars, whose indexing and arithmetic cost ~10x more per request.
    # Each block type's profile is read once per schedule, not once per request.
    block_size = scenario.block_size
    max_prompt = scenario.max_prompt_tokens
    profiles = dict(scenario.profiles)
    per_type = [(t, profiles[t], t is BlockType.SYSTEM) for t in types]
    requests = []
    for i, (step, type_i, k, uses, (prompt_normal, output_normal), uniform, rate) in enumerate(
        zip(
            steps.tolist(),
            type_index.tolist(),
            prefix_choice.tolist(),
            uses_prefix.tolist(),
            normals.tolist(),
            uniforms.tolist(),
            decode_rates.tolist(),
            strict=True,
        )
    ):
        block_type, profile, is_system = per_type[type_i]
        private_prompt = _lognormal(profile.prompt_median, profile.prompt_sigma, prompt_normal)
        private_prompt = min(private_prompt, max_prompt)
        output = _lognormal(profile.output_median, profile.output_sigma, output_normal)
        lo, hi = profile.priority
        priority = round(lo + (hi - lo) * uniform, 2)
        hashes: tuple[int, ...] = ()
        prefix_id = None
        if prefixes and (uses or is_system):
            hashes = prefixes[k]
            prefix_id = f"p{k}"
        prompt = private_prompt + len(hashes) * block_size
        requests.append(
            make_request(
                seq_id=f"r{i}",
                arrival_step=step,
                block_type=block_type,
                priority=priority,
                prompt_tokens=prompt,
                output_tokens=output,
                decode_rate=rate,
                prefix_hashes=hashes,
                shared_prefix_id=prefix_id,
                reasoning_tokens=int(output * profile.reasoning_fraction),
                followups=sessions.get(i, ()),
            )
        )
    return Schedule(requests=tuple(requests), horizon=horizon)


def draw_sessions(
    scenario: Scenario, block_types: list[BlockType], rng: np.random.Generator
) -> dict[int, tuple[FollowUp, ...]]:
    """Which of the requests (by index, given their block types) are sessions, and their
    further calls: each is a session with the scenario's probability for its type, pausing for
    one kind drawn from `pause_mix`, with a uniform number of further calls."""
    n = len(block_types)
    session_p = dict(scenario.session_probability)
    draw = rng.random(n).tolist()  # Python numbers: see `synthesize`
    kinds = [k for k, _ in scenario.pause_mix]
    kind_weights = np.array([w for _, w in scenario.pause_mix], dtype=float)
    kind_index = rng.choice(len(kinds), size=n, p=kind_weights / kind_weights.sum()).tolist()
    counts = rng.integers(scenario.followups[0], scenario.followups[1] + 1, size=n).tolist()
    # each kind's ranges and medians are read once per schedule, not once per session
    per_kind = [_FollowUpDraw.of(scenario, kind) for kind in kinds]
    out: dict[int, tuple[FollowUp, ...]] = {}
    for i, block_type in enumerate(block_types):
        if draw[i] < session_p.get(block_type, 0.0):
            out[i] = per_kind[kind_index[i]].draw(counts[i], rng)
    return out


def draw_followups(
    scenario: Scenario, kind: PauseKind, count: int, rng: np.random.Generator
) -> tuple[FollowUp, ...]:
    """`count` further calls of a session pausing for `kind`: pause lengths uniform over the
    scenario's range for the kind, new prompt and output lengths log-normal (`PAUSES`)."""
    return _FollowUpDraw.of(scenario, kind).draw(count, rng)


@dataclass(frozen=True, slots=True)
class _FollowUpDraw:
    """What `draw_followups` needs to know about one pause kind in one scenario."""

    kind: PauseKind
    seconds: tuple[int, int]
    pause_steps: Callable[[float], int]
    profile: PauseProfile

    @classmethod
    def of(cls, scenario: Scenario, kind: PauseKind) -> _FollowUpDraw:
        return cls(kind, scenario.pause_range(kind), scenario.pause_steps, PAUSES[kind])

    def draw(self, count: int, rng: np.random.Generator) -> tuple[FollowUp, ...]:
        lo, hi = self.seconds
        integers = rng.integers
        # `count` scalar draws are the same numbers as one `size=count` draw: numpy draws
        # bounded integers from the bit generator's 32-bit stream, whose buffered half-word
        # survives between calls (`test_schedule_digests`), and a `size` costs ~10 us per session.
        seconds = [integers(lo, hi + 1) for _ in range(count)]
        # `2 * count` normals are the same draws as a (count, 2) array (filled in C order)
        # without numpy's shape handling, which cost more than the draw itself.
        normals = rng.standard_normal(2 * count).tolist()
        kind, pause_steps, profile = self.kind, self.pause_steps, self.profile
        p_median, p_sigma = profile.prompt_median, profile.prompt_sigma
        o_median, o_sigma = profile.output_median, profile.output_sigma
        return tuple(
            make_followup(
                kind,
                pause_steps(float(seconds[j])),
                _lognormal(p_median, p_sigma, normals[2 * j]),
                _lognormal(o_median, o_sigma, normals[2 * j + 1]),
            )
            for j in range(count)
        )


def _prefix_catalogue(scenario: Scenario, rng: np.random.Generator) -> list[tuple[int, ...]]:
    lo, hi = scenario.prefix_tokens
    catalogue = []
    for k in range(scenario.shared_prefixes):
        blocks = max(1, int(rng.integers(lo, hi + 1)) // scenario.block_size)
        base = PREFIX_HASH_BASE * (k + 1)
        catalogue.append(tuple(base + i for i in range(blocks)))
    return catalogue


def _lognormal(median: int, sigma: float, normal: float) -> int:
    """`median * exp(sigma * normal)` rounded, clipped to [16, 16384] tokens."""
    tokens = round(median * math.exp(sigma * normal))
    return 16 if tokens < 16 else 16384 if tokens > 16384 else tokens


def schedule_from_requests(requests: Iterable[Request], horizon: int) -> Schedule:
    """A schedule from ready-made requests (traces, tests), sorted by arrival step."""
    ordered = tuple(sorted(requests, key=lambda r: r.arrival_step))
    return Schedule(requests=ordered, horizon=horizon)
