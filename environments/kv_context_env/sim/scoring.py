"""Answer scoring for the conversation-context family: ROUGE-L F-measure of a reader's answer
against a question's answer key (the masking design's reward signal: evict the wrong block, the
reader misses the fact, ROUGE-L drops).

Pure functions over strings; the `rouge_score` scorer (lower-cased, alphanumeric tokens, Porter
stemming) is built once per process and reused, on the first score: importing `rouge_score`
pulls in nltk (about 1-2 s of CPU, much more on a loaded machine), which a command that only
reads results never needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer


@cache
def _scorer() -> RougeScorer:
    from rouge_score import rouge_scorer  # imported on first use (module docstring)

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure in [0, 1]: with LCS the longest common token subsequence,
    P = LCS / len(prediction), R = LCS / len(reference), F = 2PR / (P + R).
    0.0 when either side has no tokens."""
    # rouge_score's argument order is (target, prediction).
    return float(_scorer().score(reference, prediction)["rougeL"].fmeasure)


def mean_rouge_l(pairs: Iterable[tuple[str, str]]) -> float:
    """Mean ROUGE-L F-measure over `(prediction, reference)` pairs.

    Raises ValueError on no pairs: a mean over nothing is a caller's bug, not a score of 0."""
    scores = [rouge_l(prediction, reference) for prediction, reference in pairs]
    if not scores:
        raise ValueError("mean_rouge_l needs at least one (prediction, reference) pair")
    return sum(scores) / len(scores)
