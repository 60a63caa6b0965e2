"""The published signal table: every link from what an agent sees to what the generator hides.

An agent framework knows what a paused session waits on (the tool it called, or its human), how
that tool's calls usually last, the session's own earlier pauses, roughly how many calls its plan
has left, and each call's output budget (`max_tokens`). The generator draws every hidden quantity
from these visible signals with the forms and noise levels below, and this table is all the
honest `expert` knows of the generator (docs: "The signal table").

Pause lengths. A call's pause on tool `k` lasts, in seconds,

    median_k x pace x exp(sigma_k x N(0, 1)),   pace = exp(PACE_SIGMA x N(0, 1)) per session,

rounded to whole steps (at least one). `median_k` is the interception time InferCept measured
for that kind of augmentation (Abhyankar et al., ICML 2024, arXiv 2402.01869, Table 1: means per
augmentation type); `sigma_k` and `PACE_SIGMA` are this project's documented assumptions (a
session's pace: a slow user, a heavy task; per-call noise around it). A session's earlier pauses
on tools that last more than a step (`informative`) are shown (their count and the geometric
mean of pause / median), so its pace can be estimated:
with `n` earlier pauses of mean log-ratio `y`, the posterior of log pace is normal with variance
`v = 1 / (1 / PACE_SIGMA^2 + n / CALL_SIGMA^2)` and mean `v n y / CALL_SIGMA^2` (`pace_posterior`;
exact for one per-call spread `CALL_SIGMA`, which every tool shares; the rounding to steps is
ignored).

Calls left. A session's plan shows `plan = max(1, round(N x exp(PLAN_SIGMA x N(0, 1))))` for its
N further calls when it starts, counting down by one per call made (never below 0).

Output budget. A call's `max_tokens` is the smallest power of two at least twice its output
(at least 256): its output lies in (max_tokens / 4, max_tokens / 2] (all of [1, 128] for 256).

Load. The header shows the arrivals of the last `TREND_STEPS` steps; arrivals are Poisson at a
rate drawn uniformly per episode from the scenario's range, with burst steps (`Scenario`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .vocabulary import PauseKind

PACE_SIGMA = 0.5
"""Spread (log) of a session's pace: the same user or task is consistently slow or fast."""
CALL_SIGMA = 0.35
"""Spread (log) of one call's pause around its session's pace (every tool)."""
PLAN_SIGMA = 0.3
"""Spread (log) of a plan's estimate of the calls left around the true count."""
TREND_STEPS = 5
"""Steps over which the header counts recent arrivals."""
MIN_MAX_TOKENS = 256
LONGEST_PAUSE_S = 240.0
"""Upper clip of a drawn pause, in seconds."""


@dataclass(frozen=True)
class ToolProfile:
    """One kind of interception: how long it lasts and what the next call brings."""

    kind: PauseKind
    median_s: float
    """Median pause in seconds (InferCept's mean interception time for its augmentation)."""
    prompt_median: int
    """Median tokens the tool's output (or the user's message) appends to the context."""
    output_median: int
    """Median tokens the next call generates."""
    source: str


# InferCept (arXiv 2402.01869), Table 1: interception times of six augmentation types. The
# sub-second ones last one step here (a step is the scheduling granularity).
CATALOGUE: dict[PauseKind, ToolProfile] = {
    p.kind: p
    for p in (
        ToolProfile(PauseKind.CALCULATOR, 0.1, 40, 60, "InferCept Table 1: arithmetic (Math)"),
        ToolProfile(PauseKind.SEARCH, 0.7, 250, 80, "InferCept Table 1: question answering"),
        ToolProfile(PauseKind.ENV, 0.1, 150, 60, "InferCept Table 1: virtual environment"),
        ToolProfile(PauseKind.TTS, 17.0, 30, 120, "InferCept Table 1: text to speech"),
        ToolProfile(PauseKind.IMAGE, 20.0, 30, 120, "InferCept Table 1: image generation"),
        ToolProfile(PauseKind.HUMAN, 28.6, 60, 200, "InferCept Table 1: chatbot (a human)"),
    )
}


def pause_steps(kind: PauseKind, pace: float, normal: float, step_seconds: float) -> int:
    """Steps one pause on `kind` lasts for a session of `pace` (`normal`: its N(0, 1) draw)."""
    seconds = CATALOGUE[kind].median_s * pace * math.exp(CALL_SIGMA * normal)
    seconds = min(seconds, LONGEST_PAUSE_S)
    return max(1, round(seconds / step_seconds))


def informative(kind: PauseKind, step_seconds: float) -> bool:
    """Whether a pause on `kind` says anything about its session's pace: tools whose median is
    under 1.5 steps nearly always last the one-step minimum."""
    return CATALOGUE[kind].median_s >= 1.5 * step_seconds


def log_ratio(kind: PauseKind, steps: int, step_seconds: float) -> float:
    """log(pause / the tool's median) of an observed pause of `steps` steps."""
    return math.log(steps * step_seconds / CATALOGUE[kind].median_s)


def pace_posterior(count: int, mean_log_ratio: float) -> tuple[float, float]:
    """Mean and variance of a session's log pace after `count` pauses of mean log-ratio."""
    variance = 1.0 / (1.0 / PACE_SIGMA**2 + count / CALL_SIGMA**2)
    return variance * count * mean_log_ratio / CALL_SIGMA**2, variance


def pause_distribution(
    kind: PauseKind, pauses: int, pace_shown: float, step_seconds: float
) -> tuple[float, float]:
    """Mean and spread (log, of the length in steps) of a pause on `kind` by a session whose
    history shows `pauses` informative pauses at `pace_shown`: log-normal, its log-mean the
    tool's median (in steps) plus the posterior mean of log pace, its variance the posterior's
    plus one call's (`pace_posterior`)."""
    mean, variance = pace_posterior(pauses, math.log(pace_shown) if pauses else 0.0)
    mu = math.log(CATALOGUE[kind].median_s / step_seconds) + mean
    return mu, math.sqrt(variance + CALL_SIGMA**2)


def expected_remaining(
    kind: PauseKind, elapsed: int, pauses: int, pace_shown: float, step_seconds: float
) -> float:
    """Expected steps until a session paused for `elapsed` steps on `kind` returns, given its
    history: the log-normal of `pause_distribution` conditioned on lasting past `elapsed`
    (E[X | X > e] - e; at least one step, the minimum of any pause)."""
    mu, sigma = pause_distribution(kind, pauses, pace_shown, step_seconds)
    floor = max(elapsed, 1e-9)
    log_e = math.log(floor)
    tail = _normal_cdf((mu - log_e) / sigma)
    if tail < 1e-12:
        return 1.0
    mean = math.exp(mu + sigma**2 / 2) * _normal_cdf((mu + sigma**2 - log_e) / sigma) / tail
    return max(mean - elapsed, 1.0)


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def plan_estimate(calls: int, normal: float) -> int:
    """What a session's plan shows for `calls` further calls (`normal`: its N(0, 1) draw)."""
    if calls <= 0:
        return 0
    return max(1, round(calls * math.exp(PLAN_SIGMA * normal)))


def max_tokens(output: int) -> int:
    """The `max_tokens` a client sends for a call that will generate `output` tokens."""
    budget = MIN_MAX_TOKENS
    while budget < 2 * output:
        budget *= 2
    return budget


def output_bounds(budget: int) -> tuple[int, int]:
    """Inclusive range of outputs consistent with `max_tokens` = `budget`."""
    if budget <= MIN_MAX_TOKENS:
        return 1, MIN_MAX_TOKENS // 2
    return budget // 4 + 1, budget // 2


__all__ = [
    "CALL_SIGMA",
    "CATALOGUE",
    "PACE_SIGMA",
    "PLAN_SIGMA",
    "TREND_STEPS",
    "ToolProfile",
    "expected_remaining",
    "informative",
    "log_ratio",
    "max_tokens",
    "output_bounds",
    "pace_posterior",
    "pause_distribution",
    "pause_steps",
    "plan_estimate",
]
