"""Training the `learned` baseline: the cross-entropy method over its linear weights.

The learner is plain numpy. Each generation draws a population of weight matrices from a
diagonal Gaussian, plays every one on the same freshly drawn training episodes (common random
numbers), scores each by its mean normalized gain over `noop` on the same seeds, and refits the
Gaussian to the best quarter (with a decaying extra noise, "noisy CEM", so it does not collapse
early). The mean of the Gaussian is the candidate policy; every few generations it is scored on
a separate selection range and the best-scoring mean is kept. Seeds: training draws from
`TRAIN_SEED_START + [0, 500,000)`, selection uses `TRAIN_SEED_START + 500,000 + i`; evaluation
seeds (0, 1, ...) are only for the final test, done once by `scripts/train_learned.py`.

Normalization: per scenario, (reward − noop) / scale with scale = (best registered
observation-only policy − noop) on the selection seeds, at least 0.05, so 1.0 means "as good as
the best fixed rule" and every scenario with a range counts the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from kv_cache_env.episodes import TRAIN_SEED_START
from kv_cache_env.policies import Policy, available, create
from kv_cache_env.policies.learned import INPUTS, decide_linear, table_tools
from kv_cache_env.sim import SUITE, Action, Observation, Quantization, get_scenario
from rubrics import DEFAULT_WEIGHTS, score

from .runner import run_policy_episode

SELECT_SEED_START = TRAIN_SEED_START + 500_000
TRAIN_SEED_SPAN = 500_000
GROUP_SCENARIOS: dict[str, tuple[str, ...]] = {
    group: tuple(s for s in SUITE if get_scenario(s).base_quantization is quantization)
    for group, quantization in (("fp16", Quantization.FP16), ("fp8", Quantization.INT8))
}
"""The suite's scenarios by the precision they store KV at (a weight group each)."""
SHAPE = (len(table_tools()), len(INPUTS))
MIN_SCALE = 0.05


def observation_policies() -> list[str]:
    """Every registered policy that acts on the observation alone (not bound, lookahead),
    `learned` itself excluded."""
    return [n for n in available() if n != "learned" and not create(n).needs_simulator]


class _Linear(Policy):
    """The linear policy with one weight matrix (a candidate of the search)."""

    name = "linear"

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = weights

    def act(self, obs: Observation) -> list[Action]:
        return decide_linear(obs, self.weights)


def play_linear(weights: np.ndarray, scenario: str, seed: int) -> float:
    """Reward of one episode played by the linear policy with one weight matrix."""
    record = run_policy_episode(_Linear(weights), get_scenario(scenario), seed)
    return score(record, DEFAULT_WEIGHTS).reward


def play_policy(name: str, scenario: str, seed: int, policy: Policy | None = None) -> float:
    record = run_policy_episode(policy or create(name), get_scenario(scenario), seed)
    return score(record, DEFAULT_WEIGHTS).reward


def _linear_batch(args: tuple[np.ndarray, list[tuple[str, int]]]) -> list[float]:
    weights, episodes = args
    return [play_linear(weights, s, seed) for s, seed in episodes]


def _policy_batch(args: tuple[str, list[tuple[str, int]]]) -> list[float]:
    name, episodes = args
    return [play_policy(name, s, seed) for s, seed in episodes]


@dataclass
class Baselines:
    """Per-scenario rewards of the observation-only policies on the selection seeds."""

    seeds: list[int]
    rewards: dict[str, dict[str, np.ndarray]]
    """scenario -> policy -> rewards by seed."""

    def noop(self, scenario: str) -> float:
        return float(self.rewards[scenario]["noop"].mean())

    def best(self, scenario: str) -> tuple[str, float]:
        name, values = max(self.rewards[scenario].items(), key=lambda kv: kv[1].mean())
        return name, float(values.mean())

    def scale(self, scenario: str) -> float:
        """best − noop, at least `MIN_SCALE` (where the range is narrower, as on `easy`, the
        scenario counts less rather than amplifying its noise)."""
        return max(self.best(scenario)[1] - self.noop(scenario), MIN_SCALE)


def measure_baselines(scenarios: Sequence[str], seeds: Sequence[int], pool: Executor) -> Baselines:
    names = observation_policies()
    jobs = [(n, [(s, seed) for seed in seeds]) for s in scenarios for n in names]
    results = list(pool.map(_policy_batch, jobs))
    rewards: dict[str, dict[str, np.ndarray]] = {s: {} for s in scenarios}
    for (name, episodes), values in zip(jobs, results, strict=True):
        rewards[episodes[0][0]][name] = np.array(values)
    return Baselines(list(seeds), rewards)


@dataclass
class CemConfig:
    generations: int = 40
    population: int = 32
    elite_fraction: float = 0.25
    seeds_per_scenario: int = 4
    """Training episodes per scenario per generation (shared by the whole population)."""
    init_std: float = 1.0
    extra_noise: float = 0.25
    """Std added to the refit Gaussian, decaying linearly to `final_noise`."""
    final_noise: float = 0.02
    select_every: int = 5
    seed: int = 0


@dataclass
class CemResult:
    weights: np.ndarray
    """The mean that scored best on the selection seeds."""
    curve: list[dict[str, float]] = field(default_factory=list)
    """Per generation: episodes played so far, the mean's and the best candidate's normalized
    training score, and (every `select_every`) the mean's selection score."""


def normalized(rewards: np.ndarray, noop: np.ndarray, scales: np.ndarray) -> float:
    """Mean over scenarios of mean over seeds of (reward − noop) / scale; arrays are
    (scenarios, seeds)."""
    return float(((rewards - noop) / scales[:, None]).mean())


def train_group(
    group: str,
    config: CemConfig,
    baselines: Baselines,
    pool: Executor,
    log: Callable[[str], None] = print,
    scenarios: Sequence[str] | None = None,
) -> CemResult:
    """CEM over one weight matrix on `scenarios` (default: the group's)."""
    scenarios = tuple(scenarios or GROUP_SCENARIOS[group])
    rng = np.random.default_rng([config.seed, len(group)])
    scales = np.array([baselines.scale(s) for s in scenarios])
    select_eps = [(s, seed) for s in scenarios for seed in baselines.seeds]
    select_noop = np.array([baselines.rewards[s]["noop"] for s in scenarios])
    mean = np.zeros(SHAPE)
    std = np.full(SHAPE, config.init_std)
    n_elite = max(2, round(config.population * config.elite_fraction))
    episodes = 0
    best_select, best_weights = -np.inf, mean.copy()
    curve: list[dict[str, float]] = []
    for gen in range(config.generations):
        seeds = rng.integers(
            TRAIN_SEED_START,
            TRAIN_SEED_START + TRAIN_SEED_SPAN,
            size=(len(scenarios), config.seeds_per_scenario),
        )
        eps = [(s, int(seed)) for s, row in zip(scenarios, seeds, strict=True) for seed in row]
        noise = rng.standard_normal((config.population - 1, *SHAPE))
        cands = [mean, *(mean + std * noise)]
        noop = np.array(_policy_batch(("noop", eps))).reshape(seeds.shape)
        results = list(pool.map(_linear_batch, [(c, eps) for c in cands]))
        episodes += len(cands) * len(eps)
        fitness = np.array(
            [normalized(np.array(r).reshape(seeds.shape), noop, scales) for r in results]
        )
        order = np.argsort(-fitness)[:n_elite]
        elite = np.stack([cands[i] for i in order])
        frac = gen / max(config.generations - 1, 1)
        extra = config.extra_noise + (config.final_noise - config.extra_noise) * frac
        mean = elite.mean(axis=0)
        std = np.sqrt(elite.var(axis=0) + extra**2)
        point: dict[str, float] = {
            "generation": gen,
            "episodes": episodes,
            "mean_train": float(fitness[0]),
            "best_train": float(fitness.max()),
        }
        if (gen + 1) % config.select_every == 0 or gen == config.generations - 1:
            half = len(select_eps) // 2
            parts = pool.map(_linear_batch, [(mean, select_eps[:half]), (mean, select_eps[half:])])
            sel = np.array([r for part in parts for r in part]).reshape(select_noop.shape)
            episodes += len(select_eps)
            point["select"] = normalized(sel, select_noop, scales)
            by_scenario = ((sel - select_noop) / scales[:, None]).mean(axis=1)
            for s, value in zip(scenarios, by_scenario, strict=True):
                point[f"select_{s}"] = float(value)
            if point["select"] > best_select:
                best_select, best_weights = point["select"], mean.copy()
        curve.append(point)
        log(
            f"{group} gen {gen:3d} episodes {episodes:6d} mean {fitness[0]:+.3f} "
            f"best {fitness.max():+.3f}"
            + (f" select {point['select']:+.3f} " if "select" in point else "")
            + " ".join(f"{s} {point[f'select_{s}']:+.3f}" for s in scenarios if "select" in point)
        )
    return CemResult(best_weights, curve)
