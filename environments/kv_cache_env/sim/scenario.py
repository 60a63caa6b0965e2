"""Scenario configuration: the frozen, documented parameters of one family of episodes.

A `Scenario` says how requests arrive and how big they are, how the engine behaves, and how tight
memory is. It holds no state; a `Simulator(scenario, seed)` draws one concrete episode from it.
The built-in tiers follow seed 003 (easy / medium / hard); `seed-compatible` reproduces the seed's
128-token pages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .types import BlockType, Quantization

FallbackPolicy = Literal["vllm", "trtllm"]


@dataclass(frozen=True)
class RequestProfile:
    """Length and priority distribution of the requests of one block type.

    Lengths are log-normal: `median * exp(sigma * N(0, 1))`, clipped to [16, 16384] tokens.
    """

    prompt_median: int
    """Median prompt length in tokens (the private part; a shared prefix comes on top)."""
    prompt_sigma: float
    output_median: int
    """Median number of tokens the request generates before it completes."""
    output_sigma: float
    priority: tuple[float, float]
    """Uniform range of the request's priority (0-1, higher = more important)."""
    reasoning_fraction: float = 0.0
    """Share of the output spent in the `reasoning` phase before the answer is decoded."""


# Defaults per block type, shaped after agentic serving workloads (NVIDIA Dynamo's agentic-
# inference categories): system-heavy agent sessions carry long prompts, chat context is long
# and reused, reasoning traces are long outputs nobody reads again, sub-agent calls are short.
DEFAULT_PROFILES: tuple[tuple[BlockType, RequestProfile], ...] = (
    (BlockType.SYSTEM, RequestProfile(1200, 0.5, 200, 0.6, (0.7, 1.0))),
    (BlockType.CONTEXT, RequestProfile(1600, 0.6, 240, 0.6, (0.3, 0.9))),
    (BlockType.GENERATION, RequestProfile(500, 0.6, 320, 0.6, (0.2, 0.9))),
    (BlockType.REASONING, RequestProfile(400, 0.5, 700, 0.5, (0.2, 0.8), reasoning_fraction=0.75)),
    (BlockType.EPHEMERAL, RequestProfile(350, 0.6, 90, 0.6, (0.0, 0.4))),
)


@dataclass(frozen=True)
class Scenario:
    """One family of episodes. Every field is documented with its unit and its source."""

    name: str
    # --- episode -----------------------------------------------------------------------------
    steps: int = 15
    """Agent turns per episode (seed 003 default). One turn = one engine step."""
    warmup_steps: int = 10
    """Engine-only steps run before the first turn, so the agent meets a server in steady state.
    Nothing that happens in them is scored."""
    step_seconds: float = 1.0
    """Engine time one step stands for."""
    # --- memory ------------------------------------------------------------------------------
    block_size: int = 16
    """Tokens per fp16 KV block (vLLM's default page size)."""
    budget_fraction: tuple[float, float] = (0.9, 1.0)
    """GPU capacity as a fraction of the peak blocks an unconstrained engine needs over the same
    episode, drawn uniformly per episode (seed 003's tiers)."""
    cpu_capacity_fraction: float = 0.5
    """CPU swap space in blocks, as a fraction of GPU capacity."""
    # --- arrivals ----------------------------------------------------------------------------
    arrival_rate: tuple[float, float] = (0.8, 1.6)
    """Mean arrivals per second (Poisson), the rate drawn uniformly per episode."""
    burst_probability: float = 0.0
    """Chance that a step is a burst step."""
    burst_multiplier: float = 3.0
    """Arrival-rate multiplier on burst steps."""
    type_mix: tuple[tuple[BlockType, float], ...] = (
        (BlockType.SYSTEM, 0.10),
        (BlockType.CONTEXT, 0.35),
        (BlockType.GENERATION, 0.35),
        (BlockType.REASONING, 0.10),
        (BlockType.EPHEMERAL, 0.10),
    )
    """Share of each block type among arrivals (weights, normalised)."""
    profiles: tuple[tuple[BlockType, RequestProfile], ...] = DEFAULT_PROFILES
    shared_prefixes: int = 4
    """Distinct shared prefixes (system prompts) in the episode; popularity is Zipf(1)."""
    prefix_tokens: tuple[int, int] = (256, 1024)
    """Uniform range of a shared prefix's length, rounded down to whole blocks."""
    shared_prefix_probability: float = 0.7
    """Chance that a request starts with a shared prefix (system-type requests always do)."""
    # --- engine ------------------------------------------------------------------------------
    decode_tokens_per_s: tuple[int, int] = (30, 60)
    """Uniform range of one sequence's decode speed (token_gen_rate), fixed per request."""
    prefill_tokens_per_s: int = 8192
    """Prefill token budget per second shared by all prefilling sequences, first admitted first
    (vLLM's max_num_batched_tokens)."""
    max_wait_steps: int = 5
    """A waiting request that has waited more than this many steps fails (seed 003)."""
    fallback: FallbackPolicy = "vllm"
    """Engine's own preemption when growth does not fit: `vllm` preempts the newest running
    sequence; `trtllm` prioritized LRU (retention system 100, rest 35; least recent, then
    newest)."""
    # --- quantization ------------------------------------------------------------------------
    quantization_loss: tuple[float, float] = (0.02, 0.10)
    """Quality lost per token generated from an int8 / int4 cache, for a sequence of sensitivity
    1: the token counts (1 - loss x sensitivity) toward throughput. int8 KV is reported near-
    lossless (KIVI, KVQuant, vLLM's fp8 KV cache: ~1% or less); 4-bit mostly preserved but with
    losses of several points on long-context retrieval and long reasoning."""
    quantization_sensitivity: tuple[tuple[BlockType, float], ...] = (
        (BlockType.SYSTEM, 1.5),
        (BlockType.CONTEXT, 1.0),
        (BlockType.GENERATION, 1.0),
        (BlockType.REASONING, 2.0),
        (BlockType.EPHEMERAL, 0.5),
    )
    """How strongly quantization hurts each block type: instructions (system) and long reasoning
    chains, where an early error compounds, suffer most; throw-away sub-agent output least."""
    # --- swap --------------------------------------------------------------------------------
    swap_overhead_s: float = 0.1
    """Fixed latency per swap-in (the low end of seed 003's 0.1-0.3)."""
    bytes_per_token: int = 131072
    """fp16 KV bytes per token: Llama-3-8B = 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 B."""
    pcie_bytes_per_s: float = 25e9
    """Effective host-device bandwidth (PCIe Gen4 x16)."""
    max_prompt_tokens: int = 16384
    """Upper clip of a synthetic prompt's private part, in tokens."""

    def __post_init__(self) -> None:
        checks = [
            (self.steps >= 1, "steps must be >= 1"),
            (self.warmup_steps >= 0, "warmup_steps must be >= 0"),
            (self.step_seconds > 0, "step_seconds must be > 0"),
            (self.block_size >= 1, "block_size must be >= 1"),
            (0 < self.budget_fraction[0] <= self.budget_fraction[1], "budget_fraction: 0<lo<=hi"),
            (self.cpu_capacity_fraction >= 0, "cpu_capacity_fraction must be >= 0"),
            (0 <= self.arrival_rate[0] <= self.arrival_rate[1], "arrival_rate: 0 <= lo <= hi"),
            (0 <= self.burst_probability <= 1, "burst_probability must be in [0, 1]"),
            (self.burst_multiplier >= 1, "burst_multiplier must be >= 1"),
            (sum(w for _, w in self.type_mix) > 0, "type_mix weights must sum to > 0"),
            (0 < self.decode_tokens_per_s[0] <= self.decode_tokens_per_s[1], "decode range"),
            (self.prefill_tokens_per_s >= 1, "prefill_tokens_per_s must be >= 1"),
            (self.max_wait_steps >= 0, "max_wait_steps must be >= 0"),
            (self.fallback in ("vllm", "trtllm"), "fallback must be 'vllm' or 'trtllm'"),
            (all(0 <= q <= 1 for q in self.quantization_loss), "quantization_loss in [0, 1]"),
            (all(w >= 0 for _, w in self.quantization_sensitivity), "sensitivity >= 0"),
            (self.pcie_bytes_per_s > 0, "pcie_bytes_per_s must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"scenario {self.name!r}: {message}")

    def profile(self, block_type: BlockType) -> RequestProfile:
        return dict(self.profiles)[block_type]

    def quality(self, level: Quantization, block_type: BlockType) -> float:
        """What one token generated by a `block_type` sequence stored at `level` is worth."""
        if level is Quantization.FP16:
            return 1.0
        loss = self.quantization_loss[0 if level is Quantization.INT8 else 1]
        return max(0.0, 1.0 - loss * dict(self.quantization_sensitivity)[block_type])

    @property
    def decode_tokens_per_step(self) -> tuple[int, int]:
        lo, hi = self.decode_tokens_per_s
        return max(1, round(lo * self.step_seconds)), max(1, round(hi * self.step_seconds))

    @property
    def prefill_tokens_per_step(self) -> int:
        return max(1, round(self.prefill_tokens_per_s * self.step_seconds))

    def with_options(self, **changes: object) -> Scenario:
        """A copy with some fields changed (validated like any scenario)."""
        return replace(self, **changes)  # type: ignore[arg-type]


EASY = Scenario(name="easy")

MEDIUM = Scenario(
    name="medium",
    budget_fraction=(0.75, 0.90),
    arrival_rate=(1.6, 2.4),
    burst_probability=0.1,
    burst_multiplier=2.0,
    type_mix=(
        (BlockType.SYSTEM, 0.10),
        (BlockType.CONTEXT, 0.30),
        (BlockType.GENERATION, 0.30),
        (BlockType.REASONING, 0.15),
        (BlockType.EPHEMERAL, 0.15),
    ),
)

HARD = Scenario(
    name="hard",
    budget_fraction=(0.65, 0.80),
    arrival_rate=(2.4, 3.2),
    burst_probability=0.25,
    burst_multiplier=3.0,
    type_mix=(
        (BlockType.SYSTEM, 0.08),
        (BlockType.CONTEXT, 0.25),
        (BlockType.GENERATION, 0.25),
        (BlockType.REASONING, 0.22),
        (BlockType.EPHEMERAL, 0.20),
    ),
)

# Seed 003's own geometry: 128-token pages (its memory_cost(page_size=128)).
SEED_COMPATIBLE = MEDIUM.with_options(name="seed-compatible", block_size=128)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (EASY, MEDIUM, HARD, SEED_COMPATIBLE)}
TIERS: tuple[str, ...] = ("easy", "medium", "hard")


def get_scenario(name: str) -> Scenario:
    """The built-in scenario called `name`; a clear error lists the known ones."""
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join(sorted(SCENARIOS))
        raise ValueError(f"unknown scenario {name!r}; known scenarios: {known}") from None
