"""Rubrics: pure functions of an episode record that score it."""

from .metrics import episode_metrics, pressure_steps
from .serving import COMPONENTS, DEFAULT_WEIGHTS, Score, resolve_weights, score, weighted_reward

__all__ = [
    "COMPONENTS",
    "DEFAULT_WEIGHTS",
    "Score",
    "episode_metrics",
    "pressure_steps",
    "resolve_weights",
    "score",
    "weighted_reward",
]
