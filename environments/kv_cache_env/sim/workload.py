"""Arrival schedules: the requests of one episode, fixed before the first step.

A `Schedule` is drawn once at reset (synthetically from a `Scenario`, or from a trace) and never
depends on the agent's actions, so every policy faces the same future. Requests are immutable;
the engine keeps each request's mutable state in a `Sequence`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from . import catalogue
from .frozen import slot_constructor
from .scenario import Scenario
from .vocabulary import BlockType, PauseKind

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
    """Tokens generated per step while decoding (the original design's token_gen_rate)."""
    prefix_hashes: tuple[int, ...] = ()
    """Content hashes of the prompt's leading shareable blocks, in order (a hash chain)."""
    shared_prefix_id: str | None = None
    reasoning_tokens: int = 0
    """The first `reasoning_tokens` outputs are decoded in the `reasoning` phase."""
    followups: tuple[FollowUp, ...] = ()
    """Further calls of the session, in order (empty: a single call). `output_tokens` and
    `prompt_tokens` describe the first call."""
    plan: int = -1
    """What the session's plan shows for its further calls when it starts (`catalogue.
    plan_estimate` of `len(followups)`; -1: no plan is known, as in trace replays)."""
    pace: float = 1.0
    """The session's hidden pace: every pause is its tool's median x pace x per-call noise."""

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
                followups=sessions[i].followups if i in sessions else (),
                plan=sessions[i].plan if i in sessions else 0,
                pace=sessions[i].pace if i in sessions else 1.0,
            )
        )
    return Schedule(requests=tuple(requests), horizon=horizon)


@dataclass(frozen=True, slots=True)
class SessionDraw:
    """A session's further calls, what its plan shows, and its hidden pace."""

    followups: tuple[FollowUp, ...]
    plan: int
    pace: float


def draw_sessions(
    scenario: Scenario, block_types: list[BlockType], rng: np.random.Generator
) -> dict[int, SessionDraw]:
    """Which of the requests (by index, given their block types) are sessions, and their
    further calls: each is a session with the scenario's probability for its type, with a
    uniform number of further calls; a chat (`chat_types`) pauses for its human every time, an
    agent for a tool drawn per call from `tool_mix`; pause lengths follow the published signal
    table (`catalogue`): the tool's median x the session's pace x per-call noise."""
    n = len(block_types)
    session_p = dict(scenario.session_probability)
    draw = rng.random(n).tolist()  # Python numbers: see `synthesize`
    counts = rng.integers(scenario.followups[0], scenario.followups[1] + 1, size=n).tolist()
    tools = [k for k, _ in scenario.tool_mix]
    weights = np.array([w for _, w in scenario.tool_mix], dtype=float)
    weights /= weights.sum()
    chats = frozenset(scenario.chat_types)
    out: dict[int, SessionDraw] = {}
    for i, block_type in enumerate(block_types):
        if draw[i] < session_p.get(block_type, 0.0):
            count = counts[i]
            pace_normal, plan_normal = rng.standard_normal(2).tolist()
            if block_type in chats:
                kinds = [PauseKind.HUMAN] * count
            else:
                kinds = [tools[k] for k in rng.choice(len(tools), size=count, p=weights).tolist()]
            pace = math.exp(catalogue.PACE_SIGMA * pace_normal)
            follow = draw_followups(scenario, kinds, pace, rng)
            out[i] = SessionDraw(follow, catalogue.plan_estimate(count, plan_normal), pace)
    return out


def draw_followups(
    scenario: Scenario, kinds: list[PauseKind], pace: float, rng: np.random.Generator
) -> tuple[FollowUp, ...]:
    """One further call per entry of `kinds` for a session of `pace`: each pause lasts its
    tool's median x pace x exp(CALL_SIGMA N(0, 1)) (`catalogue.pause_steps`), then appends the
    tool's output (log-normal around its `prompt_median`, spread 0.5) and generates a log-normal
    output around its `output_median` (spread 0.5)."""
    normals = rng.standard_normal(3 * len(kinds)).tolist()
    step_seconds = scenario.step_seconds
    out = []
    for j, kind in enumerate(kinds):
        profile = catalogue.CATALOGUE[kind]
        out.append(
            make_followup(
                kind,
                catalogue.pause_steps(kind, pace, normals[3 * j], step_seconds),
                _lognormal(profile.prompt_median, 0.5, normals[3 * j + 1]),
                _lognormal(profile.output_median, 0.5, normals[3 * j + 2]),
            )
        )
    return tuple(out)


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
