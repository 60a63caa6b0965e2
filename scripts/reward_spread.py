"""Within-group reward spread: what a group-relative RL method (GRPO and kin) has to learn from.

    uv run python scripts/reward_spread.py                      # random policy, the suite
    uv run python scripts/reward_spread.py --model-runs runs/smol-r0 runs/smol-r1 ...

For the `random` policy (a sampling agent: 0-2 random calls per turn), each task (an episode
seed) is played `--rollouts` times with a different sampling seed per rollout, and the table
gives, per scenario, the within-task standard deviation of the reward (mean over tasks, and the
smallest), the share of tasks whose rollouts all score within 0.001, the spread between tasks,
the reward range, and the approximate prompt tokens per rollout (4 characters per token): with
no history (each turn sends the system prompt and the observation) and with the full history.

`--model-runs` reads `kvarena eval --model` run directories that played the same tasks (one
directory per rollout, e.g. at `--temperature 1`) and reports the same spread plus the token
counts the model's server returned.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from kv_cache_env.llm.prompt import system_prompt, turn_message
from kv_cache_env.llm.tools import tool_schemas
from kv_cache_env.policies import create
from kv_cache_env.sim import SUITE, Simulator, approx_tokens, get_scenario
from rubrics import DEFAULT_WEIGHTS, score


def random_rollout(scenario: str, seed: int, rollout: int) -> tuple[float, int, int]:
    """(reward, prompt tokens with no history, prompt tokens with the full history)."""
    sim = Simulator(get_scenario(scenario), seed)
    policy = create("random")
    policy.reset(int(np.random.SeedSequence([seed, rollout]).generate_state(1)[0]))
    fixed = approx_tokens(system_prompt(sim.scenario)) + approx_tokens(json.dumps(tool_schemas()))
    no_history = full = history = 0
    last = None
    while not sim.done:
        obs = sim.observe()
        message = approx_tokens(turn_message(obs, last))
        no_history += fixed + message
        history += message
        full += fixed + history
        actions = policy.act(obs)
        turn = sim.play_turn(actions)
        for action, result in zip(actions, turn.results, strict=True):
            history += approx_tokens(str(action)) + approx_tokens(str(result))
        last = turn.stats
    return score(sim.record(), DEFAULT_WEIGHTS).reward, no_history, full


def spread_rows(rewards: dict[int, list[float]]) -> dict[str, float]:
    """Spread of each task's group of rollouts (groups of 2 or more; sizes may differ)."""
    groups = [np.array(rewards[k]) for k in sorted(rewards) if len(rewards[k]) > 1]
    within = np.array([g.std(ddof=1) for g in groups])
    means = np.array([g.mean() for g in groups])
    return {
        "tasks": len(groups),
        "rollouts": min(len(g) for g in groups),
        "within_std_mean": float(within.mean()),
        "within_std_min": float(within.min()),
        "flat_share": float(np.mean([np.ptp(g) < 1e-3 for g in groups])),
        "between_std": float(means.std(ddof=1)) if len(groups) > 1 else 0.0,
        "min": float(min(g.min() for g in groups)),
        "max": float(max(g.max() for g in groups)),
    }


def random_table(tasks: int, rollouts: int) -> None:
    print(
        "| scenario | within-task std, mean (min) | tasks with all rollouts within 0.001 | "
        "between-task std | reward range | prompt tokens / rollout, no history / full |"
    )
    print("|---|---|---|---|---|---|")
    for scenario in SUITE:
        rewards: dict[int, list[float]] = defaultdict(list)
        tokens = []
        for seed in range(tasks):
            for r in range(rollouts):
                reward, nh, full = random_rollout(scenario, seed, r)
                rewards[seed].append(reward)
                tokens.append((nh, full))
        row = spread_rows(rewards)
        nh, full = np.mean(tokens, axis=0)
        print(
            f"| `{scenario}` | {row['within_std_mean']:.3f} ({row['within_std_min']:.3f}) | "
            f"{row['flat_share']:.0%} | {row['between_std']:.3f} | "
            f"{row['min']:+.3f} … {row['max']:+.3f} | {nh:,.0f} / {full:,.0f} |"
        )


def model_table(run_dirs: list[Path]) -> None:
    rewards: dict[tuple[str, int], list[float]] = defaultdict(list)
    usage: list[dict[str, int]] = []
    for run in run_dirs:
        for line in (run / "results.jsonl").read_text().splitlines():
            result = json.loads(line)
            if result["status"] != "ok":
                print(f"{run}: episode {result['scenario']}/{result['seed']} failed: skipped")
                continue
            rewards[(result["scenario"], result["seed"])].append(result["reward"])
            if result.get("usage"):
                usage.append(result["usage"])
    by_scenario: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for (scenario, seed), values in rewards.items():
        by_scenario[scenario][seed] = values
    for scenario, groups in by_scenario.items():
        row = spread_rows(groups)
        per_task = {seed: [round(v, 4) for v in vals] for seed, vals in sorted(groups.items())}
        print(f"{scenario}: {json.dumps(row)}")
        print(f"  rewards by task: {per_task}")
    if usage:
        keys = ("input_tokens", "cached_input_tokens", "output_tokens")
        means = {k: float(np.mean([u.get(k) or 0 for u in usage])) for k in keys}
        print(f"tokens per rollout (mean of {len(usage)}): {json.dumps(means)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10, help="tasks (seeds 0..N-1) per scenario")
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--model-runs", type=Path, nargs="*", default=None)
    args = parser.parse_args()
    if args.model_runs:
        model_table(args.model_runs)
    else:
        random_table(args.tasks, args.rollouts)


if __name__ == "__main__":
    main()
