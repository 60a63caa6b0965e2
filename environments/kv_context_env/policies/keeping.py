"""What the context family's policies share: where a sentence sits in the cache now (its own
message, or a recalled copy), the blocks it spans, filling the budget with a ranked list of
sentences, evicting everything else, and recalling a remembered sentence on demand.

These are mechanics, not judgment: a policy decides which sentences to rank first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import takewhile
from weakref import WeakKeyDictionary

from kv_context_env.readers.extractive import NO_ANSWER, extractive_answer
from kv_context_env.sim.episode import ContextEpisode

Where = tuple[int, int, int]
"""(cache index of a message, first character, end character) of a sentence in the cache."""


_SPANS: WeakKeyDictionary[ContextEpisode, dict[Where, range]] = WeakKeyDictionary()


def span_blocks(episode: ContextEpisode, where: Where) -> range:
    """The blocks holding characters `[start, end)` of cache message `index` (cached: a
    message never changes)."""
    spans = _SPANS.setdefault(episode, {})
    blocks = spans.get(where)
    if blocks is None:
        index, start, end = where
        first = episode.token_offset(index, start) // episode.block_size
        last = episode.token_offset(index, max(start, end - 1)) // episode.block_size
        blocks = spans[where] = range(first, last + 1)
    return blocks


def visible(episode: ContextEpisode, where: Where, active: Sequence[bool] | None = None) -> bool:
    """Whether every block of `where` is active (`active`: `cache.active_flags()`, if the
    caller has it)."""
    flags = episode.cache.active_flags() if active is None else active
    return all(flags[k] for k in span_blocks(episode, where))


def locate(
    episode: ContextEpisode,
    message_index: int,
    start: int,
    end: int,
    active: Sequence[bool] | None = None,
) -> Where | None:
    """Where characters `[start, end)` of conversation message `message_index` are visible
    now: in the message itself, else in the newest resident recalled copy; None if nowhere.
    `active`: `cache.active_flags()`, if the caller has it (it must be current)."""
    index = episode.cache_index.get(message_index)
    if index is None:
        return None
    flags = episode.cache.active_flags() if active is None else active
    if visible(episode, (index, start, end), flags):
        return index, start, end
    text = episode.conversation.messages[message_index].text[start:end]
    copies = takewhile(lambda j: j > index, reversed(episode.recalled_copies))
    return _first_visible(episode, text, copies, flags)


def _first_visible(
    episode: ContextEpisode, text: str, indices: Iterable[int], active: Sequence[bool]
) -> Where | None:
    """The first of cache messages `indices` where `text` is visible, or None."""
    for index in indices:
        at = episode.cache.message(index).text.find(text)
        if at >= 0 and visible(episode, (index, at, at + len(text)), active):
            return index, at, at + len(text)
    return None


def fill(episode: ContextEpisode, ranked: Iterable[Sequence[int] | range]) -> set[int]:
    """The blocks of `ranked` (best first), each added while all of its blocks still fit in
    the budget beside the tail block (a sentence that does not fit is skipped, not cut)."""
    keep: set[int] = set()
    room = episode.max_blocks - 1
    for blocks in ranked:
        more = set(blocks) - keep
        if len(keep) + len(more) <= room:
            keep |= more
    return keep


def evict_except(episode: ContextEpisode, keep: set[int]) -> None:
    """Evict every active block outside `keep` (the tail block stays: it is being written)."""
    cache = episode.cache
    tail = cache.tail_block
    drop = [k for k in range(cache.n_blocks) if k not in keep and k != tail and cache.is_active(k)]
    if drop:
        episode.evict_blocks(drop)


def history_text(episode: ContextEpisode) -> str:
    """Every message as it arrived, evicted or not, with the reader's message heads: what a
    policy has read so far."""
    cache = episode.cache
    return "".join(
        f"\n{cache.message(i).role} #{i}: {cache.message(i).text}" for i in range(cache.n_messages)
    )


def recall_on_demand(episode: ContextEpisode) -> str | None:
    """When a question arrives: the sentence the reader would answer with if the whole history
    were visible; if it is not visible now, `recall` with its words. Returns that sentence
    (None when there is no question or the history holds no answer)."""
    question = episode.pending_question
    if question is None:
        return None
    wanted = extractive_answer(history_text(episode), question.text)
    if wanted == NO_ANSWER:
        return None
    if wanted not in episode.visible_text():
        episode.recall(wanted)
    return wanted


def find_visible(episode: ContextEpisode, text: str) -> Where | None:
    """Where `text` is visible in the cache now, newest message first (None if nowhere)."""
    newest_first = range(episode.cache.n_messages - 1, -1, -1)
    return _first_visible(episode, text, newest_first, episode.cache.active_flags())
