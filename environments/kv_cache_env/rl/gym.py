"""Gymnasium interface to the serving simulator: `kvcache/Serving-v0`, registered on import.

    import gymnasium as gym
    import kv_cache_env.rl.gym  # registers kvcache/Serving-v0

    env = gym.make("kvcache/Serving-v0", scenario="hard")
    obs, info = env.reset(seed=0)
    while True:
        action = policy(obs)  # pick among obs["action_mask"] == 1
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated:
            break

Needs the optional `gym` extra (`uv sync --extra gym`, `pip install kvcache-arena[gym]`).

## Episode
One episode is one simulator episode (`kv_cache_env.episodes.EpisodeSpec`): a scenario of the
suite (or a trace window), 15 agent turns, then the agent-free drain. A *turn* is any number of
sub-steps: each non-noop action applies one tool call to the simulator (as one LLM tool call
does); the `noop` action ends the turn and advances the engine one step (as the end of an LLM
reply does). After `max_calls_per_turn` calls (128, the LLM env's cap) the turn ends by itself.
The episode terminates after the last turn's engine step and the drain; it is never truncated.

## Reset
`reset(seed=s)` seeds the env's generator, from which the episode seed is drawn in
`seed_range` (default: the documented training range, seeds >= 1,000,000, so nothing evaluated
is trained on); later `reset()` calls draw the next episodes from the same stream. Options
(`reset(options={...})`): `seed` plays exactly that episode seed (e.g. evaluation seeds 0, 1, ...),
`scenario` and `trace` switch the episode source (the spaces do not change). Same options and
actions give the same episode, bit for bit. Options are checked before anything is stored: an
unknown option, a seed that is not a non-negative integer, or a scenario or trace that does not
resolve raises ValueError and leaves the env as it was (the next reset works as before).

## Observation space (`Dict`)
- `slots`: `Box(-4, 8, (max_slots, 31), float32)`, one row per sequence holding KV (running,
  paused on the GPU, paused on CPU) in the observation's order (largest GPU cost first), zero
  rows after the last; its columns are `kv_cache_env.rl.features.SLOT_FEATURES`.
- `globals`: `Box(-4, 8, (18,), float32)`, memory, CPU tier and queue state
  (`GLOBAL_FEATURES`).
- `action_mask`: `MultiBinary(1 + T * max_slots)`, 1 where the action is valid now (`T`: the
  tools that take a sequence, 3 today).

Both arrays are built from `Simulator.observe()`, the observation every built-in policy and the
LLM (as text) see; nothing hidden (a paused session's return time) is in them. The size cap is
`max_slots` (128 by default; the suite's busiest episodes hold up to 89 sequences): sequences
past it are not shown and cannot be acted on.

## Action space (`Discrete(1 + T * max_slots)`)
`0` = `noop` (ends the turn); `1 + tool * max_slots + slot` applies `tool` to the sequence in
row `slot`, where the tools are the action table's that take a sequence, in its order
(`kv_cache_env.sim.ACTIONS.targeted`: 0 `evict`, 1 `compress`, 2 `swap`). The mask is the
table's rule (`AgentTool.refusal`), the one `Simulator.apply` enforces: `evict` on any shown
sequence, `compress` on one on the GPU below int4 whose KV is not still loading back, `swap` on
one on the GPU, not loading back, whose private blocks fit in the free CPU blocks; `noop`
always. An action outside the mask changes nothing and counts as an invalid call
(`invalid_calls`, as an LLM's bad call does); `info["error"]` says what was wrong. Masked
policies (sb3-contrib's MaskablePPO) read `env.action_masks()`.

## One step per turn: `kvcache/ServingTurns-v0`
The same episodes, observation and rewards with one step per turn: the action is
`MultiDiscrete([1 + T] * max_slots)` (per row: 0 keep, 1 `evict`, 2 `compress`, 3 `swap`,
applied in row order, then the engine steps) and `action_mask` is `(max_slots, 1 + T)`; see
`ServingTurnsEnv`. Every episode is then exactly `steps` (15) steps long, which suits batched
rollouts. Its batched vector env (`kv_cache_env.rl.gym_vector.ServingTurnsVectorEnv`, the
registered `vector_entry_point`: `gymnasium.make_vec(TURNS_ENV_ID, num_envs=n,
vectorization_mode="vector_entry_point", workers=2)`) plays the episodes on one
`VectorSimulator`, equal step for step to `n` copies behind `SyncVectorEnv`.

## Arguments
`scenario`, `trace` (as for `kvarena eval`), `steps` (turns per episode, 1..10,000 =
`kv_cache_env.limits.MAX_EPISODE_STEPS`; default the scenario's 15), `reward`, `weights`
(overrides of the rubric's weights as a mapping, or a `rubrics.Weights`: known components,
finite, |w| <= 10^6, checked when the env is made by the one check the CLI's `--weights` uses;
`env.weights` is the resulting `rubrics.Weights`), `max_slots`, `max_calls_per_turn`,
`seed_range`. An action must be a whole number in range (a NumPy integer, or a float such as
2.0): 0.5, NaN, a bool or an out-of-range value raises ValueError, and nothing is applied.

## Rewards
- `reward="sparse"` (default, like the LLM environment): 0 on every step, and on the terminal
  step the serving rubric's weighted reward (`rubrics.score`) of the whole episode, drain
  included.
- `reward="shaped"` (opt-in, *not* the benchmark's reward): at the end of each turn, the change
  in the rubric evaluated on the episode so far (failures, throughput, headroom and the cache
  snapshot up to this turn; the first turn is measured from 0); sub-steps get 0. The rewards
  telescope, so an episode's shaped rewards sum exactly to its sparse reward; only their
  timing differs.
`info` on the terminal step holds `components` (the seven rubric components), `metrics` (the
episode metrics, `rubrics.METRIC_NAMES`: the serving ones too, such as `slo_attainment`,
`goodput_rps` and `first_token_p95_s`, left out where they have no value) and `reward` (the
sparse reward, whatever the mode).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from . import GYM_EXTRA

try:
    import gymnasium
    from gymnasium import spaces
except ModuleNotFoundError as error:  # the optional extra: say how to install it
    raise ModuleNotFoundError(GYM_EXTRA, name=error.name) from error

from rubrics import Weights, score, valued_metrics

from ..episodes import TRAIN_SEED_START, EpisodeSpec
from ..limits import MAX_GYM_CALLS_PER_TURN, MAX_GYM_SLOTS, MAX_SEED, whole_number
from ..sim import ACTIONS, Action, AgentTool, Observation, Simulator, render
from ..sim.actions import ActionKind
from .features import (
    GLOBAL_FEATURES,
    HIGH,
    LOW,
    MAX_SLOTS,
    SLOT_FEATURES,
    global_features,
)
from .features import slot_features as _slot_features

ENV_ID = "kvcache/Serving-v0"
TURNS_ENV_ID = "kvcache/ServingTurns-v0"
MAX_CALLS_PER_TURN = 128
TRAIN_SEED_RANGE = (TRAIN_SEED_START, TRAIN_SEED_START + (1 << 30))
RewardMode = Literal["sparse", "shaped"]


class ServingEnv(gymnasium.Env[dict[str, np.ndarray], int]):
    """The KV-cache serving game as a Gymnasium environment (the module docstring is its spec)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 - gymnasium's API

    def __init__(
        self,
        scenario: str = "medium",
        trace: str | None = None,
        steps: int | None = None,
        reward: RewardMode = "sparse",
        weights: Mapping[str, float] | Weights | None = None,
        max_slots: int = MAX_SLOTS,
        max_calls_per_turn: int = MAX_CALLS_PER_TURN,
        seed_range: tuple[int, int] = TRAIN_SEED_RANGE,
        render_mode: str | None = None,
    ) -> None:
        if reward not in ("sparse", "shaped"):
            raise ValueError(f"reward must be 'sparse' or 'shaped', got {reward!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        max_slots = whole_number(max_slots, "max_slots", 1, MAX_GYM_SLOTS)
        max_calls_per_turn = whole_number(
            max_calls_per_turn, "max_calls_per_turn", 1, MAX_GYM_CALLS_PER_TURN
        )
        seed_range = checked_seed_range(seed_range)
        if not isinstance(scenario, str):
            raise ValueError(f"scenario must be a name, got {scenario!r}"[:120])
        if trace is not None and not isinstance(trace, str | Path):
            raise ValueError(f"trace must be a name or path, got {trace!r}"[:120])
        EpisodeSpec(scenario, 0, trace, steps=steps).resolve()  # fail on a bad name now
        checked = Weights(weights)  # unknown, non-finite or huge weights fail now, as in the CLI
        self.scenario = scenario
        self.trace = trace
        self.steps = steps
        self.reward_mode: RewardMode = reward
        self.weights = checked
        self.max_slots = max_slots
        self.max_calls_per_turn = max_calls_per_turn
        self.seed_range = seed_range
        self.render_mode = render_mode
        self.tools: tuple[AgentTool, ...] = ACTIONS.targeted
        """The tools that take a sequence when the env was made: its action spaces' tool axis."""
        self.n_actions = 1 + len(self.tools) * max_slots
        self.action_space = spaces.Discrete(self.n_actions)
        self.observation_space = spaces.Dict(
            {
                "slots": spaces.Box(LOW, HIGH, (max_slots, len(SLOT_FEATURES)), np.float32),
                "globals": spaces.Box(LOW, HIGH, (len(GLOBAL_FEATURES),), np.float32),
                "action_mask": spaces.MultiBinary(self.n_actions),
            }
        )
        self.sim: Simulator | None = None
        self._obs: Observation | None = None
        self._mask = np.zeros(self.n_actions, dtype=np.int8)
        self._potential = 0.0
        self.episode_seed: int | None = None

    # --- gymnasium API -----------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is not None:
            seed = whole_number(seed, "seed", 0, MAX_SEED)
        scenario, trace, chosen = reset_options(options, self.scenario, self.trace)
        super().reset(seed=seed)
        if chosen is not None:
            episode_seed = chosen
        else:
            episode_seed = int(self.np_random.integers(*self.seed_range))
        spec = EpisodeSpec(scenario, episode_seed, trace, steps=self.steps)
        self.sim = spec.simulator()  # a bad scenario or trace raises here: nothing is stored
        self.scenario, self.trace = scenario, trace
        self.episode_seed = episode_seed
        self._potential = 0.0
        self._refresh()
        return self._observation(), self._info(spec_label=spec.label)

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        sim = self.sim
        if sim is None or self._obs is None:
            raise RuntimeError("call reset() before step()")
        if sim.done:
            raise RuntimeError("the episode is over; call reset()")
        action = int(integral_actions(action, (), self.n_actions - 1))
        info: dict[str, Any] = {}
        end_turn = action == 0
        if not end_turn:
            tool, slot = divmod(action - 1, self.max_slots)
            kind = self.tools[tool].name
            entries = self._obs.entries
            if slot >= min(len(entries), self.max_slots):
                sim.count_invalid()
                info["error"] = empty_slot_error(kind, slot, len(entries))
            else:
                result = sim.apply(Action(kind, entries[slot].seq_id))
                if not result.ok:
                    info["error"] = result.message
            end_turn = sim.calls_this_turn >= self.max_calls_per_turn
        reward = self._end_turn(info) if end_turn else 0.0
        self._refresh()
        info.update(self._info())
        return self._observation(), float(reward), sim.done, False, info

    def _end_turn(self, info: dict[str, Any]) -> float:
        """Step the engine (the drain follows the last turn); the turn's reward."""
        sim = self.sim
        assert sim is not None
        sim.step()  # a turn with no call counts as noop
        if self.reward_mode == "sparse" and not sim.done:
            return 0.0
        record = sim.record()
        scored = score(record, self.weights)
        reward = scored.reward
        if self.reward_mode == "shaped":
            reward = scored.reward - self._potential
            self._potential = scored.reward
        if sim.done:
            info["reward"] = scored.reward
            info["components"] = dict(scored.components)
            info["metrics"] = valued_metrics(record)
        return reward

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._obs is None:
            return None
        return render(self._obs)

    def action_masks(self) -> np.ndarray:
        """The valid actions now, as booleans (sb3-contrib's MaskablePPO calls this)."""
        return self._mask.astype(bool)

    # --- helpers -----------------------------------------------------------------------------
    def decode(self, action: int) -> Action | None:
        """The simulator action `action` stands for now (None for noop or an empty slot)."""
        if action == 0 or self._obs is None:
            return None
        tool, slot = divmod(int(action) - 1, self.max_slots)
        if slot >= len(self._obs.entries):
            return None
        return Action(self.tools[tool].name, self._obs.entries[slot].seq_id)

    def _refresh(self) -> None:
        assert self.sim is not None
        self._obs = obs = self.sim.observe(hints=False)
        if self.sim.done:
            # the terminal observation: the state after the drain; only "do nothing" is valid
            self._mask = np.zeros_like(self._mask)
            self._mask[..., 0] = 1
            return
        self._mask = self._mask_for(obs)

    def _mask_for(self, obs: Observation) -> np.ndarray:
        return action_mask(obs, self.max_slots, self.tools)

    def _observation(self) -> dict[str, np.ndarray]:
        assert self._obs is not None
        return {
            "slots": _slot_features(self._obs, self.max_slots),
            "globals": global_features(self._obs),
            "action_mask": self._mask.copy(),
        }

    def _info(self, spec_label: str | None = None) -> dict[str, Any]:
        assert self.sim is not None
        info: dict[str, Any] = {
            "action_mask": self._mask.astype(bool),
            "turn": self.sim.turn,
            "episode_seed": self.episode_seed,
        }
        if spec_label is not None:
            info["scenario"] = spec_label
        return info


class ServingTurnsEnv(ServingEnv):
    """`kvcache/ServingTurns-v0`: the same game with one step per turn (module docstring).

    The action is `MultiDiscrete([1 + T] * max_slots)`: for each row of the turn's observation,
    0 keep, then one value per tool that takes a sequence (1 `evict`, 2 `compress`, 3 `swap`);
    the chosen calls are applied in row order (largest GPU cost first), then the engine steps.
    `action_mask` is `(max_slots, 1 + T)`: what each row
    accepts at the start of the turn (an earlier call of the same turn can still make a later
    one invalid, e.g. offloads that fill the CPU tier; it is then counted invalid, as always).
    One call per sequence per turn, as the `learned` baseline decides.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        shape = (self.max_slots, 1 + len(self.tools))
        self.action_space = spaces.MultiDiscrete(np.full(self.max_slots, shape[1]))
        self.observation_space = spaces.Dict(
            {**self.observation_space.spaces, "action_mask": spaces.MultiBinary(shape)}
        )
        self._mask = np.zeros(shape, dtype=np.int8)

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        sim = self.sim
        if sim is None or self._obs is None:
            raise RuntimeError("call reset() before step()")
        if sim.done:
            raise RuntimeError("the episode is over; call reset()")
        choice = integral_actions(action, (self.max_slots,), len(self.tools))
        info: dict[str, Any] = {}
        entries = self._obs.entries
        errors = []
        for kind, slot in row_calls(choice, self.tools):
            if slot >= len(entries):
                sim.count_invalid()
                errors.append(empty_slot_error(kind, slot, len(entries)))
            elif not (result := sim.apply(Action(kind, entries[slot].seq_id))).ok:
                errors.append(result.message)
        if errors:
            info["errors"] = errors
        reward = self._end_turn(info)
        self._refresh()
        info.update(self._info())
        return self._observation(), float(reward), sim.done, False, info

    def decode(self, action: np.ndarray) -> list[Action]:  # type: ignore[override]
        """The simulator calls `action` stands for now, in the order they would be applied."""
        entries = self._obs.entries if self._obs is not None else ()
        return [
            Action(kind, entries[slot].seq_id)
            for kind, slot in row_calls(action, self.tools)
            if slot < len(entries)
        ]

    def action_masks(self) -> np.ndarray:
        """Flat booleans, row by row (sb3-contrib's layout for MultiDiscrete)."""
        return self._mask.astype(bool).ravel()

    def _mask_for(self, obs: Observation) -> np.ndarray:
        return turns_action_mask(obs, self.max_slots, self.tools)


def integral_actions(
    action: Any, shape: tuple[int, ...], high: int, what: str = "action"
) -> np.ndarray:
    """`action` as int64 of `shape` with every value in 0..`high`. ValueError for anything
    else: another shape, booleans, NaN, a float that is not a whole number (0.5 is not "keep";
    2.0 is 2), a value out of range."""
    choice = np.asarray(action)
    kind = choice.dtype.kind
    valid = choice.shape == shape and kind in "iuf"
    if valid and kind == "f":
        valid = bool(np.isfinite(choice).all() and (choice == np.rint(choice)).all())
    out = choice.astype(np.int64) if valid else choice
    if valid and out.size:
        valid = bool(out.min() >= 0 and out.max() <= high)
    if not valid:
        where = "an integer" if shape == () else f"{shape} integers"
        shown = np.array2string(choice, threshold=8) if choice.size else repr(action)
        raise ValueError(f"{what} must be {where} in 0..{high}, got {shown[:120]}")
    return out


def reset_options(
    options: Mapping[str, Any] | None, scenario: str, trace: str | None
) -> tuple[str, str | None, int | None]:
    """(scenario, trace, episode seed or None) after `reset(options=...)`; ValueError for an
    unknown option or a value of the wrong type, before anything is stored."""
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"options must be a dict of option -> value, got {options!r}"[:120])
    options = dict(options or {})
    unknown = set(options) - {"seed", "scenario", "trace"}
    if unknown:
        raise ValueError(f"unknown reset options {sorted(unknown)}; known: scenario, seed, trace")
    if "scenario" in options:
        if not isinstance(options["scenario"], str):
            raise ValueError(f"options['scenario'] must be a name, got {options['scenario']!r}")
        scenario = options["scenario"]
    if "trace" in options:
        if options["trace"] is not None and not isinstance(options["trace"], str | Path):
            raise ValueError(f"options['trace'] must be a name or path, got {options['trace']!r}")
        trace = None if options["trace"] is None else str(options["trace"])
    seed = options.get("seed")
    if seed is not None:
        seed = whole_number(seed, "options['seed']", 0, MAX_SEED)
    return scenario, trace, seed


def checked_seed_range(seed_range: object) -> tuple[int, int]:
    """`seed_range` as (low, high) integers with 0 <= low < high <= MAX_SEED; ValueError."""
    if not isinstance(seed_range, tuple | list) or len(seed_range) != 2:
        raise ValueError(f"seed_range must be (low, high), got {seed_range!r}"[:120])
    low = whole_number(seed_range[0], "seed_range's low", 0, MAX_SEED - 1)
    high = whole_number(seed_range[1], "seed_range's high", low + 1, MAX_SEED)
    return low, high


def action_mask(
    obs: Observation, max_slots: int = MAX_SLOTS, tools: tuple[AgentTool, ...] | None = None
) -> np.ndarray:
    """int8 mask over `Discrete(1 + len(tools) * max_slots)`: what `Simulator.apply` accepts
    now, by the action table's rule (`tools`: the table's that take a sequence)."""
    tools = ACTIONS.targeted if tools is None else tools
    mask = np.zeros(1 + len(tools) * max_slots, dtype=np.int8)
    mask[0] = 1
    for slot, entry in enumerate(obs.entries[:max_slots]):
        for index, tool in enumerate(tools):
            mask[1 + index * max_slots + slot] = tool.valid_on(entry, obs)
    return mask


def turns_action_mask(
    obs: Observation, max_slots: int = MAX_SLOTS, tools: tuple[AgentTool, ...] | None = None
) -> np.ndarray:
    """int8 `(max_slots, 1 + len(tools))` mask of `ServingTurnsEnv`: per row, keep (always) and
    what `Simulator.apply` accepts now for each tool that takes a sequence."""
    tools = ACTIONS.targeted if tools is None else tools
    flat = action_mask(obs, max_slots, tools)
    mask = np.zeros((max_slots, 1 + len(tools)), dtype=np.int8)
    mask[:, 0] = 1
    mask[:, 1:] = flat[1:].reshape(len(tools), max_slots).T
    return mask


def row_calls(
    choice: np.ndarray, tools: tuple[AgentTool, ...] | None = None
) -> list[tuple[ActionKind, int]]:
    """A `ServingTurns-v0` action as (tool, row) calls, in row order (0 = keep: no call)."""
    tools = ACTIONS.targeted if tools is None else tools
    return [(tools[int(choice[slot]) - 1].name, int(slot)) for slot in np.flatnonzero(choice)]


def empty_slot_error(kind: str, slot: int, shown: int) -> str:
    """What a call on an empty row reports (the simulator counts it invalid)."""
    return f"{kind}: slot {slot} is empty ({shown} sequences shown)"


def make_vector_env(
    num_envs: int,
    *,
    mode: Literal["sync", "async", "batched"] = "sync",
    env_id: str = ENV_ID,
    **kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """`num_envs` copies of `env_id` (keyword arguments as for `ServingEnv`) behind Gymnasium's
    vector API; `reset(seed=s)` seeds copy i with s + i. `mode="async"` runs each copy in its
    own process. `mode="batched"` (`kvcache/ServingTurns-v0` only) is the batched vector env
    `kv_cache_env.rl.gym_vector.ServingTurnsVectorEnv` over `VectorSimulator`: the same episodes,
    step for step, with features computed in `workers` processes (a keyword argument, default
    0: in this process)."""
    if mode == "batched":
        if env_id != TURNS_ENV_ID:
            raise ValueError(f"mode='batched' needs env_id={TURNS_ENV_ID!r}, got {env_id!r}")
        return gymnasium.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
        )
    return gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, **kwargs)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="kv_cache_env.rl.gym:ServingEnv")
if TURNS_ENV_ID not in gymnasium.registry:
    gymnasium.register(
        id=TURNS_ENV_ID,
        entry_point="kv_cache_env.rl.gym:ServingTurnsEnv",
        vector_entry_point="kv_cache_env.rl.gym_vector:ServingTurnsVectorEnv",
    )

__all__ = [
    "ENV_ID",
    "TURNS_ENV_ID",
    "ServingEnv",
    "ServingTurnsEnv",
    "action_mask",
    "empty_slot_error",
    "integral_actions",
    "make_vector_env",
    "row_calls",
    "turns_action_mask",
]
