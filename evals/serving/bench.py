"""`kvarena bench`: speed and size figures, measured, never asserted.

- per scenario, over `episodes` episodes of the trivial `noop` policy: the median single-episode
  speed in turns/s, with and without the reset (schedule draw + unconstrained reference run +
  warm-up);
- the full Mooncake conversation trace replayed under `lru` (median of 3), load time apart;
- the text observation's size on `hard` in tokens (4 characters ~ 1 token);
- the environment's own cost per LLM turn on `hard` (simulator step + observation rendering +
  tool dispatch + message building), the model's time excluded: an in-process `lru` stands in
  for the model (it parses the text and answers tool calls) and its time is subtracted.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from functools import partial
from typing import Any

from rich.console import Console
from rich.progress import Progress

from kv_cache_env.policies import create, decide
from kv_cache_env.sim import TIERS, Simulator, approx_tokens, get_scenario, parse, render
from kv_cache_env.traces import load_trace, trace_scenario, trace_schedule

from .runner import run_policy_episode

DEFAULT_TRACE = "mooncake-conversation"
OBSERVATION_EPISODES = 100
ENV_EPISODES = 50


def run_bench(*, episodes: int, trace: str, progress: Console | None) -> dict[str, Any]:
    """`trace`: a built-in trace name (default: the packaged Mooncake trace) or a path."""
    figures: dict[str, Any] = {"episodes_per_scenario": episodes}
    bar = Progress(console=progress, disable=progress is None, transient=True)
    with bar:
        for tier in TIERS:
            task = bar.add_task(f"bench {tier}", total=episodes)
            figures.update(_scenario_speed(tier, episodes, partial(bar.advance, task)))
        task = bar.add_task("env turn overhead", total=ENV_EPISODES)
        figures.update(_env_overhead(partial(bar.advance, task)))
        task = bar.add_task("mooncake replay x3", total=3)
        figures.update(_trace_replay(trace, partial(bar.advance, task)))
    return figures


def _scenario_speed(tier: str, episodes: int, tick) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    scenario = get_scenario(tier)
    policy = create("noop")
    whole, turns_only, obs_tokens = [], [], []
    for seed in range(episodes):
        start = time.perf_counter()
        sim = Simulator(scenario, seed)
        reset_done = time.perf_counter()
        while not sim.done:
            sim.play_turn(decide(policy, sim))
        end = time.perf_counter()
        whole.append(scenario.steps / (end - start))
        turns_only.append(scenario.steps / (end - reset_done))
        if tier == "hard" and seed < OBSERVATION_EPISODES:
            obs_tokens.extend(_observation_sizes(scenario, seed))
        tick()
    figures: dict[str, Any] = {
        f"{tier}.turns_per_s_median": statistics.median(whole),
        f"{tier}.turns_per_s_median_excluding_reset": statistics.median(turns_only),
        f"{tier}.episode_ms_median": 1000 * scenario.steps / statistics.median(whole),
    }
    if obs_tokens:
        figures["hard.observation_tokens_median"] = statistics.median(obs_tokens)
        figures["hard.observation_tokens_max"] = max(obs_tokens)
    return figures


def _observation_sizes(scenario, seed: int) -> list[int]:  # type: ignore[no-untyped-def]
    sim = Simulator(scenario, seed)
    sizes = []
    while not sim.done:
        sizes.append(approx_tokens(render(sim.observe())))
        sim.step()
    return sizes


def _trace_replay(path: str, tick) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    trace = load_trace(path)
    load_s = time.perf_counter() - start
    scenario = trace_scenario(trace, full=True)
    schedule = trace_schedule(trace, scenario, 0, full=True)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        run_policy_episode(create("lru"), scenario, 0, schedule=schedule)
        times.append(time.perf_counter() - start)
        tick()
    return {
        "mooncake.requests": len(trace.requests),
        "mooncake.steps": scenario.steps,
        "mooncake.load_s": load_s,
        "mooncake.replay_lru_s_median": statistics.median(times),
    }


def _env_overhead(tick) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from kv_cache_env.llm.agent_loop import play_episode
    from model_client.model_output import ToolCall
    from model_client.reply import ModelReply

    from ..servers.policy_server import tool_calls_for

    scenario = get_scenario("hard")
    per_turn = []
    for seed in range(ENV_EPISODES):
        model_time = 0.0

        async def chat(messages, tools):  # type: ignore[no-untyped-def]
            nonlocal model_time
            start = time.perf_counter()
            actions = create("lru").act(parse(messages[-1]["content"]))
            calls = tuple(
                ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                for c in tool_calls_for(actions)
            )
            model_time += time.perf_counter() - start
            return ModelReply(None, calls)

        sim = Simulator(scenario, seed)
        start = time.perf_counter()
        asyncio.run(play_episode(sim, chat))
        per_turn.append((time.perf_counter() - start - model_time) / scenario.steps)
        tick()
    return {"hard.env_overhead_ms_per_turn_median": 1000 * statistics.median(per_turn)}
