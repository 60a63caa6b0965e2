"""The Gymnasium interface (`kv_cache_env.rl.gym`): Gymnasium's own checker, determinism of two
copies stepped side by side, the action mask against the simulator, the rewards against the
rubric, the slot layout and the vector version."""

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from evals.serving.runner import run_policy_episode
from kv_cache_env.episodes import TRAIN_SEED_START
from kv_cache_env.policies import create
from kv_cache_env.rl.features import GLOBAL, MAX_SLOTS, SLOT, SLOT_FEATURES
from kv_cache_env.rl.gym import (
    ENV_ID,
    TURNS_ENV_ID,
    ServingEnv,
    ServingTurnsEnv,
    make_vector_env,
)
from kv_cache_env.sim import ACTIONS, Quantization, get_scenario
from rubrics import DEFAULT_WEIGHTS, score


def _random_masked(rng: np.random.Generator, mask: np.ndarray, p_end: float = 0.3) -> int:
    valid = np.flatnonzero(mask[1:]) + 1
    if len(valid) == 0 or rng.random() < p_end:
        return 0
    return int(rng.choice(valid))


def test_registered_on_import_and_passes_gymnasiums_checker():
    assert ENV_ID in gymnasium.registry
    env = gymnasium.make(ENV_ID, scenario="hard")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker's warnings fail the test too
        check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("reward", ["sparse", "shaped"])
def test_two_copies_stepped_side_by_side_stay_identical(reward):
    a = ServingEnv(scenario="agent-tools", reward=reward)
    b = ServingEnv(scenario="agent-tools", reward=reward)
    rng = np.random.default_rng(5)
    first: tuple[dict[str, np.ndarray], int] | None = None
    for episode in range(2):
        seed = 11 if episode == 0 else None  # the second episode comes from the seeded stream
        obs_a, info_a = a.reset(seed=seed)
        obs_b, info_b = b.reset(seed=seed)
        assert info_a["episode_seed"] == info_b["episode_seed"] >= TRAIN_SEED_START
        if first is None:
            first = (obs_a, info_a["episode_seed"])
        steps = 0
        while True:
            for key in obs_a:
                np.testing.assert_array_equal(obs_a[key], obs_b[key])
            action = _random_masked(rng, obs_a["action_mask"])
            obs_a, r_a, term_a, trunc_a, info_a = a.step(action)
            obs_b, r_b, term_b, trunc_b, info_b = b.step(action)
            steps += 1
            assert (r_a, term_a, trunc_a) == (r_b, term_b, trunc_b)
            assert not trunc_a
            if term_a:
                assert info_a["components"] == info_b["components"]
                break
        assert steps > a.sim.scenario.steps  # sub-steps happened
    # a reseeded copy replays the first episode; another seed draws another one
    assert first is not None
    c = ServingEnv(scenario="agent-tools", reward=reward)
    obs_c, info_c = c.reset(seed=11)
    assert info_c["episode_seed"] == first[1]
    for key in obs_c:
        np.testing.assert_array_equal(obs_c[key], first[0][key])
    d = ServingEnv(scenario="agent-tools")
    _, info_d = d.reset(seed=12)
    assert info_c["episode_seed"] != info_d["episode_seed"]


def test_the_mask_is_what_the_simulator_accepts():
    env = ServingEnv(scenario="big-cpu")
    obs, _ = env.reset(options={"seed": 3})
    rng = np.random.default_rng(0)
    checked = 0
    while not env.sim.done:
        if env.sim.turn % 4 == 1:  # probe every action on a copy of the simulator
            for action in range(env.n_actions):
                act = env.decode(action)
                if act is None:
                    assert obs["action_mask"][action] == (action == 0)
                    continue
                result = env.sim.clone().apply(act)
                assert result.ok == bool(obs["action_mask"][action]), (act, result.message)
                checked += 1
        obs, *_ = env.step(_random_masked(rng, obs["action_mask"]))
    assert checked > 100


def test_invalid_actions_change_nothing_and_are_counted():
    env = ServingEnv(scenario="medium")
    obs, _ = env.reset(options={"seed": 0})
    before = env.sim.clone()
    shown = int(obs["slots"][:, SLOT["present"]].sum())
    empty_slot = 1 + shown  # evict on the first empty row
    obs2, reward, terminated, _, info = env.step(empty_slot)
    assert "error" in info and reward == 0 and not terminated
    np.testing.assert_array_equal(obs["slots"], obs2["slots"])
    assert env.sim.engine.kv.pool.used == before.engine.kv.pool.used
    while True:
        obs, reward, terminated, _, info = env.step(0)
        if terminated:
            break
    assert info["metrics"]["invalid_calls"] == 1
    assert info["reward"] == pytest.approx(score(env.sim.record(), DEFAULT_WEIGHTS).reward)


@pytest.mark.parametrize("scenario", ["hard", "chat-human"])
def test_rewards_are_the_rubric_and_shaping_telescopes(scenario):
    """A gym agent doing what `int8-everything` does earns exactly its rubric reward; the
    shaped rewards of the same episode sum to it."""
    policy_reward = score(
        run_policy_episode(create("int8-everything"), get_scenario(scenario), 4), DEFAULT_WEIGHTS
    ).reward
    totals = {}
    for mode in ("sparse", "shaped"):
        env = ServingEnv(scenario=scenario, reward=mode)
        env.reset(options={"seed": 4})
        total, rewards = 0.0, []
        while True:
            fp16 = [
                e.seq_id
                for e in env._obs.entries
                if not e.swapped and e.quantization is Quantization.FP16
            ]
            ids = [e.seq_id for e in env._obs.entries]
            # compress the first fp16 sequence of this sub-step, re-read, repeat; then end the turn
            action = 1 + env.max_slots + ids.index(fp16[0]) if fp16 else 0
            _, reward, terminated, _, info = env.step(action)
            total += reward
            rewards.append(reward)
            if terminated:
                break
        totals[mode] = total
        if mode == "sparse":
            assert all(r == 0 for r in rewards[:-1])
            assert info["reward"] == pytest.approx(policy_reward, abs=1e-12)
        else:
            assert sum(1 for r in rewards if r != 0) > 3  # paid along the way
    assert totals["sparse"] == pytest.approx(policy_reward, abs=1e-12)
    assert totals["shaped"] == pytest.approx(policy_reward, abs=1e-9)


def test_slot_layout_and_the_size_cap():
    env = ServingEnv(scenario="hard", max_slots=4)
    obs, _ = env.reset(options={"seed": 2})
    entries = env._obs.entries
    assert len(entries) > 4  # hard holds more sequences than this cap
    assert obs["slots"].shape == (4, len(SLOT_FEATURES))
    assert obs["slots"][:, SLOT["present"]].tolist() == [1, 1, 1, 1]
    assert obs["globals"][GLOBAL["entries"]] == pytest.approx(len(entries) / MAX_SLOTS)
    for row, e in zip(obs["slots"], entries[:4], strict=True):
        assert row[SLOT[f"type_{e.block_type}"]] == 1
        assert row[SLOT[f"kv_{e.quantization}"]] == 1
        assert row[SLOT["private_blocks"]] == pytest.approx(e.private_blocks / env._obs.capacity)
        assert row[SLOT["paused_gpu"]] == (e.paused and not e.swapped)
    assert obs["action_mask"].shape == (1 + len(ACTIONS.targeted) * 4,)
    assert env.observation_space.contains(obs)
    # the fifth sequence cannot be named: every action index maps to the first four rows
    named = {env.decode(a).seq_id for a in range(1, env.n_actions) if env.decode(a)}
    assert named == {e.seq_id for e in entries[:4]}


def test_reset_options_pick_the_episode():
    env = ServingEnv()
    _, info = env.reset(options={"scenario": "flash-crowd", "seed": 7})
    assert (info["scenario"], info["episode_seed"]) == ("flash-crowd", 7)
    assert env.sim.scenario.name == "flash-crowd" and env.sim.seed == 7
    _, info = env.reset(options={"trace": "mooncake-conversation", "seed": 1})
    assert info["scenario"] == "trace:mooncake-conversation"
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"level": "hard"})
    with pytest.raises(ValueError, match="reward"):
        ServingEnv(reward="dense")  # type: ignore[arg-type]


def test_vector_env_runs_copies_in_lockstep():
    envs = make_vector_env(2, scenario="easy")
    obs, info = envs.reset(seed=3)
    assert obs["slots"].shape[0] == 2
    assert obs["action_mask"].shape == (2, envs.single_action_space.n)
    assert list(info["episode_seed"]) != [info["episode_seed"][0]] * 2
    done = np.zeros(2, dtype=bool)
    rewards = np.zeros(2)
    while not done.all():
        obs, reward, terminated, _, _ = envs.step(np.zeros(2, dtype=np.int64))  # noop turns
        rewards += np.where(done, 0, reward)
        done |= terminated
    single = ServingEnv(scenario="easy")
    expected = []
    for seed in info["episode_seed"]:
        single.reset(options={"seed": int(seed)})
        while True:
            *_, terminated, _, step_info = single.step(0)
            if terminated:
                expected.append(step_info["reward"])
                break
    np.testing.assert_allclose(rewards, expected)
    envs.close()


def test_turns_env_passes_the_checker_and_plays_learned_exactly():
    """`kvcache/ServingTurns-v0` (one step per turn): Gymnasium's checker passes, and the
    `learned` policy played through it (its calls as one per-row choice) earns exactly what it
    earns in-process; the per-turn mask says what each row accepts."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gymnasium.make(TURNS_ENV_ID, scenario="big-cpu").unwrapped)
    expected = score(
        run_policy_episode(create("learned"), get_scenario("chat-human"), 2), DEFAULT_WEIGHTS
    ).reward
    env = ServingTurnsEnv(scenario="chat-human")
    obs, _ = env.reset(options={"seed": 2})
    policy = create("learned")
    steps = 0
    code = {"evict": 1, "compress": 2, "swap": 3}
    while True:
        action = np.zeros(env.max_slots, dtype=np.int64)
        ids = [e.seq_id for e in env._obs.entries]
        for call in policy.act(env._obs):
            slot = ids.index(call.seq_id)
            action[slot] = code[call.kind]
            assert obs["action_mask"][slot, code[call.kind]] == 1
        assert env.decode(action) == policy.act(env._obs)
        obs, reward, terminated, truncated, info = env.step(action)
        steps += 1
        if terminated:
            break
        assert reward == 0 and not truncated
    assert steps == env.sim.scenario.steps
    assert reward == info["reward"] == pytest.approx(expected, abs=1e-12)
    assert env.action_masks().shape == (env.max_slots * 4,)


def test_turns_env_vector_copies_end_together():
    envs = make_vector_env(3, env_id=TURNS_ENV_ID, scenario="hard")
    obs, _ = envs.reset(seed=9)
    assert obs["action_mask"].shape == (3, MAX_SLOTS, 4)
    rng = np.random.default_rng(1)
    for turn in range(15):
        mask = obs["action_mask"]
        action = np.array(
            [[rng.choice(np.flatnonzero(row)) for row in env_mask] for env_mask in mask]
        )
        obs, reward, terminated, truncated, info = envs.step(action)
        assert terminated.all() == (turn == 14) and not truncated.any()
    assert np.all(reward == info["reward"])
    envs.close()
