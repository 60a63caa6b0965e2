"""Baseline agents of the conversation-context family. Each acts on a live `ContextEpisode`
before the step and should leave at most `max_blocks` active blocks (else the engine's own
eviction counts as OOM). `CONTEXT_POLICIES` maps a name to a factory: `get_context_policy(name)`
returns a fresh policy for one episode (some keep state across turns).

- `noop`: does nothing; the engine's TensorRT-LLM prioritized LRU evicts (every time an OOM).
- `trt-lru`: the same order done proactively (system blocks last, oldest first): no OOM.
- `sliding-window`: keeps the most recent blocks, the system prompt included in eviction.
- `sink-recent`: StreamingLLM: keeps the first `SINK_BLOCKS` blocks plus the most recent.
- `window-recall`: `trt-lru`, plus `recall(<the question>)` when a question arrives.
- `oracle`: a clairvoyant keep / evict / recall plan from the answer key: it keeps the
  answer-bearing sentences of the questions still to come, soonest asked first, as far as the
  budget allows (Belady's order over sentences), evicts everything else, and when a question's
  sentence is not in view it recalls it with the sentence's own words. It knows the questions
  but pays for its recalls like anyone; it is greedy (not cost-optimal), so an honest agent may
  beat it on an episode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kv_context_env.sim.episode import ContextEpisode

from .keeping import evict_except, fill, locate, span_blocks

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
    now = episode.current_message.index
    question = episode.pending_question
    if question is not None:
        span = question.facts[0]
        if locate(episode, span.message_index, span.start, span.end) is None:
            text = episode.conversation.messages[span.message_index].text
            episode.recall(text[span.start : span.end])
    needed: dict[tuple[int, int, int], int] = {}
    for q in episode.conversation.questions:
        if q.message_index < now:
            continue
        span = q.facts[0]
        needed.setdefault((span.message_index, span.start, span.end), q.message_index)
    ranked = []
    active = episode.cache.active_flags()
    for (index, start, end), _ in sorted(needed.items(), key=lambda item: item[1]):
        where = locate(episode, index, start, end, active)
        if where is not None:
            ranked.append(span_blocks(episode, where))
    evict_except(episode, fill(episode, ranked))


def _stateless(policy: ContextPolicy) -> Callable[[], ContextPolicy]:
    return lambda: policy


CONTEXT_POLICIES: dict[str, Callable[[], ContextPolicy]] = {
    "noop": _stateless(noop),
    "trt-lru": _stateless(trt_lru),
    "sliding-window": _stateless(sliding_window),
    "sink-recent": _stateless(sink_recent),
    "window-recall": _stateless(window_recall),
    "oracle": _stateless(oracle),
}
"""Name → factory of a fresh policy for one episode."""


def get_context_policy(name: str) -> ContextPolicy:
    """A fresh policy `name` for one episode; ValueError for an unknown name."""
    try:
        factory = CONTEXT_POLICIES[name]
    except KeyError:
        raise ValueError(
            f"{name!r} is not a context policy; known: {', '.join(CONTEXT_POLICIES)}"
        ) from None
    return factory()
