"""The `kv-cache-env` verifiers taskset: vf-eval, vf-replay and the env-server path, against a
policy served over real loopback HTTP. Parity: the same per-episode components as in-process."""

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evals.servers.policy_server import PolicyServer
from evals.serving.jobs import EpisodeJob, run_job
from kv_cache_env.episodes import EpisodeSpec
from rubrics import COMPONENTS

BIN = Path(sys.executable).parent


def _local(scenario: str, seeds) -> dict[int, dict]:
    return {s: run_job(EpisodeJob("lru", EpisodeSpec(scenario, s))) for s in seeds}


def _traces(path: Path) -> list[dict]:
    return [t for line in path.read_text().splitlines() for t in json.loads(line)["traces"]]


def _vf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KV_TEST_KEY": "not-a-real-key"}
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=env,
    )


@pytest.mark.long_running
def test_vf_eval_and_vf_replay_match_in_process_policy(tmp_path):
    with PolicyServer("lru") as server:
        done = _vf(
            "vf-eval",
            "kv-cache-env",
            "-m",
            "lru",
            "--client.base-url",
            server.base_url,
            "--client.api-key-var",
            "KV_TEST_KEY",
            "-n",
            "2",
            "-r",
            "1",
            "--no-push",
            "--no-rich",
            "-o",
            str(tmp_path),
            "--run.name",
            "parity",
            "--env.taskset.scenario",
            "hard",
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    traces = _traces(tmp_path / "parity" / "traces.jsonl")
    local = _local("hard", (0, 1))
    assert len(traces) == 2
    for trace in traces:
        assert trace["ok"] and trace["stop_condition"] == "agent_completed"
        mine = local[trace["task"]["data"]["seed"]]
        scores = {name: r["score"] for name, r in trace["rewards"].items()}
        assert scores == mine["components"]
        reward = sum(r["score"] * r["weight"] for r in trace["rewards"].values())
        assert reward == pytest.approx(mine["reward"], abs=1e-12)
        assert trace["metrics"]["evict_calls"] == mine["metrics"]["evict_calls"]
        assert trace["info"]["turns_played"] == 15
        assert trace["info"]["episode_record"] == mine["record"]

    replay = _vf(
        "vf-replay",
        str(tmp_path / "parity"),
        "--no-rich",
        "--output-dir",
        str(tmp_path / "replayed"),
        "--taskset.id",
        "kv-cache-env",
        "--taskset.task.rewards",
        '{"failure_penalty": {"weight": 1.0}}',
        cwd=tmp_path,
    )
    assert replay.returncode == 0, replay.stderr[-3000:]
    replayed = _traces(next((tmp_path / "replayed").rglob("traces.jsonl")))
    for trace in replayed:
        mine = local[trace["task"]["data"]["seed"]]
        assert {n: r["score"] for n, r in trace["rewards"].items()} == mine["components"]
        assert trace["rewards"]["failure_penalty"]["weight"] == 1.0


def test_env_server_path_runs_episodes_and_survives_broken_tool_json():
    import verifiers.v1 as vf
    from verifiers.v1.serve import EnvClient, EnvServer
    from verifiers.v1.utils.loaders import load_taskset, resolve_env_config

    os.environ.setdefault("KV_TEST_KEY", "not-a-real-key")

    async def main(base_url: str):
        config = resolve_env_config(
            {"taskset": {"id": "kv-cache-env", "num_tasks": 2, "scenario": "medium"}}
        )
        assert config.agent.runtime.type == "subprocess"
        server = EnvServer(config, address="tcp://127.0.0.1:0", max_concurrent=4)
        serving = asyncio.create_task(server.run())
        client = EnvClient(server.address)
        try:
            await client.wait_for_server_startup(timeout=60, interval=0.2)
            tasks = list(load_taskset(config.taskset))
            episodes = await asyncio.gather(
                *(
                    client.run(
                        client=vf.EvalClientConfig(base_url=base_url, api_key_var="KV_TEST_KEY"),
                        model="lru",
                        sampling=vf.SamplingConfig(),
                        task_data=task.data.model_dump(mode="json"),
                    )
                    for task in tasks
                )
            )
        finally:
            await client.close()
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        return [t for episode in episodes for t in episode.traces]

    with PolicyServer("lru", faults={2: "badjson"}) as server:
        traces = asyncio.run(main(server.base_url))
    assert len(traces) == 2 and all(t.ok for t in traces)
    assert all(set(t.rewards) == set(COMPONENTS) for t in traces)
    assert all(t.info["turns_played"] == 15 for t in traces)
    assert sum(t.metrics["invalid_calls"] for t in traces) >= 1


def test_tasks_export_as_a_dataset():
    from kv_cache_env.taskset import KvCacheTasksetConfig, tasks_dataset

    dataset = tasks_dataset(KvCacheTasksetConfig(num_tasks=3, scenario="easy", base_seed=5))
    assert dataset.num_rows == 3
    assert dataset["seed"] == [5, 6, 7] and set(dataset["scenario"]) == {"easy"}
    assert all(p.startswith("turn 0/15") for p in dataset["prompt"])
    assert "Batch EVERY action" in dataset["system_prompt"][0]
