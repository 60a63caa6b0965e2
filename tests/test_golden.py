"""Golden runs: one small `results.jsonl` per family (and the prompt-cache replay's JSON), compared
byte for byte.

They pin behaviour across refactors (the layout issue moves code, the engine-speed work must be
semantics-neutral). A change that is meant to alter results regenerates them deliberately:
`KVARENA_UPDATE_GOLDEN=1 uv run pytest tests/test_golden.py`, and says why in its commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"

RUNS: dict[str, tuple[str, ...]] = {
    "serving": (
        "eval",
        "-p",
        "noop,lru,compress-all,discard-paused,swap-paused+compress-all",
        "-s",
        "easy,hard,chat-human",
        "-n",
        "1",
    ),
    "trace-mooncake": ("eval", "-p", "lru,compress-all", "--trace", "mooncake-conversation"),
    "trace-azure": ("eval", "-p", "lru,discard-paused", "--trace", "azure-conv-2023", "-s", "hard"),
    "context": ("context-eval", "-n", "1"),
}


@pytest.mark.long_running
@pytest.mark.parametrize("name", sorted(RUNS))
def test_results_match_the_golden_run(name: str, tmp_path: Path) -> None:
    args = list(RUNS[name])
    if args[0] == "eval":
        args += ["-n", "1"] if "-n" not in args else []
        args += ["-j", "1"]
    _compare(_cli_results(args, tmp_path), GOLDEN / f"{name}.jsonl", name)


def _cli_results(args: list[str], out: Path) -> bytes:
    """`kvarena ARGS -o OUT` in a fresh process; the results.jsonl it wrote."""
    done = subprocess.run(
        [sys.executable, "-m", "evals.cli", *args, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return (out / "results.jsonl").read_bytes()


def _compare(produced: bytes, golden: Path, name: str) -> None:
    if os.environ.get("KVARENA_UPDATE_GOLDEN") == "1":
        golden.write_bytes(produced)
    assert produced == golden.read_bytes(), (
        f"{name}: results differ from {golden} (if intended: KVARENA_UPDATE_GOLDEN=1, and say why)"
    )


@pytest.mark.long_running
def test_prompt_cache_family_matches_the_golden_run(tmp_path: Path) -> None:
    # The prompt-cache family end to end: a keyless model (the `lru` policy behind the policy
    # server's Anthropic Messages endpoint, which models a provider cache) played with the hybrid
    # planner's `cache_control` breakpoints, then `cache-replay` pricing its transcripts under
    # the five strategies. Both outputs are pinned: the recorded usage and the replay's JSON.
    from evals.servers.policy_server import PolicyServer

    out = tmp_path / "run"
    model = ["--model", "lru", "--api", "anthropic", "-s", "easy", "-n", "1", "--steps", "8"]
    with PolicyServer("lru") as server:
        url = server.anthropic_base_url
        model_run = subprocess.run(
            [sys.executable, "-m", "evals.cli", "eval", *model, "-o", str(out), "--base-url", url],
            capture_output=True,
            text=True,
            timeout=600,
            env=os.environ | {"ANTHROPIC_API_KEY": "unused-by-the-loopback-server"},
        )
    assert model_run.returncode == 0, model_run.stderr
    _compare((out / "results.jsonl").read_bytes(), GOLDEN / "prompt-cache.jsonl", "prompt-cache")
    prices = ["--price-in", "3", "--price-cached", "0.3", "--price-write", "3.75"]
    replay = subprocess.run(
        [sys.executable, "-m", "evals.cli", "cache-replay", str(out), *prices, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert replay.returncode == 0, replay.stderr
    _compare(replay.stdout.encode(), GOLDEN / "prompt-cache-replay.json", "cache-replay")


# --- the paths a layout refactor moves: planners, the vector simulator, Gymnasium, validate ---
# Generated on the commit before the first move (`KVARENA_UPDATE_GOLDEN=1`), so a refactor that
# keeps behaviour leaves these bytes as they are.
@pytest.mark.long_running
def test_planners_match_the_golden_run(tmp_path: Path) -> None:
    """The clairvoyant bound, the honest expert and the learned policy on seed 0 of every suite
    scenario (the bound comes from the shipped reference table only while that table is current
    for the code, i.e. a code change makes this test play it)."""
    from kv_cache_env.sim import SUITE

    args = ["eval", "-p", "bound,expert,learned", "-s", ",".join(SUITE), "-n", "1", "-j", "1"]
    produced = _cli_results(args, tmp_path)
    _compare(produced, GOLDEN / "serving-planners.jsonl", "serving-planners")


def _lru_agent(seed: int):
    from kv_cache_env.policies import create, decide

    policy = create("lru")
    policy.reset(seed)
    return lambda sim: decide(policy, sim)


def _observe_with_hints(sim):
    return sim.observe(hints=True)


def test_vector_simulator_matches_the_golden_run() -> None:
    """A `VectorSimulator` batch, played whole (`play`) and turn by turn (`reset` / `step`)."""
    from dataclasses import asdict

    from kv_cache_env.policies import create
    from kv_cache_env.sim import VectorSimulator

    episodes = [("hard", 0), ("agent-remote", 1), ("chat-human", 2)]
    with VectorSimulator(episodes) as vec:
        played = [r.to_dict() for r in vec.play(_lru_agent)]
    turns: list[list[object]] = [[] for _ in episodes]
    with VectorSimulator(episodes, observe=_observe_with_hints) as vec:
        observations = vec.reset()
        policies = [create("lru") for _ in episodes]
        while not vec.done:
            actions = [
                [] if done else policy.act(obs)
                for done, policy, obs in zip(vec.dones, policies, observations, strict=True)
            ]
            steps = vec.step(actions)
            for i, step in enumerate(steps):
                if step.stats is not None:
                    turns[i].append([[str(r) for r in step.results], asdict(step.stats)])
            observations = [step.observation for step in steps]
        stepped = [r.to_dict() for r in vec.records()]
    produced = json.dumps({"play": played, "step": stepped, "turns": turns}, sort_keys=True)
    _compare(produced.encode(), GOLDEN / "vector.json", "vector")


def _digest(obs: dict[str, object]) -> str:
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for key in sorted(obs):
        array = np.ascontiguousarray(obs[key])
        h.update(f"{key}{array.dtype}{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]


def _rollout(env, rng, turns: bool) -> list[dict[str, object]]:
    import numpy as np

    obs, info = env.reset(seed=123)
    out: list[dict[str, object]] = []
    while True:
        mask = np.asarray(obs["action_mask"])
        if turns:  # keep, or one allowed call, per slot
            valid = mask[..., 1:].astype(bool)
            pick = (rng.random(valid.shape) * valid).argmax(-1) + 1
            call = (rng.random(mask.shape[0]) < 0.3) & valid.any(-1)
            action = np.where(call, pick, 0).astype(np.int64)
        else:  # one allowed call (or end the turn) at random
            allowed = np.flatnonzero(mask)
            action = int(allowed[int(rng.integers(len(allowed)))])
        obs, reward, terminated, truncated, info = env.step(action)
        out.append(
            {
                "obs": _digest(obs),  # the arrays' bytes (exact, and small on disk)
                "reward": float(reward),
                "end": [bool(terminated), bool(truncated)],
                "info": json.loads(json.dumps(info, sort_keys=True, default=str)),
            }
        )
        if terminated or truncated:
            return out


def test_gymnasium_rollouts_match_the_golden_run() -> None:
    """One masked random episode of each Gymnasium env (per call, shaped reward; per turn)."""
    import numpy as np

    from kv_cache_env.rl.gym import ServingEnv, ServingTurnsEnv

    calls = _rollout(
        ServingEnv("agent-remote", steps=6, reward="shaped"), np.random.default_rng(5), False
    )
    turns = _rollout(ServingTurnsEnv("chat-human"), np.random.default_rng(6), True)
    produced = json.dumps({"calls": calls, "turns": turns}, sort_keys=True)
    _compare(produced.encode(), GOLDEN / "gym.json", "gym")
