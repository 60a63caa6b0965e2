"""A request's mutable state while the engine serves it: the original design's `CacheEntry`, and
more.

Every `CacheEntry` field of the original design is here (stored, or derived as a property so it can
never disagree with the state it describes) but `hotness`, an exponential average of "accessed this
step": nothing read it (the observation shows `last_access`; policies, features and the rubric
never used it), and keeping it cost an update of every running and paused sequence every step.
Fields marked "engine" should only be changed by the engine: what it holds on the GPU
(`gpu_blocks`, `prefix_held`, `quantization_level`) by `KVCacheManager`, where its KV stands on
the host side (`cpu_blocks`, `outbound`, `inbound`) by `HostLink`, the rest by `Scheduler`;
everyone else reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .vocabulary import BlockType, PauseKind, Phase, Quantization, Status
from .workload import Request


@dataclass(slots=True, eq=False)
class Sequence:
    request: Request
    private_prompt: int
    """Prompt tokens past the shared prefix blocks (they live in private blocks), follow-up
    calls' prompts included once they arrived."""
    wait_since: int
    """Engine step since which its client has been waiting: its arrival, or the last step it
    emitted a token before a preemption. engine"""
    not_before: int
    """Earliest engine step it may be (re)admitted or swapped back in. engine"""
    status: Status = Status.WAITING
    quantization_level: Quantization = Quantization.FP16
    generated: int = 0
    """Output tokens generated so far over all calls (kept across preemptions: recompute
    restores them)."""
    prefill_remaining: int = 0
    """Context tokens still to (re)compute before decoding; 0 once decoding. engine"""
    prefix_tokens: int = 0
    """Prompt tokens held in shared prefix blocks (the rest of the prompt is private)."""
    call: int = 0
    """Index of the current call (0 = the first; `request.followups[call - 1]` the latest)."""
    call_end: int = -1
    """Value of `generated` at which the current call completes (set from the request). engine"""
    resume_step: int = -1
    """Engine step at which a paused session's next call arrives. Hidden from the agent. engine"""
    paused_since: int = -1
    """Engine step from which it has been paused (-1 when not paused). engine"""
    first_token_by: int = -1
    """For a resumed call: the step by which its first token must come (-1: none pending). Its
    client waits from the return on: queueing, loading and recomputing all count. engine"""
    gpu_blocks: int = 0
    """Private physical blocks on the GPU at `quantization_level`. engine"""
    cpu_blocks: int = 0
    """Private physical blocks swapped out to CPU (reserved when an offload starts, let go
    when a load completes). engine"""
    outbound: int = 0
    """GPU blocks still to be copied out over the host link by an offload in progress (they
    stay allocated until then). engine"""
    inbound: int = 0
    """Blocks still to be loaded over the host link before the sequence can compute. engine"""
    prefix_held: int = 0
    """How many leading blocks of `request.prefix_hashes` it references (all, or 0). engine"""
    last_access_step: int = -1
    """Last engine step its KV was read (prefill or decode)."""
    token_step: int = -1
    """Last engine step it emitted an output token (what its streaming client last saw). engine"""
    admitted_order: int = -1
    """Admission counter value at its last admission (larger = newer). engine"""
    preemptions: int = 0
    """Times it was evicted, by the agent or the engine."""
    pauses_done: int = 0
    """Pauses of this session that have ended on tools lasting more than a step (its visible
    history, `catalogue.informative`). engine"""
    log_ratio_sum: float = 0.0
    """Sum over those pauses of log(pause / its tool's median) (`catalogue.log_ratio`). engine"""
    # --- what its client saw (`record.ServingRecord`; steps of the engine clock, where step k
    # spans [k, k + 1): an arrival comes at the end of its step, a return at the start of its
    # step, a prefill's token at the end of its step, decode tokens at its pace from the start)
    first_token_wait: float = -1.0
    """Steps from its arrival to its first token (-1 until that comes). engine"""
    resumed_waits: tuple[float, ...] = ()
    """Steps from each resumed call's return to that call's first token, in order. engine"""
    stalls: tuple[float, ...] = ()
    """Gaps between two tokens of one call longer than its decode pace, in steps: where it was
    preempted, offloaded or left waiting. engine"""
    lost_tokens: int = 0
    """Leading context tokens whose KV was discarded and is not yet recomputed (0: none). engine"""

    total_output: int = field(init=False, default=0)
    """`request.total_output`, read once: `progress` is read for every resident sequence on
    every turn, and the request's property sums its follow-up calls each time."""

    def __post_init__(self) -> None:
        if self.call_end < 0:
            self.call_end = self.request.output_tokens
        self.total_output = self.request.total_output

    @classmethod
    def arriving(
        cls,
        request: Request,
        private_prompt: int,
        step: int,
        quantization_level: Quantization,
        prefix_tokens: int,
    ) -> Sequence:
        """A request arriving at engine step `step` (it waits, admissible from the next step):
        `Sequence(request, private_prompt, wait_since=step, not_before=step + 1, ...)` with its
        fields set one by one, which saves the generated `__init__`'s keyword handling (one
        sequence per request, twice per reset with the reference run)."""
        new = _new(cls)
        new.request = request
        new.private_prompt = private_prompt
        new.wait_since = step
        new.not_before = step + 1
        new.status = Status.WAITING
        new.quantization_level = quantization_level
        new.generated = 0
        new.prefill_remaining = 0
        new.prefix_tokens = prefix_tokens
        new.call = 0
        new.call_end = request.output_tokens
        new.resume_step = -1
        new.paused_since = -1
        new.first_token_by = -1
        new.gpu_blocks = 0
        new.cpu_blocks = 0
        new.outbound = 0
        new.inbound = 0
        new.prefix_held = 0
        new.last_access_step = -1
        new.token_step = -1
        new.admitted_order = -1
        new.preemptions = 0
        new.pauses_done = 0
        new.log_ratio_sum = 0.0
        new.first_token_wait = -1.0
        new.resumed_waits = ()
        new.stalls = ()
        new.lost_tokens = 0
        new.total_output = request.total_output
        return new

    def copy(self) -> Sequence:
        """An independent copy (`Scheduler.clone`, which the bound calls for every rollout): its
        fields set one by one, which saves the generated `__init__`'s keyword handling and
        `__post_init__`'s sum over the follow-up calls (~2/3 of a copy)."""
        new = _new(Sequence)
        new.request = self.request
        new.private_prompt = self.private_prompt
        new.wait_since = self.wait_since
        new.not_before = self.not_before
        new.status = self.status
        new.quantization_level = self.quantization_level
        new.generated = self.generated
        new.prefill_remaining = self.prefill_remaining
        new.prefix_tokens = self.prefix_tokens
        new.call = self.call
        new.call_end = self.call_end
        new.resume_step = self.resume_step
        new.paused_since = self.paused_since
        new.first_token_by = self.first_token_by
        new.gpu_blocks = self.gpu_blocks
        new.cpu_blocks = self.cpu_blocks
        new.outbound = self.outbound
        new.inbound = self.inbound
        new.prefix_held = self.prefix_held
        new.last_access_step = self.last_access_step
        new.token_step = self.token_step
        new.admitted_order = self.admitted_order
        new.preemptions = self.preemptions
        new.pauses_done = self.pauses_done
        new.log_ratio_sum = self.log_ratio_sum
        new.first_token_wait = self.first_token_wait
        new.resumed_waits = self.resumed_waits
        new.stalls = self.stalls
        new.lost_tokens = self.lost_tokens
        new.total_output = self.total_output
        return new

    # --- the original design's CacheEntry fields, derived from the request and the state -----
    @property
    def seq_id(self) -> str:
        return self.request.seq_id

    @property
    def block_type(self) -> BlockType:
        return self.request.block_type

    @property
    def priority(self) -> float:
        return self.request.priority

    @property
    def token_gen_rate(self) -> float:
        return float(self.request.decode_rate)

    @property
    def shared_prefix_id(self) -> str | None:
        return self.request.shared_prefix_id

    @property
    def sequence_length(self) -> int:
        """Full length the sequence reaches when complete: prompt + output."""
        return self.request.prompt_tokens + self.request.output_tokens

    @property
    def tokens_cached(self) -> int:
        """Tokens whose KV is held (GPU or CPU)."""
        if self.status in _HOLDING or self.cpu_blocks:
            return self.context_tokens - self.prefill_remaining
        return 0

    @property
    def context_tokens(self) -> int:
        """Tokens of the whole context so far: shared prefix, prompts, generated output."""
        return self.prefix_tokens + self.private_prompt + self.generated

    @property
    def pause(self) -> PauseKind | None:
        """Kind of the interception a paused session waits on (None when not paused)."""
        if self.status in BETWEEN_CALLS:
            return self.request.followups[self.call].pause
        return None

    @property
    def is_compressed(self) -> bool:
        return self.quantization_level is not Quantization.FP16

    @property
    def is_swapped(self) -> bool:
        return self.status is Status.SWAPPED

    # --- what the action table's validity rule reads (`actions.Target`), as `EntryView` ------
    @property
    def swapped(self) -> bool:
        """Its KV is on CPU (an offloaded paused session)."""
        return self.status is Status.SWAPPED

    @property
    def moving(self) -> int:
        """Blocks still to cross the host link for it (out to CPU, or loading back)."""
        return self.outbound + self.inbound

    @property
    def quantization(self) -> Quantization:
        return self.quantization_level

    @property
    def private_blocks(self) -> int:
        """Its own physical blocks (on CPU when swapped)."""
        return self.cpu_blocks if self.status is Status.SWAPPED else self.gpu_blocks

    @property
    def phase(self) -> Phase:
        if self.status is not Status.RUNNING:
            return Phase.IDLE
        if self.prefill_remaining:
            return Phase.PREFILL
        if self.generated < self.request.reasoning_tokens:
            return Phase.REASONING
        return Phase.DECODE

    # --- accounting helpers ------------------------------------------------------------------
    @property
    def progress(self) -> float:
        """Generated / target output tokens over all calls (the original design's "progress" in
        risky eviction)."""
        return self.generated / self.total_output

    @property
    def private_tokens(self) -> int:
        """Context tokens past the shared prefix blocks (they live in private blocks)."""
        return self.private_prompt + self.generated

    @property
    def kv_private(self) -> int:
        """Private tokens whose KV exists (computed, or loaded): those still to prefill have
        none yet. Prefill computes the shared prefix first, so while more than the private
        tokens remain, no private KV exists."""
        private = self.private_prompt + self.generated
        return private - min(self.prefill_remaining, private)

    @property
    def call_output(self) -> int:
        """Tokens its current call generates (hidden; its `max_tokens` bounds it)."""
        if self.call == 0:
            return self.request.output_tokens
        return self.request.followups[self.call - 1].output_tokens

    @property
    def has_more_calls(self) -> bool:
        return self.call < len(self.request.followups)

    @property
    def calls_answered(self) -> int:
        """Calls whose first token has come."""
        return (self.first_token_wait >= 0) + len(self.resumed_waits)


_new = object.__new__
_HOLDING = (Status.RUNNING, Status.PAUSED, Status.SWAPPED)
BETWEEN_CALLS = (Status.PAUSED, Status.SWAPPED, Status.DISCARDED)
"""A session whose current call has completed and whose next has not begun (paused on the GPU,
offloaded, or with its KV discarded)."""
