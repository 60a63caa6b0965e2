"""The hosted-model path end to end through real loopback HTTP: a policy served as an
OpenAI-compatible endpoint, the openai client, the agent loop, tools, simulator and rubric."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from evals.common.results import validate
from evals.servers.policy_server import PolicyServer, parse_faults
from evals.serving.jobs import EpisodeJob, run_job
from evals.serving.model_eval import ModelSpec, run_model_jobs
from kv_cache_env.episodes import EpisodeSpec


def _model_results(server, jobs, **spec_changes):
    spec = ModelSpec(name="lru", base_url=server.base_url, **spec_changes)
    out = []
    asyncio.run(
        run_model_jobs(jobs, spec, concurrency=3, on_result=lambda r, t: out.append((r, t)))
    )
    return sorted(out, key=lambda rt: (rt[0]["scenario"], rt[0]["seed"]))


@pytest.mark.parametrize("policy", ["lru", "compress-first", "headroom"])
def test_served_policy_matches_in_process_policy(policy):
    jobs = [
        EpisodeJob(policy, EpisodeSpec(scenario, seed))
        for scenario in ("easy", "hard")
        for seed in (0, 1)
    ]
    with PolicyServer(policy) as server:
        spec = ModelSpec(name=policy, base_url=server.base_url)
        served = []
        asyncio.run(
            run_model_jobs(jobs, spec, concurrency=4, on_result=lambda r, t: served.append(r))
        )
    served.sort(key=lambda r: (r["scenario"], r["seed"]))
    local = sorted((run_job(job) for job in jobs), key=lambda r: (r["scenario"], r["seed"]))
    for remote, mine in zip(served, local, strict=True):
        assert validate(remote) == []
        assert remote["components"] == mine["components"]
        assert remote["reward"] == mine["reward"]
        assert remote["metrics"] == mine["metrics"]
        assert remote["usage"]["input_tokens"] > 0 and mine["usage"] is None


def test_lookahead_cannot_be_served():
    with pytest.raises(ValueError, match="needs the simulator itself"):
        PolicyServer("lookahead")


def test_server_binds_loopback_only():
    with pytest.raises(ValueError, match="loopback only"):
        PolicyServer("lru", host="0.0.0.0")


def test_bad_fault_specs_are_rejected():
    assert parse_faults("2:429, 4:badjson") == {2: "429", 4: "badjson"}
    for spec in ("x:429", "0:500", "3:teapot", "3"):
        with pytest.raises(ValueError, match="bad fault"):
            parse_faults(spec)


def test_retries_absorb_429_500_and_timeouts_and_badjson_is_an_invalid_call():
    jobs = [EpisodeJob("lru", EpisodeSpec("hard", 0))]
    faults = {1: "429", 2: "500", 3: "timeout", 5: "drop", 8: "badjson"}
    with PolicyServer("lru", faults=faults, timeout_s=2.0) as server:
        ((result, transcript),) = _model_results(server, jobs, timeout_s=0.5, max_retries=3)
    assert result["status"] == "ok", result["error"]
    assert result["metrics"]["invalid_calls"] >= 1
    assert transcript is not None and len(transcript["messages"]) > 15
    errors = [
        m["content"]
        for m in transcript["messages"]
        if m["role"] == "tool" and "error" in m["content"]
    ]
    assert any("not valid JSON" in e for e in errors)


def test_a_rollout_that_keeps_failing_is_recorded_as_failed():
    jobs = [EpisodeJob("lru", EpisodeSpec("easy", 0))]
    faults = dict.fromkeys(range(1, 10), "500")
    with PolicyServer("lru", faults=faults) as server:
        ((result, transcript),) = _model_results(server, jobs, max_retries=1)
    assert result["status"] == "failed" and result["reward"] is None
    assert "InternalServerError" in result["error"] and transcript is None
    assert validate(result) == []


SENTINEL_KEY = "sk-test-never-write-me-0123456789"


def _kvarena(*args):
    env = {**os.environ, "OPENAI_API_KEY": SENTINEL_KEY}
    return subprocess.Popen(
        [sys.executable, "-m", "evals.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.long_running
def test_killed_run_resumes_to_the_same_complete_results(tmp_path):
    faults = {2: "429", 5: "timeout", 9: "500", 12: "drop"}
    with PolicyServer("lru", faults=faults, timeout_s=3.0) as server:
        base = (
            "eval",
            "--model",
            "lru",
            "--base-url",
            server.base_url,
            "-s",
            "easy,hard",
            "--timeout",
            "1",
        )
        clean = _kvarena(*base, "-n", "3", "-o", str(tmp_path / "clean"))
        assert clean.wait(timeout=300) == 0, clean.stderr.read()

        run_dir = tmp_path / "killed"
        results = run_dir / "results.jsonl"
        proc = _kvarena(*base, "-n", "3", "-c", "1", "-o", str(run_dir))
        deadline = time.time() + 120
        while time.time() < deadline:
            if results.exists() and len(results.read_text().splitlines()) >= 2:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        kept = results.read_text().splitlines()
        assert 2 <= len(kept) < 6, "the kill must land mid-run"

        resumed = _kvarena(*base, "-n", "3", "--resume", "-o", str(run_dir))
        assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    lines = results.read_text().splitlines()
    keys = [(r["scenario"], r["seed"]) for r in map(json.loads, lines)]
    assert len(lines) == 6 and len(set(keys)) == 6
    assert all(json.loads(line)["status"] == "ok" for line in lines)
    assert results.read_bytes() == (tmp_path / "clean" / "results.jsonl").read_bytes()
    # the same episodes played in-process by the policy itself: identical components
    policy_run = _kvarena(
        "eval", "-p", "lru", "-s", "easy,hard", "-n", "3", "-o", str(tmp_path / "p")
    )
    assert policy_run.wait(timeout=300) == 0
    in_process = (tmp_path / "p" / "results.jsonl").read_text().splitlines()
    for served, local in zip(map(json.loads, lines), map(json.loads, in_process), strict=True):
        assert served["components"] == local["components"]
        assert served["reward"] == local["reward"]
    written = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(written) >= 8  # results, run.json, transcripts
    assert all(SENTINEL_KEY not in p.read_text() for p in written)


def test_a_sampling_seed_gives_each_rollout_its_own_samples_reproducibly():
    # `random` behind the policy server samples from each request's text and `seed`: the same
    # task under two sampling seeds gives two rollouts, the same seed gives the same one, and
    # no seed gives what it always gave (the request's text alone).
    jobs = [EpisodeJob("random", EpisodeSpec("hard", seed)) for seed in (0, 1)]

    def rewards(**spec_changes):
        with PolicyServer("random") as server:
            results = _model_results(server, jobs, **spec_changes)
        return [(r["reward"], r["metrics"]) for r, _ in results]

    first, again = rewards(sampling_seed=1), rewards(sampling_seed=1)
    other, unseeded = rewards(sampling_seed=2), rewards()
    assert first == again
    assert first != other and first != unseeded
    assert unseeded == rewards()


def test_sampling_seeds_differ_by_request_and_are_refused_where_no_api_takes_them(tmp_path):
    from evals.serving.model_eval import request_seeds

    draw = request_seeds(5, 0)
    assert draw is not None and request_seeds(None, 0) is None
    seeds = [draw() for _ in range(4)]
    again = request_seeds(5, 0)
    assert seeds == [again() for _ in range(4)] and len(set(seeds)) == 4
    other_task = request_seeds(5, 1)
    assert [other_task() for _ in range(4)] != seeds
    base = [sys.executable, "-m", "evals.cli", "eval", "-s", "easy", "-n", "1", "-o"]
    for extra, message in [
        (["-p", "random", "--sampling-seed", "3"], "--sampling-seed needs --model"),
        (
            ["--model", "m", "--api", "anthropic", "--sampling-seed", "3"],
            "Anthropic Messages API takes no seed",
        ),
    ]:
        done = subprocess.run(
            [*base, str(tmp_path / "x"), *extra], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr
