"""Baseline agents of the conversation-context family. Each acts on a live `ContextEpisode`
before the step, and must leave at most `max_blocks` active blocks (else the engine's own
eviction counts as OOM). They differ only in which blocks they keep:

- `noop`: does nothing; the engine's TensorRT-LLM prioritized LRU evicts (every time an OOM).
- `trt-lru`: the same order done proactively (system blocks last, oldest first): no OOM.
- `sliding-window`: keeps the most recent blocks, the system prompt included in eviction.
- `sink-recent`: StreamingLLM: keeps the first `SINK_BLOCKS` blocks (attention sinks, the
  system prompt) plus the most recent.
- `window-recall`: `trt-lru` that also calls `recall(question)` when a question arrives,
  bringing the archived turn that answers it back (seed 000's RAG archive at work).
- `oracle`: built from the answer key alone: keeps the system prompt, the blocks of the
  answer-bearing statements of questions still to come and the newest message, and evicts
  every other block at once (lean: it holds no more than it needs, so no policy saves more
  memory while answering).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kv_cache_env.context.episode import ContextEpisode

SINK_BLOCKS = 4

ContextPolicy = Callable[[ContextEpisode], None]


def _evict_in_order(episode: ContextEpisode, order: Iterable[int]) -> None:
    """Evict blocks from `order` (skipping inactive and the tail) until within budget."""
    cache = episode.cache
    excess = cache.active_blocks - episode.max_blocks
    if excess <= 0:
        return
    chosen: list[int] = []
    for block in order:
        if len(chosen) >= excess:
            break
        if cache.is_active(block) and block != cache.tail_block:
            chosen.append(block)
    if chosen:
        episode.evict_blocks(sorted(chosen))


def _system_blocks(episode: ContextEpisode) -> set[int]:
    return set(episode.cache.blocks_of(0))


def noop(episode: ContextEpisode) -> None:
    return None


def trt_lru(episode: ContextEpisode) -> None:
    system = _system_blocks(episode)
    n = episode.cache.n_blocks
    order = [k for k in range(n) if k not in system] + sorted(system)
    _evict_in_order(episode, order)


def sliding_window(episode: ContextEpisode) -> None:
    _evict_in_order(episode, range(episode.cache.n_blocks))


def sink_recent(episode: ContextEpisode) -> None:
    n = episode.cache.n_blocks
    order = [k for k in range(SINK_BLOCKS, n)] + list(range(min(SINK_BLOCKS, n)))
    _evict_in_order(episode, order)


def window_recall(episode: ContextEpisode) -> None:
    question = episode.pending_question
    if question is not None:
        episode.recall(question.text)
    trt_lru(episode)


def oracle(episode: ContextEpisode) -> None:
    cache = episode.cache
    keep: set[int] = _system_blocks(episode) | episode.future_fact_blocks()
    keep.update(cache.blocks_of(cache.n_messages - 1))  # the new message (a question is read)
    drop = [
        k
        for k in range(cache.n_blocks)
        if k not in keep and cache.is_active(k) and k != cache.tail_block
    ]
    if drop:
        episode.evict_blocks(drop)
    order = [k for k in range(cache.n_blocks) if k not in keep] + sorted(keep)
    _evict_in_order(episode, order)  # only if the kept blocks alone exceed the budget


CONTEXT_POLICIES: dict[str, ContextPolicy] = {
    "noop": noop,
    "trt-lru": trt_lru,
    "sliding-window": sliding_window,
    "sink-recent": sink_recent,
    "window-recall": window_recall,
    "oracle": oracle,
}


def get_context_policy(name: str) -> ContextPolicy:
    try:
        return CONTEXT_POLICIES[name]
    except KeyError:
        raise ValueError(
            f"{name!r} is not a context policy; known: {', '.join(CONTEXT_POLICIES)}"
        ) from None
