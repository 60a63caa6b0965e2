"""The system prompt that tells a model how the game works (and the per-turn user message)."""

from __future__ import annotations

from ..sim import (
    ACTIONS,
    CATALOGUE,
    BlockType,
    Observation,
    PauseKind,
    Quantization,
    Scenario,
    StepStats,
    render,
)

SYSTEM_PROMPT = """\
You manage the KV-cache of an LLM inference server for {turns} turns of {step} s each. GPU \
memory is split into blocks of {block_size} tokens (KV stored at {base} by default). Requests \
arrive, wait in a first-come-first-served queue, are admitted while blocks allow, prefill their \
prompt in chunks ({prefill} tokens per step shared by all), then decode tokens every step. A \
request that waits in the queue more than {max_wait} steps FAILS; failures cost the most.

Many requests are SESSIONS of several LLM calls (agents calling tools, chats waiting for their \
human). Between two calls a session is PAUSED: it computes nothing, but its KV stays on the GPU \
(pinned) until its next call arrives and needs it. You see what it waits on (a tool or its \
human), how long it has waited, its earlier pauses (how many, and their pace: the geometric mean \
of pause / that tool's median) and how many calls its plan shows left; never when it returns. \
Median pauses in steps: {pauses}; a session's pace multiplies every pause it makes (log-normal, \
spread 0.5 between sessions), each pause varies around that (spread 0.35). Each call's max_tokens \
bounds its output: it lies in (max/4, max/2]. The engine never frees paused KV by itself: when \
memory runs out it preempts RUNNING sequences ({fallback}), which then recompute.

Every turn you get an observation, then you act. Batch EVERY action for this turn into ONE reply: \
you may call several tools at once. All tool calls of a reply are applied in order, their results \
are returned, then the server advances one step and the next observation follows. A reply with \
no tool call means noop. One reply = one step.

Tools (each on a running or a paused sequence holding GPU blocks):
{tools}

After the last turn the server drains without you: no new arrivals, paused sessions return on \
schedule, offloaded ones load back, discarded ones recompute, until every request has finished \
or failed by its own deadline. What you leave behind counts.

Observation format:
  header: turn t/T | scenario (the name of this workload and hardware regime; its parameters \
are published) | block size | step length, prefill tokens per step | gpu used/capacity blocks, \
usage %, cached (reusable prefix blocks, free to reclaim), free | cpu offload \
used/capacity | host link blocks per step and blocks queued on it (none: no limit) | requests \
that arrived over the last few steps | queue: waiting requests, oldest wait (steps) / limit, \
blocks the head needs, blocks the whole queue needs, how many were preempted
  table, one row per sequence holding blocks, largest GPU footprint first:
    seq type phase prio kv tokens rate priv shared frees out max last loc xfer pause paused n \
pace left
    seq=id, type=system|context|generation|reasoning|ephemeral, phase=prefill|decode|\
reasoning|idle (idle = paused), prio=priority 0-1, kv=fp16|int8|int4, tokens=tokens cached, \
rate=tokens per step, priv=its own blocks, shared=shared prefix blocks, frees=GPU blocks \
evicting it frees now, out=tokens its current call generated, max=that call's max_tokens, \
last=turn last computed, loc=gpu|cpu, xfer=blocks still crossing the link (out to cpu, or \
loading back), pause=what a paused session waits on (a tool or human; - when computing), \
paused=steps paused, n=its earlier pauses on tools lasting more than a step, pace=their \
geometric mean over the tool's median, left=further calls its plan shows (? when unknown)
  waiting: each waiting request and the blocks it needs to be admitted
  candidates: sequences cheapest to evict, with a 0-1 score (when shown)

Score: avoid failures first (the drain included); then throughput (tokens generated, quality-\
weighted, drain included); then keep usage below 80% every turn (95%+ is pressure); then keep \
memory productive (idle KV counts against you), keep high-value blocks (system > context > \
generation > reasoning > ephemeral), avoid load latency and risky evictions."""


def tool_guide(**fields: str) -> str:
    """The prompt's tool list, one entry per tool of the action table, in its order (`fields`
    fill a guide's placeholders)."""
    return "\n".join(
        f"- {tool.name}({'seq_id' if tool.targets else ''}): {tool.guide.format(**fields)}"
        for tool in ACTIONS
    )


def system_prompt(scenario: Scenario) -> str:
    levels = [q for q in Quantization if q.packing >= scenario.base_quantization.packing]
    quality = "; ".join(
        f"{block_type} "
        + " / ".join(f"{q} {scenario.quality(q, block_type):.0%}" for q in levels[1:])
        for block_type in BlockType
    )
    kinds = [k for k, w in scenario.tool_mix if w > 0]
    if scenario.chat_types and PauseKind.HUMAN not in kinds:
        kinds.append(PauseKind.HUMAN)
    pauses = ", ".join(
        f"{k} ~{max(1.0, CATALOGUE[k].median_s / scenario.step_seconds):.0f}" for k in kinds
    )
    fallback = (
        "newest first, as vLLM does"
        if scenario.fallback == "vllm"
        else "least recently used first, system prompts last, as TensorRT-LLM does"
    )
    return SYSTEM_PROMPT.format(
        tools=tool_guide(ladder=" -> ".join(levels), quality=quality),
        turns=scenario.steps,
        step=f"{scenario.step_seconds:g}",
        block_size=scenario.block_size,
        base=scenario.base_quantization,
        prefill=scenario.prefill_tokens_per_step,
        max_wait=scenario.max_wait_steps,
        pauses=pauses or "none in this scenario",
        fallback=fallback,
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
