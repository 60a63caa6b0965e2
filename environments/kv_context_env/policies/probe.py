"""A learned probe of "will this fact be asked about soon?", built as an outsider would build
it from examples alone (no phrase list, no answer key at play time): logistic regression on
sparse features of each sentence that holds a value, trained on generated episodes disjoint
from the test seeds (scikit-learn, the `probe` extra). `validate` reports its held-out AUC and
plays it as a policy: keep the sentences likeliest to be asked soon, per block they take, as
far as the budget allows; at a question recall the answer on demand and keep it first.

The features of a sentence at decision time t (each a token of one bag):
- its own words and word bigrams and trigrams, and its role; while it is fresh, its words
  crossed with the turns since it was said;
- the words and bigrams of its *neighbours*: the sentences that share a rare word with it
  (a word in under `RARE_SHARE` of the training sentences: a name, a place, an uncommon noun),
  said up to `BEFORE_TURNS` turns before it or at any time after it up to t, apart for
  before and after; each neighbour word after it also crossed with the turns since the
  sentence was said (log buckets), and each neighbour word crossed with the turns since the
  neighbour was said, so that "tomorrow" said two turns ago and "tomorrow" said twelve turns
  ago weigh differently;
- how many neighbours came before and after, how many of those after were questions (the
  subject was asked about), each crossed with the turns since, and the turns since alone.

The classes at decision time t: not asked after t, asked within `HORIZON_TURNS` turns of t
(soon), asked later. Each sentence holding a value is seen at `SAMPLES` times drawn between
its arrival and the end of the episode; sentences without a value are never candidates (they
never answer).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.readers.extractive import split_sentences, value_patterns
from kv_context_env.sim.episode import ContextEpisode
from kv_context_env.vocabulary import Conversation

from .baselines import ContextPolicy
from .keeping import evict_except, fill, find_visible, locate, recall_on_demand, span_blocks

BEFORE_TURNS = 3
"""A neighbour said before the sentence counts up to this many turns before it."""
RARE_SHARE = 0.01
"""A word links sentences when under this share of the training sentences hold it."""
SAMPLES = 3
"""Decision times drawn per sentence holding a value."""
HORIZON_TURNS = 4
""""Asked soon": a question asks the sentence within this many turns of the decision (on
training seeds 3-5 kept best; 12 and a weight on "asked later" kept worse: what is needed
next crowds out what is needed some day, which a recall fetches anyway)."""
SIZE_POWER = 1.0
"""The keeping order divides a sentence's score by its blocks to this power (1: value per
block, a knapsack's greedy order)."""
NOT_ASKED, SOON, LATER = 0, 1, 2
"""The classes the probe learns: not asked after the decision, asked soon, asked later."""
MIN_COUNT = 2
"""A feature seen in fewer training examples is dropped."""
_WORD = re.compile(r"[a-z]{2,}")
_DIGITISH = re.compile(r"[\d£$€@]")
_RECALLED = re.compile(r"\[recalled turn from message (\d+)\]")


def _sklearn() -> tuple[object, object, object]:
    try:
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import roc_auc_score
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(
            "the probe needs scikit-learn: `uv sync --extra probe` (it is in the dev group)"
        ) from error
    return CountVectorizer, LogisticRegression, roc_auc_score


def sentences(text: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, text) of each sentence of `text`, as the extractive reader splits it."""
    at = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, at)
        at = start + len(sentence)
        yield start, at, sentence


def _has_value(text: str) -> bool:
    """Whether `text` holds a value shape (digits and symbols first: most values have some)."""
    if _DIGITISH.search(text):
        return True
    patterns = value_patterns()
    return any(patterns[c].search(text) for c in ("person", "place", "choice", "day"))


def _bucket(turns: int) -> int:
    """Log bucket of a count of turns: 0, 1, 2-3, 4-7, 8-15, ..."""
    return 0 if turns <= 0 else 1 + int(math.log2(turns))


def _grams(words: Sequence[str], most: int) -> list[str]:
    return [
        "_".join(words[i : i + n]) for n in range(1, most + 1) for i in range(len(words) - n + 1)
    ]


@dataclass(frozen=True)
class Said:
    """One sentence as the probe reads it."""

    message: int
    """Conversation message index."""
    start: int
    end: int
    turn: int
    """User turns before it (from 0)."""
    role: str
    words: tuple[str, ...]
    question: bool
    valued: bool


def read_message(index: int, role: str, text: str, turn: int) -> list[Said]:
    return [
        Said(
            index,
            start,
            end,
            turn,
            role,
            tuple(_WORD.findall(sentence.lower())),
            sentence.endswith("?"),
            _has_value(sentence) and not sentence.endswith("?"),
        )
        for start, end, sentence in sentences(text)
    ]


@dataclass
class Reading:
    """Every sentence read so far, and which sentences each rare word links."""

    rare: frozenset[str] | None
    """The words that link (None while counting training sentences: every word)."""
    said: list[Said] = field(default_factory=list)
    by_word: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))

    def add(self, sentence: Said) -> int:
        k = len(self.said)
        self.said.append(sentence)
        for word in set(sentence.words):
            if self.rare is None or word in self.rare:
                self.by_word[word].append(k)
        return k

    def features(self, k: int, now_message: int, now_turn: int) -> str:
        """The bag of feature tokens of sentence `k` when message `now_message` (at turn
        `now_turn`) has been read."""
        s = self.said[k]
        since = _bucket(now_turn - s.turn)
        out = [f"s:{g}" for g in _grams(s.words, 3)]
        out += [f"role:{s.role}", f"r{since}", f"role:{s.role}r{since}"]
        if since <= 3:  # a fact just said: what it says matters for a soon ask
            out += [f"s{since}:{w}" for w in s.words]
        linked: set[int] = set()
        assert self.rare is not None
        for word in set(s.words) & self.rare:
            linked.update(self.by_word.get(word, ()))
        before = after = asked = 0
        for j in sorted(linked):
            o = self.said[j]
            if j == k or o.message > now_message:
                continue
            if o.message <= s.message:
                if o.turn < s.turn - BEFORE_TURNS:
                    continue
                before += 1
                out += [f"b:{g}" for g in _grams(o.words, 2)]
            else:
                after += 1
                asked += o.question
                out += [f"a:{g}" for g in _grams(o.words, 2)]
                out += [f"a{since}:{w}" for w in o.words]
            ago = _bucket(now_turn - o.turn)  # a time it names counts from when it was said
            out += [f"n{ago}:{w}" for w in o.words]
        out += [f"nb{min(before, 4)}", f"na{min(after, 6)}", f"na{min(after, 6)}r{since}"]
        out += [f"q{min(asked, 3)}", f"q{min(asked, 3)}r{since}"]
        return " ".join(out)


def _rare_words(conversations: Sequence[Conversation]) -> frozenset[str]:
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for conversation in conversations:
        for message in conversation.messages:
            for _, _, sentence in sentences(message.text):
                total += 1
                for word in set(_WORD.findall(sentence.lower())):
                    counts[word] += 1
    return frozenset(w for w, c in counts.items() if c < RARE_SHARE * total)


@dataclass(frozen=True)
class Example:
    features: str
    label: int
    """`NOT_ASKED`, `SOON` or `LATER`."""


def _turns(conversation: Conversation) -> list[int]:
    """The turn of every message (user messages counted up to it, from 0)."""
    out, turn = [], -1
    for message in conversation.messages:
        if message.role == "user":
            turn += 1
        out.append(max(turn, 0))
    return out


def examples(
    conversation: Conversation, rare: frozenset[str], rng: np.random.Generator
) -> list[Example]:
    """`SAMPLES` examples per sentence holding a value, each at a decision time drawn between
    its arrival and the end of the episode."""
    turns = _turns(conversation)
    asked: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for q in conversation.questions:
        for span in q.facts:
            asked[span.message_index].append((span.start, span.end, q.message_index))
    reading = Reading(rare)
    for message in conversation.messages:
        if message.role != "system":
            for s in read_message(message.index, message.role, message.text, turns[message.index]):
                reading.add(s)
    n = len(conversation.messages)
    out = []
    for k, s in enumerate(reading.said):
        if not s.valued:
            continue
        for when in rng.integers(s.message, n, size=SAMPLES):
            ahead = [
                turns[q] - turns[when]
                for a, b, q in asked.get(s.message, ())
                if a < s.end and s.start < b and when < q
            ]
            label = NOT_ASKED if not ahead else SOON if min(ahead) <= HORIZON_TURNS else LATER
            out.append(Example(reading.features(k, int(when), turns[int(when)]), label))
    return out


@dataclass
class Probe:
    """The fitted probe: how likely a bag of features is asked soon, later or not at all."""

    rare: frozenset[str]
    vectorizer: object
    model: object

    def probabilities(self, bags: Sequence[str]) -> np.ndarray:
        """P(not asked), P(asked soon), P(asked later) of each bag, one row each."""
        matrix = self.vectorizer.transform(bags)  # type: ignore[attr-defined]
        return self.model.predict_proba(matrix)  # type: ignore[attr-defined]

    def scores(self, bags: Sequence[str]) -> np.ndarray:
        """The keeping order's value of each bag: P(asked soon)."""
        return self.probabilities(bags)[:, SOON]


def train_probe(seeds: Iterable[int], levels: Sequence[str], sample_seed: int = 0) -> Probe:
    """Fit the probe on the episodes `seeds` x `levels` (keep them disjoint from the test
    seeds)."""
    return fit_probe(
        [generate_conversation(seed, level) for seed in seeds for level in levels], sample_seed
    )


def fit_probe(conversations: Sequence[Conversation], sample_seed: int = 0) -> Probe:
    """Fit the probe on `conversations` (in order: the sampling draws from one generator)."""
    count, logistic, _ = _sklearn()
    rare = _rare_words(conversations)
    rng = np.random.default_rng(sample_seed)
    rows: list[Example] = []
    for conversation in conversations:
        rows += examples(conversation, rare, rng)
    vectorizer = count(  # type: ignore[operator]
        token_pattern=r"\S+", lowercase=False, min_df=MIN_COUNT, binary=True
    )
    matrix = vectorizer.fit_transform([r.features for r in rows])
    model = logistic(max_iter=2000, C=0.3)  # type: ignore[operator]
    model.fit(matrix, np.array([r.label for r in rows]))
    return Probe(rare, vectorizer, model)


def probe_auc(probe: Probe, seeds: Iterable[int], levels: Sequence[str]) -> tuple[float, int]:
    """Held-out AUC of "will be asked" (soon or later) over the sampled sentences holding a
    value, and the number of examples."""
    _, _, auc = _sklearn()
    rng = np.random.default_rng(1)
    rows: list[Example] = []
    for seed in seeds:
        for level in levels:
            rows += examples(generate_conversation(seed, level), probe.rare, rng)
    labels = np.array([r.label != NOT_ASKED for r in rows])
    scores = 1 - probe.probabilities([r.features for r in rows])[:, NOT_ASKED]
    return float(auc(labels, scores)), len(rows)  # type: ignore[operator]


class ProbePolicy:
    """Keep the sentences the probe scores highest now, recall on demand and keep the answer
    first. One instance per episode."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.reading = Reading(probe.rare)
        self.seen = 0
        self.turn = -1
        self.live: set[int] = set()
        """Sentences holding a value that are still in view (in their message or a copy)."""
        self.of_message: dict[int, list[int]] = defaultdict(list)
        self.cached: dict[int, tuple[str, float]] = {}

    def read(self, episode: ContextEpisode) -> None:
        messages = episode.conversation.messages
        now = episode.current_message.index
        while self.seen <= now:
            message = messages[self.seen]
            self.seen += 1
            if message.role == "user":
                self.turn += 1
            if message.role == "system":
                continue
            for s in read_message(message.index, message.role, message.text, max(self.turn, 0)):
                k = self.reading.add(s)
                if s.valued:
                    self.live.add(k)
                    self.of_message[s.message].append(k)

    def score(self, ks: Sequence[int], now: int) -> dict[int, float]:
        """Each sentence's score now (a sentence is scored again only when its bag
        changes)."""
        bags = {k: self.reading.features(k, now, max(self.turn, 0)) for k in ks}
        fresh = [k for k in ks if self.cached.get(k, ("", 0.0))[0] != bags[k]]
        if fresh:
            for k, value in zip(fresh, self.probe.scores([bags[k] for k in fresh]), strict=True):
                self.cached[k] = (bags[k], float(value))
        return {k: self.cached[k][1] for k in ks}

    def __call__(self, episode: ContextEpisode) -> None:
        self.read(episode)
        before = episode.cache.n_messages
        wanted = recall_on_demand(episode)
        first = find_visible(episode, wanted) if wanted is not None else None
        if episode.cache.n_messages > before:  # a recalled turn: its facts are in view again
            for i in range(before, episode.cache.n_messages):
                for m in self._recalled_turn(episode, i):
                    self.live.update(self.of_message.get(m, ()))
        active = episode.cache.active_flags()
        where = {}
        for k in list(self.live):
            s = self.reading.said[k]
            found = locate(episode, s.message, s.start, s.end, active)
            if found is None:
                self.live.discard(k)
            else:
                where[k] = found
        scores = self.score(sorted(where), episode.current_message.index)
        blocks = {k: span_blocks(episode, where[k]) for k in where}
        order = sorted(where, key=lambda k: -scores[k] / len(blocks[k]) ** SIZE_POWER)
        ranked = [blocks[k] for k in order]
        if first is not None:
            ranked.insert(0, span_blocks(episode, first))
        evict_except(episode, fill(episode, ranked))

    def _recalled_turn(self, episode: ContextEpisode, cache_index: int) -> list[int]:
        """The conversation messages a recalled copy at `cache_index` may hold: those from
        the turn's user message to the next user message."""
        match = _RECALLED.match(episode.cache.message(cache_index).text)
        if match is None:
            return []
        first = int(match.group(1))
        messages = episode.conversation.messages
        out: list[int] = []
        for m, index in sorted(episode.cache_index.items(), key=lambda item: item[1]):
            if index < first:
                continue
            if out and messages[m].role == "user":
                break
            out.append(m)
        return out


def probe_policy(probe: Probe) -> ContextPolicy:
    return ProbePolicy(probe)
