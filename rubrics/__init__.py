"""Rubrics: pure functions of an episode record that score it."""

from .metrics import METRIC_NAMES, episode_metrics, pressure_steps, valued_metrics
from .serving import COMPONENTS, DEFAULT_WEIGHTS, Score, Weights, score, weighted_reward
from .weights import RubricWeights, WeightError

__all__ = [
    "COMPONENTS",
    "DEFAULT_WEIGHTS",
    "METRIC_NAMES",
    "RubricWeights",
    "Score",
    "WeightError",
    "Weights",
    "episode_metrics",
    "pressure_steps",
    "score",
    "valued_metrics",
    "weighted_reward",
]
