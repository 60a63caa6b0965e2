"""Keyless one-line rules and a learned bag-of-words probe for the conversation-context family
(issue 16's validity checks): the simplest rules someone would try against the benchmark. Each
sees only what a real system sees (roles and text, never `kind`, never the answer key) and, like
`trt-lru`, evicts oldest first within the budget, except that it protects what its rule flags:

- `fact-regex`: protects the blocks of every fact-shaped sentence ("my / Maria's <words> is
  <value>", "<words>: <value>" lines).
- `role-order`: evicts tool output first, then reasoning, then assistant replies, then user
  messages (oldest first within each; a serving system knows which spans are reasoning).
- `digit-name`: protects every block with a digit or a capitalised word inside a sentence.
- `recall-qwords`: `trt-lru`, plus `recall(<the new message>)` when a user message ending in
  "?" arrives (no key: any question-shaped message recalls).
- `bow-probe`: a naive-Bayes bag-of-words probe of "this block holds an answer-bearing
  statement", trained on seeds 1000-1999 (`train_probe`), evicts its lowest-scoring blocks
  first.
- `evict-all`: evicts every block it can, every turn (paired with an echo or "I don't know"
  reader in `kvarena validate`, it must score well below `noop`).

Protected blocks still go, oldest first, when the protected set alone exceeds the budget.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from kv_cache_env.context.conversation import generate_conversation
from kv_cache_env.context.episode import ContextEpisode
from kv_cache_env.context.tokenizer import tokenize

from .policies import ContextPolicy, trt_lru

__all__ = ["ONE_LINERS", "BowProbe", "one_liner", "train_probe"]

_FACT_SHAPE = re.compile(
    r"\b(?:[Mm]y|[Yy]our|[A-Z][a-z]+'s)\s+[a-z' ]{2,40}?\s+(?:is|was|as|=)\s+[^.\n;]+"
    r"|^- [^\n]{2,60}:\s*[^\n]+$",
    re.MULTILINE,
)
_DIGIT_NAME = re.compile(r"\d|(?<=[a-z,] )[A-Z][a-z]+")
_WORD = re.compile(r"[a-z0-9']+")
ROLE_ORDER = {"tool": 0, "assistant": 2, "user": 3, "system": 9}

_texts: WeakKeyDictionary[ContextEpisode, dict[int, list[str]]] = WeakKeyDictionary()


def _message_blocks(episode: ContextEpisode, index: int) -> list[tuple[int, str]]:
    """(block, the text of message `index` inside it) for every block of the message."""
    cache = episode.cache
    per = _texts.setdefault(episode, {})
    if index not in per:
        per[index] = tokenize(cache.message(index).text)
    start, _ = cache.message_span(index)
    out: dict[int, list[str]] = {}
    for offset, piece in enumerate(per[index]):
        out.setdefault((start + offset) // episode.block_size, []).append(piece)
    return [(k, "".join(p)) for k, p in out.items()]


def _protecting(flag: Callable[[ContextEpisode], set[int]]) -> ContextPolicy:
    """Evict oldest first, unflagged blocks before flagged ones, the system prompt last."""

    def policy(episode: ContextEpisode) -> None:
        cache = episode.cache
        system = set(cache.blocks_of(0))
        flagged = flag(episode) - system
        n = cache.n_blocks
        order = (
            [k for k in range(n) if k not in flagged and k not in system]
            + sorted(flagged)
            + sorted(system)
        )
        _evict(episode, order)

    return policy


def _evict(episode: ContextEpisode, order: Iterable[int]) -> None:
    cache = episode.cache
    excess = cache.active_blocks - episode.max_blocks
    if excess <= 0:
        return
    chosen: list[int] = []
    for k in order:
        if len(chosen) >= excess:
            break
        if cache.is_active(k) and k != cache.tail_block:
            chosen.append(k)
    if chosen:
        episode.evict_blocks(sorted(chosen))


def _regex_blocks(episode: ContextEpisode, pattern: re.Pattern[str]) -> set[int]:
    cache = episode.cache
    flagged: set[int] = set()
    for index in range(1, cache.n_messages):
        if cache.visible_tokens(index) == 0:
            continue
        text = cache.message(index).text
        for match in pattern.finditer(text):
            first = episode.token_offset(index, match.start())
            last = episode.token_offset(index, max(match.start(), match.end() - 1))
            flagged.update(range(first // episode.block_size, last // episode.block_size + 1))
    return flagged


def fact_regex(episode: ContextEpisode) -> None:
    _protecting(lambda e: _regex_blocks(e, _FACT_SHAPE))(episode)


def digit_name(episode: ContextEpisode) -> None:
    _protecting(lambda e: _regex_blocks(e, _DIGIT_NAME))(episode)


def role_order(episode: ContextEpisode) -> None:
    cache = episode.cache
    rank: dict[int, tuple[int, int]] = {}
    for index in range(cache.n_messages):
        message = cache.message(index)
        # a serving system knows its reasoning spans (thinking tokens): the one kind it sees
        level = 1 if message.kind == "reasoning" else ROLE_ORDER.get(message.role, 3)
        for k in cache.blocks_of(index):
            rank[k] = max(rank.get(k, (0, 0)), (level, k))
    _evict(episode, sorted(rank, key=lambda k: rank[k]))


def _is_question(episode: ContextEpisode) -> bool:
    message = episode.cache.message(episode.cache.n_messages - 1)
    return message.role == "user" and message.text.rstrip().endswith("?")


def recall_qwords(episode: ContextEpisode) -> None:
    if _is_question(episode):
        text = episode.cache.message(episode.cache.n_messages - 1).text
        episode.recall(text)
    trt_lru(episode)


def evict_all(episode: ContextEpisode) -> None:
    cache = episode.cache
    drop = [k for k in range(cache.n_blocks) if cache.is_active(k) and k != cache.tail_block]
    if drop:
        episode.evict_blocks(drop)


# --- the bag-of-words probe ----------------------------------------------------------------


@dataclass(frozen=True)
class BowProbe:
    """Naive Bayes over the words of a block: `score(text)` is the log-odds that a block with
    these words holds an answer-bearing statement (Laplace-smoothed word likelihoods)."""

    log_odds: dict[str, float]
    prior: float

    def score(self, text: str) -> float:
        return self.prior + sum(self.log_odds.get(w, 0.0) for w in set(_WORD.findall(text.lower())))


def _conversation_blocks(seed: int, level: str) -> list[tuple[str, bool]]:
    """(text, holds an answer-bearing statement) of every block of a generated conversation."""
    conversation = generate_conversation(seed, level)
    pieces: dict[int, list[str]] = {}
    starts, total = [], 0
    for message in conversation.messages:
        starts.append(total)
        for offset, piece in enumerate(tokenize(message.text)):
            pieces.setdefault((total + offset) // 16, []).append(piece)
        total += message.n_tokens
    positive: set[int] = set()
    for question in conversation.questions:
        for fact in question.facts:
            text = conversation.messages[fact.message_index].text
            pos = 0
            for offset, piece in enumerate(tokenize(text)):
                if pos + len(piece) > fact.start and pos < fact.end:
                    positive.add((starts[fact.message_index] + offset) // 16)
                pos += len(piece)
    return [("".join(p), k in positive) for k, p in sorted(pieces.items())]


def train_probe(seeds: Iterable[int], levels: Iterable[str] = ("medium", "hard")) -> BowProbe:
    """Fit the probe on the blocks of `seeds` x `levels` (disjoint from the test seeds)."""
    counts = {True: Counter[str](), False: Counter[str]()}
    n = {True: 0, False: 0}
    levels = tuple(levels)
    for seed in seeds:
        for level in levels:
            for text, label in _conversation_blocks(seed, level):
                counts[label].update(set(_WORD.findall(text.lower())))
                n[label] += 1
    vocab = set(counts[True]) | set(counts[False])
    log_odds = {
        w: math.log((counts[True][w] + 1) / (n[True] + 2))
        - math.log((counts[False][w] + 1) / (n[False] + 2))
        for w in vocab
    }
    return BowProbe(log_odds, math.log((n[True] + 1) / (n[False] + 1)))


def probe_policy(probe: BowProbe) -> ContextPolicy:
    """Evict the lowest-scoring blocks first (ties: oldest first), the system prompt last."""

    def policy(episode: ContextEpisode) -> None:
        cache = episode.cache
        if cache.active_blocks <= episode.max_blocks:
            return
        system = set(cache.blocks_of(0))
        scores: dict[int, float] = {}
        for index in range(1, cache.n_messages):
            if cache.visible_tokens(index) == 0:
                continue
            for k, text in _message_blocks(episode, index):
                if cache.is_active(k) and k not in system:
                    scores[k] = max(scores.get(k, -math.inf), probe.score(text))
        order = sorted(scores, key=lambda k: (scores[k], k)) + sorted(system)
        _evict(episode, order)

    return policy


ONE_LINERS: dict[str, ContextPolicy] = {
    "fact-regex": fact_regex,
    "role-order": role_order,
    "digit-name": digit_name,
    "recall-qwords": recall_qwords,
    "evict-all": evict_all,
}


def one_liner(name: str) -> ContextPolicy:
    try:
        return ONE_LINERS[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a one-liner; known: {', '.join(ONE_LINERS)}") from None
