"""Scenario configuration: the frozen, documented parameters of one family of episodes.

A `Scenario` says how requests arrive and how big they are, how the engine behaves, and how tight
memory is. It holds no state; a `Simulator(scenario, seed)` draws one concrete episode from it.
The built-in tiers are easy / medium / hard; `medium-128` is `medium` with the 128-token pages of
the original design (`memory_cost(page_size=128)`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .vocabulary import BlockType, PauseKind, Quantization

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
    """Agent turns per episode (the original design's default). One turn = one engine step."""
    warmup_steps: int = 10
    """Engine-only steps run before the first turn, so the agent meets a server in steady state.
    Nothing that happens in them is scored."""
    step_seconds: float = 1.0
    """Engine time one step stands for."""
    # --- memory ------------------------------------------------------------------------------
    block_size: int = 16
    """Tokens per fp16 KV block (vLLM's default page size)."""
    prefix_hash_blocks: int = 1
    """Engine blocks one prefix hash stands for. Synthetic prefixes hash every block (1); a
    Mooncake replay keeps the trace's 512-token hash blocks as units of 512 / `block_size`
    blocks, stored, hit, shared and reclaimed together (vLLM hashes each block, but blocks of
    one hash block are always touched together, so only reclaim order within a unit differs,
    and a trace replay stays 32x cheaper)."""
    budget_fraction: tuple[float, float] = (0.9, 1.0)
    """GPU capacity as a fraction of the peak blocks an unconstrained engine needs over the same
    episode, drawn uniformly per episode (the original design's tiers)."""
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
    # --- sessions ----------------------------------------------------------------------------
    session_probability: tuple[tuple[BlockType, float], ...] = (
        (BlockType.SYSTEM, 0.6),
        (BlockType.CONTEXT, 0.6),
    )
    """Chance that a request of that block type is a session of several calls (agents run
    under a system prompt, chats carry context); other types are single calls."""
    followups: tuple[int, int] = (1, 4)
    """Uniform range of further calls a session makes after its first (InferCept: 3-28
    interceptions per augmented request; fewer here, since an episode is short)."""
    tool_mix: tuple[tuple[PauseKind, float], ...] = (
        (PauseKind.CALCULATOR, 0.25),
        (PauseKind.SEARCH, 0.35),
        (PauseKind.ENV, 0.2),
        (PauseKind.TTS, 0.1),
        (PauseKind.IMAGE, 0.1),
    )
    """Tools an agent session's calls wait on (weights, normalised; drawn per call from the
    catalogue, `catalogue.CATALOGUE`). A chat session (`chat_types`) waits on its human."""
    chat_types: tuple[BlockType, ...] = (BlockType.CONTEXT,)
    """Block types whose sessions are chats: every pause is the user's next message (`human`)."""
    # --- engine ------------------------------------------------------------------------------
    decode_tokens_per_s: tuple[int, int] = (30, 60)
    """Uniform range of one sequence's decode speed (token_gen_rate), fixed per request."""
    prefill_tokens_per_s: int = 8192
    """Prefill token budget per second shared by all prefilling sequences, first admitted first
    (vLLM's max_num_batched_tokens)."""
    max_wait_steps: int = 5
    """A waiting request that has waited more than this many steps fails (the original design)."""
    fallback: FallbackPolicy = "vllm"
    """Engine's own preemption when growth does not fit: `vllm` preempts the newest running
    sequence; `trtllm` prioritized LRU (retention system 100, rest 35; least recent, then
    newest)."""
    # --- quantization ------------------------------------------------------------------------
    base_quantization: Quantization = Quantization.FP16
    """Precision the deployment stores KV at (vLLM `kv_cache_dtype`: `auto` = fp16, `fp8` ~
    int8 here). Compression starts from it; tokens generated at it count fully."""
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
    """Fixed latency per swap-in (the low end of the original design's 0.1-0.3)."""
    bytes_per_token: int = 131072
    """fp16 KV bytes per token: Llama-3-8B = 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 B."""
    pcie_bytes_per_s: float = 25e9
    """Effective host-device bandwidth (PCIe Gen4 x16); sets each load's latency."""
    link_fraction_per_s: float = 0.0
    """What the host link moves per second, swap-outs and loads together, as a fraction of the
    GPU's KV capacity (0: no limit, every move is instant). The simulated server is a scaled
    model of a real one, so the link scales with its memory: bandwidth / KV bytes on the GPU.
    An H100 80 GB serving Llama-3-8B holds ~55 GB of KV (vLLM's 0.9 memory utilization, 16 GB
    of weights, activations); PCIe Gen5 x16 (~50 GB/s effective) moves ~0.9 of it a second,
    Gen4 x16 (~25 GB/s) ~0.45, a KV store across 25 GbE (~3 GB/s, LMCache's remote backend)
    ~0.05."""
    max_prompt_tokens: int = 16384
    """Upper clip of a synthetic prompt's private part, in tokens."""
    drain_cap_steps: int = 2000
    """Safety cap of the drain (`drain_cap`): far above what serving the longest possible
    output (16,384 tokens at the slowest decode speed) after the longest pause takes."""

    def __post_init__(self) -> None:
        checks = [
            (self.steps >= 1, "steps must be >= 1"),
            (self.warmup_steps >= 0, "warmup_steps must be >= 0"),
            (self.step_seconds > 0, "step_seconds must be > 0"),
            (self.block_size >= 1, "block_size must be >= 1"),
            (self.prefix_hash_blocks >= 1, "prefix_hash_blocks must be >= 1"),
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
            (self.link_fraction_per_s >= 0, "link_fraction_per_s must be >= 0"),
            (all(0 <= p <= 1 for _, p in self.session_probability), "session probability"),
            (0 <= self.followups[0] <= self.followups[1], "followups: 0 <= lo <= hi"),
            (sum(w for _, w in self.tool_mix) > 0, "tool_mix weights must sum to > 0"),
            (self.base_quantization is not Quantization.INT4, "base_quantization: fp16 or int8"),
            (self.drain_cap_steps >= 1, "drain_cap_steps must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"scenario {self.name!r}: {message}")

    def profile(self, block_type: BlockType) -> RequestProfile:
        return dict(self.profiles)[block_type]

    def pause_steps(self, seconds: float) -> int:
        """Steps a pause of `seconds` lasts (at least one)."""
        return max(1, round(seconds / self.step_seconds))

    @property
    def drain_cap(self) -> int:
        """Safety cap of the agent-free drain that ends every episode, in steps. The drain runs
        until every request has completed or failed by its own deadline; this cap only stops a
        runaway engine (a bug), never a suite episode (tested), and a record that reaches it
        says so (`EpisodeRecord.drain_capped`)."""
        return self.drain_cap_steps

    def quality(self, level: Quantization, block_type: BlockType) -> float:
        """What one token generated by a `block_type` sequence stored at `level` is worth
        (1 at the deployment's own precision or above)."""
        if level.packing <= self.base_quantization.packing:
            return 1.0
        loss = self.quantization_loss[0 if level is Quantization.INT8 else 1]
        return max(0.0, 1.0 - loss * dict(self.quantization_sensitivity)[block_type])

    def link_blocks(self, capacity: int) -> int:
        """Blocks the host link moves per step on a GPU of `capacity` blocks (0: no limit)."""
        if not self.link_fraction_per_s:
            return 0
        return max(1, round(self.link_fraction_per_s * self.step_seconds * capacity))

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

# --- the fp8 deployment and the sessions that the suite's scenarios share ---
# The named regimes are served with an fp8 KV cache (vLLM `kv_cache_dtype="fp8"`, TensorRT-LLM
# and SGLang fp8 KV: near-lossless and the common throughput setting on Hopper GPUs), shown here
# as int8: compression has one level left, int4, which costs several points on long-context
# retrieval and long reasoning (KIVI, arXiv 2402.02750; KVQuant, arXiv 2401.18079): 15% for a
# sensitivity-1 sequence (the original design's range runs 2-10%; with fp16 deployments, compressing
# everything to int4 wins every regime, as the v1 audit showed).
_FP8 = {"base_quantization": Quantization.INT8, "quantization_loss": (0.0, 0.15)}
_SESSIONS = (
    (BlockType.SYSTEM, 0.9),
    (BlockType.CONTEXT, 0.9),
    (BlockType.GENERATION, 0.5),
)
# The original design's medium tier: an fp16 KV cache, single-call requests. It stays as
# `medium-128`'s base (that design's geometry); the suite's medium is served in fp8.
_MEDIUM_FP16 = Scenario(
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

# Suite v3's tiers are served in fp8 like the named regimes (with an fp16 cache, compressing
# everything one level, `int8-everything`, reached 0.97-0.99 of the range on medium and hard:
# on tuning seeds 700000+ one line won both tiers). medium also gets the regimes' sessions
# (agents and chats that pause between calls): on 10 tuning seeds fp8 alone left compress-all
# at 0.89 of the range; with sessions the best fixed rule fell to 0.55-0.80 (range 0.10-0.19).
MEDIUM = _MEDIUM_FP16.with_options(
    session_probability=_SESSIONS,
    followups=(2, 6),
    **_FP8,  # type: ignore[arg-type]
)

# hard: fp8 (tuning seeds 700000-700009: compress-all 0.90-0.93 of the range, no longer 0.99);
# the hard tier's tighter budget and longer pauses stay.
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
    # hard's sessions pause longer and more often, and it declares TensorRT-LLM's fallback
    # (prioritized LRU among running sequences, the TensorRT-LLM design), so that what the engine
    # cannot see - idle paused KV - is the agent's to manage.
    session_probability=(
        (BlockType.SYSTEM, 0.9),
        (BlockType.CONTEXT, 0.9),
        (BlockType.GENERATION, 0.5),
    ),
    followups=(2, 6),
    tool_mix=(
        (PauseKind.SEARCH, 0.4),
        (PauseKind.ENV, 0.2),
        (PauseKind.TTS, 0.2),
        (PauseKind.IMAGE, 0.2),
    ),
    fallback="trtllm",
    **_FP8,  # type: ignore[arg-type]
)

# Agent workloads: long system prompts and tool-augmented contexts (SWE-agent / ReAct traces run
# to several thousand tokens per call and grow with every observation; InferCept's VE and QA
# augmentations average 3-28 interceptions per request).
_AGENT_PROFILES = tuple(
    (t, RequestProfile(3000, 0.5, 200, 0.6, (0.5, 1.0)) if t is BlockType.SYSTEM else p)
    for t, p in DEFAULT_PROFILES
)

# What the named regimes share: an fp8 deployment at 0.30-0.40 of the unconstrained peak, most
# agent and chat requests sessions of 2-6 further calls, a mix of tool, long-tool and human
# pauses. Each regime changes what its comment says.
_REGIME = Scenario(
    name="regime",
    budget_fraction=(0.30, 0.40),
    arrival_rate=(1.6, 2.4),
    session_probability=_SESSIONS,
    followups=(2, 6),
    **_FP8,  # type: ignore[arg-type]
)

AGENT_TOOLS = _REGIME.with_options(
    name="agent-tools",
    arrival_rate=(1.2, 1.8),
    type_mix=(
        (BlockType.SYSTEM, 0.40),
        (BlockType.CONTEXT, 0.20),
        (BlockType.GENERATION, 0.20),
        (BlockType.REASONING, 0.10),
        (BlockType.EPHEMERAL, 0.10),
    ),
    profiles=_AGENT_PROFILES,
    followups=(3, 8),
    chat_types=(),
    # a 70B-class model on one node prefills ~4k tokens/s (vLLM's chunked-prefill budget shared
    # with decode), so recomputing a discarded agent context costs seconds
    prefill_tokens_per_s=4096,
    cpu_capacity_fraction=1.0,
)

CHAT_HUMAN = _REGIME.with_options(
    name="chat-human",
    followups=(2, 5),
    tool_mix=((PauseKind.HUMAN, 1.0),),
    # a host with a small swap space (vLLM's default `swap_space` is 4 GiB per GPU)
    cpu_capacity_fraction=0.25,
)

BIG_CPU = _REGIME.with_options(
    name="big-cpu",
    # CPU DRAM twice the KV budget behind PCIe Gen5 x16 (~64 GB/s theoretical, ~50 effective);
    # LMCache / vLLM's CPU offloading tier
    cpu_capacity_fraction=2.0,
    pcie_bytes_per_s=50e9,
)

SLOW_PREFILL = _REGIME.with_options(
    name="slow-prefill",
    # a 70B-class model: prefill ~4k tokens/s, so every recompute delays admissions
    cpu_capacity_fraction=0.5,
    prefill_tokens_per_s=4096,
)

FLASH_CROWD = _REGIME.with_options(
    name="flash-crowd",
    budget_fraction=(0.35, 0.45),
    arrival_rate=(1.2, 1.8),
    # bursts: a launch or a retry storm multiplies arrivals x4 on ~1 step in 5 (Azure's LLM
    # inference traces show minute-scale bursts of several times the mean rate)
    burst_probability=0.2,
    burst_multiplier=4.0,
)

# --- suite v3: a regime where the host link binds (value committed before the proof block) ---
# agent-tools' workload with its offload tier behind a network: a KV store on another host
# reached across 25 GbE (~3 GB/s; LMCache's remote backend, Mooncake's transfer engine over a
# commodity NIC), ~0.05 of the GPU's KV capacity a second (`link_fraction_per_s`). Offloads and
# loads queue on it, so "offload every paused session" congests it: on tuning seeds (700000+,
# 8 paired episodes) the best offloading rule fell from 0.81 to 0.34 of the range and a rule
# that discards sessions expected away long became the best fixed rule.
AGENT_REMOTE = AGENT_TOOLS.with_options(name="agent-remote", link_fraction_per_s=0.05)

# The original design's geometry: 128-token pages (its memory_cost(page_size=128)).
MEDIUM_128 = _MEDIUM_FP16.with_options(name="medium-128", block_size=128)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        EASY,
        MEDIUM,
        HARD,
        AGENT_TOOLS,
        AGENT_REMOTE,
        CHAT_HUMAN,
        BIG_CPU,
        SLOW_PREFILL,
        FLASH_CROWD,
        MEDIUM_128,
    )
}
TIERS: tuple[str, ...] = ("easy", "medium", "hard")
SUITE: tuple[str, ...] = (
    "easy",
    "medium",
    "hard",
    "agent-tools",
    "agent-remote",
    "chat-human",
    "big-cpu",
    "slow-prefill",
    "flash-crowd",
)
"""The scenarios `kvarena validate` and the default leaderboard cover (the serving suite)."""
SUITE_VERSION = "4"


SCENARIO_ALIASES: dict[str, str] = {"seed-compatible": "medium-128"}
"""Former names still accepted (results and commands written before a rename keep working)."""


def canonical_scenario_name(name: str) -> str:
    """`name`, or the current name of a scenario that was renamed."""
    return SCENARIO_ALIASES.get(name, name)


def get_scenario(name: str) -> Scenario:
    """The built-in scenario called `name` (or a former name); an error lists the known ones."""
    try:
        return SCENARIOS[canonical_scenario_name(name)]
    except KeyError:
        from ..suggest import unknown_name

        raise ValueError(unknown_name("scenario", name, SCENARIOS)) from None
