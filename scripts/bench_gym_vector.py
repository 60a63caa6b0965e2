"""Env-steps per second of the batched vector env (`kv_cache_env.rl.gym_vector`) against
Gymnasium's `SyncVectorEnv` over `ServingTurnsEnv` copies, on the same episodes and actions.

    uv run python scripts/bench_gym_vector.py --envs 64 --scenario hard --workers 0 2

Each configuration resets with the same seed and plays `--episodes` episodes per sub-env
(15 turns each, autoreset in between) under a seeded random policy that samples from the action
mask, timing the whole loop (resets included; the policy's sampling too, identical for all).
One env-step is one sub-env's turn. `main_cpu_s` is the CPU the driving process spent in the
loop (what a learner's process pays), `workers_cpu_s` the worker processes' (from their start,
so including the simulators' construction). Wall time depends on the machine's load: the
configurations run interleaved `--repeat` times (so load drifts hit them alike); the script
reports the median and range of env-steps/s and the 1-minute load average around each run.
Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from typing import Any

import numpy as np

from kv_cache_env.rl.gym import ServingTurnsEnv
from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv


def sample(rng: np.random.Generator, mask: np.ndarray, p_call: float = 0.3) -> np.ndarray:
    """Per sub-env and row: keep, or with probability `p_call` a call the mask allows."""
    valid = mask[..., 1:].astype(bool)
    pick = (rng.random(valid.shape) * valid).argmax(-1) + 1
    call = (rng.random(mask.shape[:2]) < p_call) & valid.any(-1)
    return np.where(call, pick, 0).astype(np.int64)


def run(envs: Any, episodes: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    load = os.getloadavg()[0]
    start, cpu = time.perf_counter(), time.process_time()
    obs, _ = envs.reset(seed=seed)
    steps = rewards = 0.0
    ended = 0
    while ended < episodes:
        obs, reward, terminated, _, _ = envs.step(sample(rng, obs["action_mask"]))
        steps += envs.num_envs
        rewards += float(reward.sum())
        ended += bool(terminated.all())
    wall = time.perf_counter() - start
    return {
        "wall_s": round(wall, 3),
        "main_cpu_s": round(time.process_time() - cpu, 3),
        "env_steps": int(steps),
        "env_steps_per_s": round(steps / wall, 1),
        "mean_episode_reward": rewards / (episodes * envs.num_envs),
        "load_before": load,
        "load_after": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--scenario", default="hard")
    parser.add_argument("--episodes", type=int, default=1, help="episodes per sub-env")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--no-sync", action="store_true", help="skip the SyncVectorEnv baseline")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per config")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    from gymnasium.vector import SyncVectorEnv

    configs: list[tuple[str, int | None]] = []
    if not args.no_sync:
        configs.append(("SyncVectorEnv", None))
    configs += [(f"batched workers={w}", w) for w in args.workers]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in configs}
    for _ in range(args.repeat):
        for name, workers in configs:
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            if workers is None:
                envs: Any = SyncVectorEnv(
                    [lambda: ServingTurnsEnv(scenario=args.scenario) for _ in range(args.envs)]
                )
            else:
                envs = ServingTurnsVectorEnv(args.envs, scenario=args.scenario, workers=workers)
            runs[name].append(run(envs, args.episodes, args.seed))
            envs.close()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, once joined
            spent = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
            runs[name][-1]["workers_cpu_s"] = round(spent, 3)
            print(f"{name:22s} {json.dumps(runs[name][-1])}", flush=True)
    rewards = {r["mean_episode_reward"] for rs in runs.values() for r in rs}
    assert len(rewards) == 1, f"configurations disagree: {rewards}"
    summary = {}
    for name, rs in runs.items():
        rates = [r["env_steps_per_s"] for r in rs]
        summary[name] = {
            "median_env_steps_per_s": float(np.median(rates)),
            "min": min(rates),
            "max": max(rates),
            "median_main_cpu_s": float(np.median([r["main_cpu_s"] for r in rs])),
            "median_workers_cpu_s": float(np.median([r["workers_cpu_s"] for r in rs])),
        }
        print(
            f"{name:22s} median {summary[name]['median_env_steps_per_s']:7.1f} env-steps/s "
            f"(range {min(rates)}-{max(rates)}, {len(rs)} runs)"
        )
    if args.out:
        meta = {"envs": args.envs, "scenario": args.scenario, "episodes": args.episodes}
        with open(args.out, "w") as fh:
            out = {"config": meta, "cpus": os.cpu_count(), "summary": summary, "runs": runs}
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
