"""A learned probe of "will this sentence be asked about?": logistic regression on TF-IDF word
and bigram features of a sentence plus its position, recency and role, trained on generated
episodes disjoint from the test seeds (scikit-learn, the `probe` extra). `validate` reports
its held-out AUC and plays it as a policy: keep the highest-scoring sentences the budget
allows, recall on demand.

A sentence at decision time t is positive when it holds the answer of a question asked after t.
Each sentence is seen at one sampled time between its arrival and the end of the episode
(recency varies); sentences without a value-shaped token are kept at one in five (they are
never positive, and most of the text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.readers.extractive import value_patterns
from kv_context_env.sim.episode import ContextEpisode
from kv_context_env.vocabulary import Conversation

from .baselines import ContextPolicy
from .keeping import evict_except, fill, recall_on_demand, span_blocks

ROLES = ("user", "assistant", "tool")
POSITION_SCALE = 150.0
"""Turns that map position to 1."""
RECENCY_SCALE = 50.0
"""Turns that map recency to 1."""
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
NEGATIVE_SHARE = 0.2


def _sklearn() -> tuple[object, object, object]:
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import roc_auc_score
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(
            "the probe needs scikit-learn: `uv sync --extra probe` (it is in the dev group)"
        ) from error
    return TfidfVectorizer, LogisticRegression, roc_auc_score


def sentences(text: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, text) of each sentence or line of `text`."""
    for match in _SENTENCE.finditer(text):
        if match.group(0).strip():
            yield match.start(), match.end(), match.group(0).strip()


_DIGITISH = re.compile(r"[\d£$€@]")


def _has_value(text: str) -> bool:
    """Whether `text` holds a value shape (digits and symbols first: most values have some)."""
    if _DIGITISH.search(text):
        return True
    patterns = value_patterns()
    return any(patterns[c].search(text) for c in ("person", "place", "choice", "day"))


def user_turns(conversation: Conversation) -> list[int]:
    """The turn of every message (user messages counted up to it, from 0)."""
    out, turn = [], -1
    for message in conversation.messages:
        if message.role == "user":
            turn += 1
        out.append(max(turn, 0))
    return out


@dataclass(frozen=True)
class Example:
    text: str
    position: float
    recency: float
    role: str
    label: bool


def examples(conversation: Conversation, rng: np.random.Generator) -> list[Example]:
    """One example per sentence (filler sentences subsampled), at a sampled decision time."""
    turns = user_turns(conversation)
    asks: dict[int, list[tuple[int, int, int]]] = {}
    for q in conversation.questions:
        span = q.facts[0]
        asks.setdefault(span.message_index, []).append((span.start, span.end, q.message_index))
    n = len(conversation.messages)
    out = []
    for i, message in enumerate(conversation.messages):
        if message.role == "system" or message.kind == "question":
            continue
        for start, end, text in sentences(message.text):
            valued = _has_value(text)
            if not valued and rng.random() >= NEGATIVE_SHARE:
                continue
            when = int(rng.integers(i, n))
            label = any(a < end and start < b and q > when for a, b, q in asks.get(i, ()))
            out.append(
                Example(
                    text,
                    turns[i] / POSITION_SCALE,
                    (turns[when] - turns[i]) / RECENCY_SCALE,
                    message.role,
                    label,
                )
            )
    return out


@dataclass
class Probe:
    """The fitted probe: `score(texts, positions, recencies, roles)` → log-odds."""

    vectorizer: object
    model: object

    def matrix(self, rows: Sequence[Example]):  # type: ignore[no-untyped-def]
        from scipy import sparse

        text = self.vectorizer.transform([r.text for r in rows])  # type: ignore[attr-defined]
        numeric = np.array(
            [[r.position, r.recency, *(r.role == role for role in ROLES)] for r in rows],
            dtype=float,
        )
        return sparse.hstack([text, sparse.csr_matrix(numeric)]).tocsr()

    def text_scores(self, texts: Sequence[str]) -> np.ndarray:
        """The text part of the log-odds (bias included)."""
        weights = self.model.coef_[0]  # type: ignore[attr-defined]
        vocab = self.vectorizer.transform(texts)  # type: ignore[attr-defined]
        n_text = vocab.shape[1]
        return vocab @ weights[:n_text] + self.model.intercept_[0]  # type: ignore[attr-defined]

    def numeric_weights(self) -> np.ndarray:
        """Weights of position, recency and the roles, in that order."""
        weights = self.model.coef_[0]  # type: ignore[attr-defined]
        return weights[-(2 + len(ROLES)) :]


def train_probe(seeds: Iterable[int], levels: Sequence[str], sample_seed: int = 0) -> Probe:
    """Fit the probe on the episodes `seeds` x `levels` (keep them disjoint from the test
    seeds)."""
    return fit_probe(
        (generate_conversation(seed, level) for seed in seeds for level in levels), sample_seed
    )


def fit_probe(conversations: Iterable[Conversation], sample_seed: int = 0) -> Probe:
    """Fit the probe on `conversations` (in order: the sampling draws from one generator)."""
    tfidf, logistic, _ = _sklearn()
    rng = np.random.default_rng(sample_seed)
    rows: list[Example] = []
    for conversation in conversations:
        rows += examples(conversation, rng)
    vectorizer = tfidf(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=200_000)  # type: ignore[operator]
    vectorizer.fit([r.text for r in rows])
    probe = Probe(vectorizer, logistic(max_iter=1000, C=1.0))  # type: ignore[operator]
    probe.model.fit(probe.matrix(rows), np.array([r.label for r in rows]))  # type: ignore[attr-defined]
    return probe


def probe_auc(
    probe: Probe, seeds: Iterable[int], levels: Sequence[str]
) -> tuple[float, float, int]:
    """Held-out AUC of "will be asked" over every sampled sentence, and over the sentences
    holding a value only; and the number of examples."""
    _, _, auc = _sklearn()
    rng = np.random.default_rng(1)
    rows: list[Example] = []
    for seed in seeds:
        for level in levels:
            rows += examples(generate_conversation(seed, level), rng)
    labels = np.array([r.label for r in rows])
    scores = probe.model.decision_function(probe.matrix(rows))  # type: ignore[attr-defined]
    valued = np.array([_has_value(r.text) for r in rows])
    return (
        float(auc(labels, scores)),  # type: ignore[operator]
        float(auc(labels[valued], scores[valued])),  # type: ignore[operator]
        len(rows),
    )


class ProbePolicy:
    """Keep the sentences the probe scores highest (at the current recency), recall on
    demand. One instance per episode."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.weights = probe.numeric_weights()
        self.seen = 0
        self.turn = -1
        self.rows: list[tuple[int, int, int, float, int]] = []
        """(message index, start, end, text score + position + role, turn said)."""

    def read(self, episode: ContextEpisode) -> None:
        messages = episode.conversation.messages
        now = episode.current_message.index
        fresh: list[tuple[int, int, int, str, str]] = []
        while self.seen <= now:
            message = messages[self.seen]
            self.seen += 1
            if message.role == "user":
                self.turn += 1
            if message.role == "system":
                continue
            for start, end, text in sentences(message.text):
                fresh.append((message.index, start, end, text, message.role))
        if not fresh:
            return
        base = self.probe.text_scores([f[3] for f in fresh])
        position, _, *roles = self.weights
        for (index, start, end, _, role), score in zip(fresh, base, strict=True):
            static = score + position * max(self.turn, 0) / POSITION_SCALE
            static += sum(w for w, name in zip(roles, ROLES, strict=True) if name == role)
            self.rows.append((index, start, end, float(static), max(self.turn, 0)))

    def __call__(self, episode: ContextEpisode) -> None:
        self.read(episode)
        recall_on_demand(episode)
        recency = self.weights[1]
        active = episode.cache.active_flags()
        scored = []
        for index, start, end, static, said in self.rows:
            where = (episode.cache_index[index], start, end)
            blocks = span_blocks(episode, where)
            if all(active[k] for k in blocks):
                scored.append((static + recency * (self.turn - said) / RECENCY_SCALE, blocks))
        scored.sort(key=lambda item: -item[0])
        ranked = [blocks for _, blocks in scored]
        cache = episode.cache
        last = cache.n_messages - 1
        if episode.pending_question is not None and cache.message(last).kind == "recalled":
            ranked.insert(0, cache.blocks_of(last))  # the recalled copy answers the question
        evict_except(episode, fill(episode, ranked))


def probe_policy(probe: Probe) -> ContextPolicy:
    return ProbePolicy(probe)
