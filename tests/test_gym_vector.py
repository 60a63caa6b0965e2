"""The batched vector env (`kv_cache_env.rl.gym_vector`): step for step equal to separate
`ServingTurnsEnv` copies behind Gymnasium's `SyncVectorEnv` (observations, rewards,
terminations, truncations, infos, in every autoreset mode and both reward modes), the same with
worker processes as in-process, Gymnasium's own environment-match check and vector wrappers,
its registration and its options."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.utils.env_match import check_environments_match
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import FlattenObservation, RecordEpisodeStatistics

from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.rl.features import F, G
from kv_cache_env.rl.gym import ENV_ID, TURNS_ENV_ID, ServingTurnsEnv, make_vector_env
from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv, TurnView, observe_turn
from kv_cache_env.sim import VectorSimulator
from rubrics import DEFAULT_WEIGHTS, score


def _sample(rng: np.random.Generator, mask: np.ndarray, p_call: float = 0.3) -> np.ndarray:
    """Per sub-env and row: keep, or (with probability `p_call` where the row accepts any call)
    one of the calls the mask allows, uniformly."""
    valid = mask[..., 1:].astype(bool)
    pick = (rng.random(valid.shape) * valid).argmax(-1) + 1
    call = (rng.random(mask.shape[:2]) < p_call) & valid.any(-1)
    return np.where(call, pick, 0).astype(np.int64)


def _same(a: tuple, b: tuple, where: str) -> None:
    names = ("observation", "reward", "terminated", "truncated", "info")[: len(a)]
    for name, x, y in zip(names, a, b, strict=True):
        assert data_equivalence(x, y, exact=True), f"{where}: {name} differs:\n{x}\n{y}"


def _copies(n: int, mode: str = "NextStep", **kwargs) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: ServingTurnsEnv(**kwargs) for _ in range(n)], autoreset_mode=mode)


@pytest.mark.parametrize(
    ("mode", "reward", "steps"),
    [
        ("NextStep", "sparse", None),  # the full 15-turn episodes
        ("NextStep", "shaped", 4),
        ("SameStep", "sparse", 4),
        ("Disabled", "shaped", 4),
    ],
)
def test_equals_separate_copies_step_for_step_across_autoresets(mode, reward, steps):
    """Three copies of `ServingTurnsEnv` (SyncVectorEnv) and the batched env, driven by the same
    masked random actions through more than two episodes each (so through autoresets, or, with
    autoreset disabled, through `reset_mask` resets), then a reset with options."""
    kwargs = {"scenario": "hard", "steps": steps, "reward": reward}
    turns = steps or 15
    ref = _copies(3, mode, **kwargs)
    vec = ServingTurnsVectorEnv(3, autoreset_mode=mode, **kwargs)
    assert vec.metadata["autoreset_mode"] is AutoresetMode(mode)
    rng = np.random.default_rng(7)
    a, b = ref.reset(seed=40), vec.reset(seed=40)
    _same(a, b, "reset")
    ended = 0
    for step in range(2 * turns + 3):
        actions = _sample(rng, a[0]["action_mask"])
        a, b = ref.step(actions), vec.step(actions)
        _same(a, b, f"step {step}")
        if a[2].any():
            ended += 1
            assert a[2].all() and "reward" in (a[4]["final_info"] if mode == "SameStep" else a[4])
            if mode == "Disabled":
                reset = {"reset_mask": a[2].copy()}
                ra, rb = ref.reset(options=reset), vec.reset(options=reset)
                _same(ra, rb, f"reset_mask after step {step}")
                a = (ra[0], *a[1:])
    assert ended == 2
    options = {"scenario": "big-cpu", "seed": 3}
    a, b = ref.reset(options=options), vec.reset(options=options)
    _same(a, b, "reset with options")
    assert list(b[1]["episode_seed"]) == [3, 3, 3] and set(b[1]["scenario"]) == {"big-cpu"}
    for step in range(3):
        actions = _sample(rng, a[0]["action_mask"], p_call=0.5)
        a, b = ref.step(actions), vec.step(actions)
        _same(a, b, f"big-cpu step {step}")
    ref.close()
    vec.close()


def test_workers_equal_in_process_with_invalid_calls_and_partial_resets():
    """workers=2 over 5 sub-envs (uneven slices) equals workers=0: unmasked random actions
    (invalid calls and empty rows included, reported in `info["errors"]`), autoresets, and a
    `reset_mask` reset of two sub-envs mid-episode (rebuilt one by one)."""
    kwargs = {"scenario": "big-cpu", "steps": 3, "reward": "shaped"}
    envs = [ServingTurnsVectorEnv(5, workers=w, **kwargs) for w in (0, 2)]
    space = envs[0].action_space
    space.seed(3)
    a, b = (env.reset(seed=11) for env in envs)
    _same(a, b, "reset")
    errors = 0
    for step in range(8):
        actions = space.sample()
        a, b = (env.step(actions) for env in envs)
        _same(a, b, f"step {step}")
        errors += int(a[4].get("_errors", np.zeros(5, bool)).sum())
        if step == 4:
            mask = np.array([False, True, False, False, True])
            a, b = (env.reset(options={"reset_mask": mask}) for env in envs)
            _same(a, b, "partial reset")
            assert list(a[1]["_episode_seed"]) == list(mask)
    assert errors > 0
    for env in envs:
        env.close()


def test_gymnasiums_environment_match_check():
    """Gymnasium's `check_environments_match` (one sub-env: it compares flags as scalars),
    random unmasked actions through two episodes, infos included."""
    kwargs = {"scenario": "medium", "steps": 3}
    check_environments_match(
        _copies(1, **kwargs), ServingTurnsVectorEnv(1, workers=1, **kwargs), num_steps=8, seed=2
    )


def test_gymnasiums_vector_wrappers_accept_it():
    """RecordEpisodeStatistics (which reads `metadata["autoreset_mode"]`) counts each episode's
    return and length across an autoreset; FlattenObservation flattens the batched Dict."""
    envs = RecordEpisodeStatistics(ServingTurnsVectorEnv(2, scenario="easy", steps=2))
    envs.reset(seed=0)
    ended = 0
    for _ in range(5):
        _, reward, terminated, _, info = envs.step(np.zeros((2, 128), dtype=np.int64))
        if terminated.any():
            ended += 1
            np.testing.assert_array_equal(info["episode"]["r"], reward)
            np.testing.assert_array_equal(info["episode"]["l"], [2, 2])
    assert ended == 2
    envs.close()
    flat = FlattenObservation(ServingTurnsVectorEnv(2, steps=2))
    obs, _ = flat.reset(seed=1)
    assert obs.shape == flat.observation_space.shape == (2, 128 * F + G + 128 * 4)
    flat.close()


def test_registration_spaces_and_make_vector_env():
    envs = gymnasium.make_vec(
        TURNS_ENV_ID, num_envs=2, vectorization_mode="vector_entry_point", scenario="easy"
    )
    assert isinstance(envs, ServingTurnsVectorEnv) and envs.num_envs == 2
    single = ServingTurnsEnv(scenario="easy")
    assert envs.single_observation_space == single.observation_space
    assert envs.single_action_space == single.action_space
    assert envs.observation_space == batch_space(single.observation_space, 2)
    assert envs.action_space == batch_space(single.action_space, 2)
    obs, _ = envs.reset(seed=0)
    assert envs.observation_space.contains(obs)
    assert envs.action_masks().shape == (2, single.max_slots * 4)
    envs.close()
    assert isinstance(gymnasium.make_vec(TURNS_ENV_ID, num_envs=2), ServingTurnsVectorEnv)
    batched = make_vector_env(3, mode="batched", env_id=TURNS_ENV_ID, workers=1, steps=2)
    assert isinstance(batched, ServingTurnsVectorEnv) and batched.workers == 1
    batched.close()
    assert isinstance(make_vector_env(2, env_id=TURNS_ENV_ID), SyncVectorEnv)  # the default
    with pytest.raises(ValueError, match="batched"):
        make_vector_env(2, mode="batched")  # kvcache/Serving-v0 has no batched version
    assert gymnasium.spec(ENV_ID).vector_entry_point is None


def test_episode_seed_per_sub_env_and_argument_checks():
    """`options["seed"]` as one episode seed per sub-env plays exactly those episodes (e.g.
    evaluation seeds), `options["trace"]` replays trace windows; bad arguments fail loudly."""
    vec = ServingTurnsVectorEnv(3, scenario="flash-crowd")
    obs, info = vec.reset(options={"seed": [0, 1, 2]})
    assert list(info["episode_seed"]) == [0, 1, 2]
    for i in range(3):
        single, _ = ServingTurnsEnv(scenario="flash-crowd").reset(options={"seed": i})
        for key in single:
            np.testing.assert_array_equal(obs[key][i], single[key])
    vec.close()
    vec = ServingTurnsVectorEnv(2, scenario="flash-crowd", workers=1)  # the trace loads there
    obs, info = vec.reset(options={"trace": "mooncake-conversation", "seed": [4, 5]})
    assert list(info["scenario"]) == ["trace:mooncake-conversation"] * 2
    single = ServingTurnsEnv(scenario="flash-crowd", trace="mooncake-conversation")
    for i in range(2):
        expected, _ = single.reset(options={"seed": 4 + i})
        for key in expected:
            np.testing.assert_array_equal(obs[key][i], expected[key])
    with pytest.raises(ValueError, match="actions"):
        vec.step(np.zeros((3, vec.max_slots), dtype=np.int64))
    with pytest.raises(ValueError, match="unknown reset options"):
        vec.reset(options={"level": "hard"})
    with pytest.raises(ValueError, match="2 seeds"):
        vec.reset(seed=[1, 2, 3])
    vec.close()
    with pytest.raises(ValueError, match="rubric component"):
        ServingTurnsVectorEnv(2, weights={"throughput": 2.0})
    with pytest.raises(RuntimeError, match="reset"):
        ServingTurnsVectorEnv(2).step(np.zeros((2, 128), dtype=np.int64))
    disabled = ServingTurnsVectorEnv(2, steps=1, autoreset_mode="Disabled")
    disabled.reset(seed=0)
    _, _, terminated, _, _ = disabled.step(np.zeros((2, 128), dtype=np.int64))
    assert terminated.all()
    with pytest.raises(RuntimeError, match="reset_mask"):
        disabled.step(np.zeros((2, 128), dtype=np.int64))
    disabled.close()


def test_observe_done_hook_observes_the_ending_turn():
    """`VectorSimulator(observe_done=True)` sends the final state's observation on the turn
    that ends an episode (the default still sends None there)."""
    spec = EpisodeSpec("easy", 5, steps=2)
    for observe_done in (False, True):
        with VectorSimulator([spec], observe=observe_turn, observe_done=observe_done) as vec:
            vec.reset()
            vec.step([[]])
            (last,) = vec.step([[]])
            assert last.done
            if not observe_done:
                assert last.observation is None
                continue
            view = last.observation
            assert isinstance(view, TurnView) and view.turn == 2 and view.final is not None
            assert view.mask[:, 1:].sum() == 0 and view.mask[:, 0].all()
            assert view.final[0] == score(vec.records()[0], DEFAULT_WEIGHTS).reward
