"""The batched Gymnasium vector env of `kvcache/ServingTurns-v0`, over `VectorSimulator`.

    import gymnasium as gym
    import kv_cache_env.rl.gym  # registers the envs and this vector entry point

    envs = gym.make_vec("kvcache/ServingTurns-v0", num_envs=64, scenario="hard",
                        vectorization_mode="vector_entry_point", workers=2)
    obs, info = envs.reset(seed=0)                  # sub-env i seeded with 0 + i
    while training:
        actions = policy(obs)                       # (64, max_slots), pick where obs["action_mask"]
        obs, rewards, terminations, truncations, info = envs.step(actions)
    envs.close()

`ServingTurnsVectorEnv` equals `num_envs` copies of `ServingTurnsEnv` behind Gymnasium's
`SyncVectorEnv` step for step (observations, rewards, terminations, truncations, infos; tested),
but its episodes are one `VectorSimulator`: `workers` processes (0: this process) each step a
contiguous slice of the episodes, and build the features, the action mask and (shaped) the
rubric so far inside the worker (`observe_turn`), so the pipe carries compact arrays, not
simulator state. Only the tool calls go the other way.

## Spaces
`single_observation_space` and `single_action_space` are `ServingTurnsEnv`'s (the `Dict` of
`slots`, `globals`, `action_mask` `(max_slots, 1 + T)`; `MultiDiscrete([1 + T] * max_slots)`:
per row 0 keep, 1 `evict`, 2 `compress`, 3 `swap`, T the action table's tools that take a
sequence); `observation_space` and `action_space` batch them
(`gymnasium.vector.utils.batch_space`): actions are `(num_envs, max_slots)`.

## Seeding and options
As `SyncVectorEnv` over `ServingTurnsEnv` copies: `reset(seed=s)` seeds sub-env i's generator
with `s + i` (a list gives one seed per sub-env; None keeps each generator, or seeds it from
the OS the first time); each episode seed is drawn from its sub-env's generator in
`seed_range` (default: the training seeds, >= 1,000,000), and every autoreset draws the next one
from the same stream. Options apply to every sub-env reset: `scenario` and `trace` switch the
episode source from then on, `seed` plays exactly that episode seed (here also a sequence of
`num_envs` seeds, one per sub-env, e.g. evaluation seeds 0..n-1); `reset_mask` (a bool array of
`num_envs`) resets only those sub-envs (the way to reset with `autoreset_mode="Disabled"`).

## Autoreset (`metadata["autoreset_mode"]`)
`NEXT_STEP` by default (Gymnasium 1.x's convention): the step that ends an episode returns its
terminal observation (the state after the drain; only keep is valid) and reward; the next
`step` ignores that sub-env's action, starts its next episode and returns the first
observation with reward 0, `terminated` False. `autoreset_mode="SameStep"` resets in the ending
step (`info["final_obs"]`, `info["final_info"]` hold the ending step's), `"Disabled"` never
resets by itself. Episodes are `steps` turns long (15 by default) and never truncated, so all
sub-envs started together end together; they are then rebuilt in one batched call.

## Rewards and infos
As `ServingTurnsEnv`: `reward="sparse"` (default) pays the rubric of the whole episode
(`rubrics.score` of its record, drain included) on the ending step, 0 before; `reward="shaped"`
(opt-in, not the benchmark's reward) pays the change in the rubric of the episode so far each
turn, telescoping to the sparse reward. Infos are `SyncVectorEnv`'s dict of arrays (with `_key`
masks): `action_mask`, `turn`, `episode_seed`, `scenario` on resets, `errors` when a call was
invalid, and `reward`, `components`, `metrics` on an ending step. `render` is not supported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from . import GYM_EXTRA

try:
    from gymnasium.utils import seeding
    from gymnasium.vector import AutoresetMode, VectorEnv
    from gymnasium.vector.utils import batch_space, create_empty_array
except ModuleNotFoundError as error:  # the optional extra: say how to install it
    raise ModuleNotFoundError(GYM_EXTRA, name=error.name) from error

from rubrics import DEFAULT_WEIGHTS, Weights, score, valued_metrics

from ..episodes import EpisodeSpec
from ..limits import MAX_SEED, whole_number
from ..sim import ACTIONS, Action, Simulator, VectorSimulator, VectorStep
from .features import MAX_SLOTS, global_features, slot_features
from .gym import (
    TRAIN_SEED_RANGE,
    RewardMode,
    ServingTurnsEnv,
    empty_slot_error,
    integral_actions,
    reset_options,
    row_calls,
    turns_action_mask,
)

MAX_NUM_ENVS = 4096
"""Most sub-envs (and worker processes) one vector env may hold."""


class TurnView(NamedTuple):
    """One episode's state at the start of a turn (or its end), as a worker sends it back."""

    slots: np.ndarray
    """`(max_slots, len(SLOT_FEATURES))` float32, `ServingTurnsEnv`'s `slots`."""
    globals: np.ndarray
    """`(len(GLOBAL_FEATURES),)` float32."""
    mask: np.ndarray
    """`(max_slots, 1 + T)` int8 action mask (only keep once the episode is over)."""
    seq_ids: tuple[str, ...]
    """The sequence in each shown row, in row order: what an action's rows act on."""
    turn: int
    potential: float | None
    """Shaped rewards: the rubric on the episode so far (None when not asked for or at turn 0)."""
    final: tuple[float, dict[str, float], dict[str, float | int]] | None
    """On the ending turn: the sparse reward, its components and the episode metrics."""


def observe_turn(
    sim: Simulator,
    *,
    max_slots: int = MAX_SLOTS,
    shaped: bool = False,
    weights: Weights = DEFAULT_WEIGHTS,
) -> TurnView:
    """`VectorSimulator`'s `observe` hook (run in the worker): what `ServingTurnsEnv` computes
    after each turn, from `sim.observe(hints=False)` and the episode's record."""
    obs = sim.observe(hints=False)
    potential = final = None
    if sim.done:
        mask = np.zeros((max_slots, 1 + len(ACTIONS.targeted)), dtype=np.int8)
        mask[:, 0] = 1
        record = sim.record()
        scored = score(record, weights)
        final = (scored.reward, dict(scored.components), valued_metrics(record))
    else:
        mask = turns_action_mask(obs, max_slots)
        if shaped and sim.turn > 0:
            potential = score(sim.record(), weights).reward
    return TurnView(
        slot_features(obs, max_slots),
        global_features(obs),
        mask,
        tuple(e.seq_id for e in obs.entries[:max_slots]),
        sim.turn,
        potential,
        final,
    )


class ServingTurnsVectorEnv(VectorEnv):
    """`num_envs` `kvcache/ServingTurns-v0` episodes on one `VectorSimulator` (module
    docstring). Keyword arguments as for `ServingTurnsEnv`, plus `workers` (processes; 0 steps
    in this process), `autoreset_mode`, `mp_context` (multiprocessing start method) and `copy`
    (return copies of the batched observation, as `SyncVectorEnv` does)."""

    def __init__(
        self,
        num_envs: int = 1,
        scenario: str = "medium",
        trace: str | None = None,
        steps: int | None = None,
        reward: RewardMode = "sparse",
        weights: Mapping[str, float] | Weights | None = None,
        max_slots: int = MAX_SLOTS,
        seed_range: tuple[int, int] = TRAIN_SEED_RANGE,
        *,
        workers: int = 0,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        mp_context: str | None = None,
        copy: bool = True,
    ) -> None:
        num_envs = whole_number(num_envs, "num_envs", 1, MAX_NUM_ENVS)
        workers = whole_number(workers, "workers", 0, MAX_NUM_ENVS)
        checked = Weights(weights)  # a bad component name fails here, not in a worker
        # one scalar env checks the other arguments and defines the single spaces, exactly
        single = ServingTurnsEnv(
            scenario, trace, steps, reward, checked, max_slots, seed_range=seed_range
        )
        self.num_envs = num_envs
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.render_mode = None
        self.single_observation_space = single.observation_space
        self.single_action_space = single.action_space
        self.tools = single.tools
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.steps = steps
        self.reward_mode: RewardMode = reward
        self.weights = checked
        self.max_slots = max_slots
        self.seed_range = seed_range
        self.copy = copy
        self.workers = workers
        self.scenarios = [scenario] * num_envs
        self.traces: list[str | None] = [trace] * num_envs
        self.episode_seeds: list[int | None] = [None] * num_envs
        self._rngs: list[np.random.Generator | None] = [None] * num_envs
        self._views: list[TurnView | None] = [None] * num_envs
        self._potential = np.zeros(num_envs)
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)
        self._observations: dict[str, np.ndarray] = create_empty_array(
            self.single_observation_space, n=num_envs, fn=np.zeros
        )
        observe = partial(
            observe_turn, max_slots=max_slots, shaped=reward == "shaped", weights=self.weights
        )
        placeholder = EpisodeSpec(scenario, 0, trace, steps=steps)
        self.vec = VectorSimulator(
            [placeholder] * num_envs,
            workers=workers,
            observe=observe,
            mp_context=mp_context,
            observe_done=True,
        )
        self._started = False

    # --- gymnasium API -----------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        n = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            first = whole_number(seed, "seed", 0, MAX_SEED - n + 1)
            seeds = [first + i for i in range(n)]
        else:
            if not isinstance(seed, Sequence | np.ndarray) or isinstance(seed, str):
                raise ValueError(f"seed must be an integer or {n} of them, got {seed!r}"[:120])
            seeds = [None if s is None else whole_number(s, "seed", 0, MAX_SEED) for s in seed]
            if len(seeds) != n:
                raise ValueError(f"need {n} seeds (one per sub-env), got {len(seeds)}")
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"options must be a dict of option -> value, got {options!r}"[:120])
        options = dict(options or {})
        reset_mask = options.pop("reset_mask", None)
        unknown = set(options) - {"seed", "scenario", "trace"}
        if unknown:
            known = "reset_mask, scenario, seed, trace"
            raise ValueError(f"unknown reset options {sorted(unknown)}; known: {known}")
        if reset_mask is None:
            indices = list(range(n))
        else:
            mask = np.asarray(reset_mask)
            if mask.shape != (n,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of {n}, not all False"
                )
            indices = [int(i) for i in np.flatnonzero(mask)]
            if not self._started and len(indices) < n:
                raise RuntimeError("the first reset() must reset every sub-env")
        episode_seed = options.get("seed")
        if episode_seed is not None and not isinstance(episode_seed, int | np.integer):
            if not isinstance(episode_seed, Sequence | np.ndarray) or isinstance(episode_seed, str):
                raise ValueError(
                    f"options['seed'] must be an integer or {n} of them, got {episode_seed!r}"[:120]
                )
            episode_seed = list(episode_seed)
            if len(episode_seed) != n:
                raise ValueError(
                    f"options['seed'] needs {n} episode seeds, got {len(episode_seed)}"
                )
        # every option checked (and each new scenario/trace resolved) before anything is stored
        sources = {k: options[k] for k in ("scenario", "trace") if k in options}
        episode_sources = {
            i: reset_options(sources, self.scenarios[i], self.traces[i])[:2] for i in indices
        }
        for scenario, trace in set(episode_sources.values()) if sources else ():
            EpisodeSpec(scenario, 0, trace, steps=self.steps).resolve()
        for value in np.ravel(episode_seed) if episode_seed is not None else ():
            reset_options({"seed": value}, "", None)
        for i in indices:
            if seeds[i] is not None:
                self._rngs[i], _ = seeding.np_random(seeds[i])
            elif self._rngs[i] is None:
                self._rngs[i], _ = seeding.np_random()
            self.scenarios[i], self.traces[i] = episode_sources[i]
        chosen = {
            i: None if episode_seed is None else int(np.broadcast_to(episode_seed, n)[i])
            for i in indices
        }
        infos: dict[str, Any] = {}
        for i, info in sorted(self._restart(chosen).items()):
            infos = self._add_info(infos, info, i)
        self._started = True
        return self._batch(), infos

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        n = self.num_envs
        choice = integral_actions(actions, (n, self.max_slots), len(self.tools), "actions")
        restarting = [int(i) for i in np.flatnonzero(self._autoreset)]
        if restarting and self.autoreset_mode is AutoresetMode.DISABLED:
            raise RuntimeError(
                f"sub-envs {restarting} have ended; reset them (options={{'reset_mask': ...}})"
            )
        if self.autoreset_mode is not AutoresetMode.NEXT_STEP:
            restarting = []
        rewards = np.zeros(n, dtype=np.float64)
        terminations = np.zeros(n, dtype=np.bool_)
        truncations = np.zeros(n, dtype=np.bool_)
        step_infos: dict[int, dict[str, Any]] = {}
        playing = [i for i in range(n) if i not in set(restarting)]
        if playing:
            calls: list[list[Action]] = [[] for _ in range(n)]
            labels: list[list[str | None]] = [[] for _ in range(n)]
            for i in playing:
                calls[i], labels[i] = self._calls(i, choice[i])
            results = self.vec.step(calls)
            for i in playing:
                rewards[i], terminations[i], step_infos[i] = self._after_turn(
                    i, results[i], labels[i]
                )
        final_infos: dict[int, dict[str, Any]] = {}
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            restarting = [i for i in playing if terminations[i]]
            for i in restarting:
                final_infos[i] = {"final_obs": self._single(i), "final_info": step_infos[i]}
        reset_infos = self._restart(dict.fromkeys(restarting)) if restarting else {}
        infos: dict[str, Any] = {}
        for i in range(n):  # in SyncVectorEnv's order
            if i in final_infos:
                infos = self._add_info(infos, final_infos[i], i)
            infos = self._add_info(infos, reset_infos.get(i) or step_infos[i], i)
        self._autoreset = terminations | truncations
        return self._batch(), rewards, terminations, truncations, infos

    def action_masks(self) -> np.ndarray:
        """`(num_envs, max_slots * 4)` booleans, row by row (sb3-contrib's layout)."""
        return self._observations["action_mask"].astype(bool).reshape(self.num_envs, -1)

    def close_extras(self, **kwargs: Any) -> None:
        self.vec.close()

    def __repr__(self) -> str:
        return f"ServingTurnsVectorEnv(num_envs={self.num_envs}, workers={self.workers})"

    # --- helpers -----------------------------------------------------------------------------
    def _spec(self, i: int, episode_seed: int | None) -> EpisodeSpec:
        if episode_seed is None:
            rng = self._rngs[i]
            assert rng is not None
            episode_seed = int(rng.integers(*self.seed_range))
        return EpisodeSpec(self.scenarios[i], episode_seed, self.traces[i], steps=self.steps)

    def _restart(self, chosen: dict[int, int | None]) -> dict[int, dict[str, Any]]:
        """Start the next episode of each sub-env in `chosen` (index -> episode seed, None to
        draw it); one batched call when all restart. Returns each one's reset info."""
        specs = {i: self._spec(i, s) for i, s in chosen.items()}
        if len(specs) == self.num_envs:
            views = dict(enumerate(self.vec.reset([specs[i] for i in range(self.num_envs)])))
        else:
            views = {i: self.vec.reset_at(i, spec) for i, spec in specs.items()}
        infos: dict[int, dict[str, Any]] = {}
        for i, spec in specs.items():
            self._views[i] = view = views[i]
            self.episode_seeds[i] = spec.seed
            self._potential[i] = 0.0
            self._autoreset[i] = False
            self._write(i, view)
            infos[i] = self._info(i) | {"scenario": spec.label}
        return infos

    def _calls(self, i: int, choice: np.ndarray) -> tuple[list[Action], list[str | None]]:
        """Sub-env i's tool calls in row order, and per call the error `ServingTurnsEnv`
        reports without asking the simulator (an empty row), else None."""
        view = self._views[i]
        assert view is not None
        ids = view.seq_ids
        calls: list[Action] = []
        labels: list[str | None] = []
        for kind, slot in row_calls(choice, self.tools):
            if slot < len(ids):
                calls.append(Action(kind, ids[slot]))
                labels.append(None)
            else:  # an unknown id: the simulator counts it invalid and changes nothing
                calls.append(Action(kind, ""))
                labels.append(empty_slot_error(kind, slot, len(ids)))
        return calls, labels

    def _after_turn(
        self, i: int, step: VectorStep, labels: list[str | None]
    ) -> tuple[float, bool, dict[str, Any]]:
        view: TurnView = step.observation
        info: dict[str, Any] = {}
        errors = [
            label or result.message
            for label, result in zip(labels, step.results, strict=True)
            if label is not None or not result.ok
        ]
        if errors:
            info["errors"] = errors
        if view.final is not None:
            total, components, metrics = view.final
            reward = total - self._potential[i] if self.reward_mode == "shaped" else total
            info |= {"reward": total, "components": components, "metrics": metrics}
        elif self.reward_mode == "shaped":
            assert view.potential is not None
            reward = view.potential - self._potential[i]
            self._potential[i] = view.potential
        else:
            reward = 0.0
        self._views[i] = view
        self._write(i, view)
        info |= self._info(i)
        return float(reward), step.done, info

    def _info(self, i: int) -> dict[str, Any]:
        view = self._views[i]
        assert view is not None
        return {
            "action_mask": view.mask.astype(bool),
            "turn": view.turn,
            "episode_seed": self.episode_seeds[i],
        }

    def _write(self, i: int, view: TurnView) -> None:
        obs = self._observations
        obs["slots"][i] = view.slots
        obs["globals"][i] = view.globals
        obs["action_mask"][i] = view.mask

    def _single(self, i: int) -> dict[str, np.ndarray]:
        return {key: value[i].copy() for key, value in self._observations.items()}

    def _batch(self) -> dict[str, np.ndarray]:
        if not self.copy:
            return self._observations
        return {key: value.copy() for key, value in self._observations.items()}


__all__ = ["ServingTurnsVectorEnv", "TurnView", "observe_turn"]
