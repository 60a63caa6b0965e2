"""Rubrics: pure functions of an episode record that score it."""

from .metrics import METRIC_NAMES, episode_metrics, pressure_steps
from .serving import COMPONENTS, DEFAULT_WEIGHTS, Score, resolve_weights, score, weighted_reward

__all__ = [
    "COMPONENTS",
    "DEFAULT_WEIGHTS",
    "METRIC_NAMES",
    "Score",
    "episode_metrics",
    "pressure_steps",
    "resolve_weights",
    "score",
    "weighted_reward",
]
