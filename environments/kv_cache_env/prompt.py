"""The system prompt that tells a model how the game works (and the per-turn user message)."""

from __future__ import annotations

from .sim import BlockType, Observation, Quantization, Scenario, StepStats, render

SYSTEM_PROMPT = """\
You manage the KV-cache of an LLM inference server for {turns} turns. GPU memory is split into \
blocks of {block_size} tokens. Requests arrive, are admitted first-come-first-served while \
blocks allow, prefill their prompt, then decode tokens every step until done. A request that \
waits in the queue more than {max_wait} steps FAILS; failures cost the most.

Every turn you get an observation, then you act. Batch EVERY action for this turn into ONE reply: \
you may call several tools at once (e.g. compress two sequences and evict a third). All tool \
calls of a reply are applied in order, their results are returned, then the server advances one \
step and the next observation follows. A reply with no tool call means noop. One reply = one \
step; you cannot act again until the next observation.

Tools:
- compress(seq_id): quantize one level (fp16 -> int8 -> int4), halving its private blocks each \
time. Tokens it then generates count less toward throughput: {quality}.
- evict(seq_id): free all its blocks now; it returns to the queue front, recomputes its whole \
context later, and fails if it then waits too long. Evicting system, high-priority context or \
nearly finished high-priority generation is penalised.
- swap(seq_id): move its private blocks to CPU; it stops until swapped back in automatically \
(not this step); no new request is admitted while anything is swapped out; swap-ins add latency.
- noop(): nothing.

Observation format:
  header: turn t/T | block size | gpu used/capacity blocks, usage %, cached (reusable prefix \
blocks, free to reclaim), free | cpu swap used/capacity | queue: waiting requests, oldest wait \
(steps) / limit, blocks the head needs, blocks the whole queue needs, how many were preempted
  table, one row per sequence holding blocks, largest GPU footprint first:
    seq type phase prio kv tokens rate priv shared frees prog last loc
    seq=id, type=system|context|generation|reasoning|ephemeral, phase=prefill|decode|\
reasoning|idle, prio=priority 0-1, kv=fp16|int8|int4, tokens=tokens cached, rate=tokens per \
step, priv=its own blocks, shared=shared prefix blocks, frees=GPU blocks evicting it frees now, \
prog=generated/target, last=turn last accessed, loc=gpu|cpu
  candidates: sequences cheapest to evict, with a 0-1 score (when shown)

Score: avoid failures first; then throughput (tokens generated, quality-weighted); then keep \
usage below 80% every turn (95%+ is pressure); then keep memory productive, keep high-value \
blocks (system > context > generation > reasoning > ephemeral), avoid swap latency and risky \
evictions. Act before memory runs out: when growth does not fit, the engine preempts the newest \
sequence by itself, and that counts against you."""


def system_prompt(scenario: Scenario) -> str:
    quality = "; ".join(
        f"{block_type} int8 {scenario.quality(Quantization.INT8, block_type):.0%} / "
        f"int4 {scenario.quality(Quantization.INT4, block_type):.0%}"
        for block_type in BlockType
    )
    return SYSTEM_PROMPT.format(
        turns=scenario.steps,
        block_size=scenario.block_size,
        max_wait=scenario.max_wait_steps,
        quality=quality,
    )


def turn_message(obs: Observation, last_step: StepStats | None = None) -> str:
    """The user message of a turn: what the last step did, then the observation."""
    text = render(obs)
    if last_step is None:
        return text
    summary = (
        f"step done: {last_step.tokens} tokens generated, {last_step.completed} completed, "
        f"{last_step.failures} failed, {last_step.forced_preemptions} forced preemptions"
    )
    return f"{summary}\n{text}"
