"""`--backend ray`: the same results as the local pool, episodes that really ran in Ray workers,
and the faults a cluster has (a worker process killed mid-episode, a node removed, a run
stopped) losing and duplicating nothing.

One two-node `ray.cluster_utils.Cluster` on 127.0.0.1 (a head and a worker node, one CPU and a
small object store each) serves the whole module: Ray takes ~20-30 s of CPU to start here, so
it starts once. The commands run in this process (the CLI's `--backend ray` uses the Ray
connection the fixture made), so a test can see where the tasks ran (`ray_pool.placements`)
and find the worker processes by their process title (`ray::_run` while a task runs). The
local runs they are compared with play in-process (`-j 1`: forking a process that holds Ray's
threads is unsafe, and `-j` does not change results). The node removal comes last: it leaves
the head alone. Every test has a time limit (`TEST_LIMIT_S`): a run that waits for ever fails
with every thread's stack instead of hanging the suite.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common import backends, ray_pool
from evals.common.backends import Backend, backend_option
from evals.common.edge import EXIT_EPISODES_FAILED, InputError

pytestmark = pytest.mark.xdist_group("ray-cluster")
runner = CliRunner()
TASK_TITLE = b"ray::_run"
"""A Ray worker's process title while it runs one of `RayPool`'s tasks."""
SLOW = ["-p", "bound", "-s", "hard", "-n", "2", "--seed", "500"]
"""Episodes of a second or more (the bound, off the shipped reference table's seeds 0-99)."""
TEST_LIMIT_S = 300
"""The most one test may take (its longest ran ~40 s under a load of 10 on 2 cores)."""


@pytest.fixture(autouse=True)
def time_limit() -> Iterator[None]:
    """Fail a test still running after `TEST_LIMIT_S` with every thread's stack (SIGALRM, in
    the main thread, where the test runs); should that not end it, a minute later the process
    exits with the stacks on stderr rather than hang the suite."""

    def expired(signum: int, frame: object) -> None:
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        stacks = "".join(
            f"\n--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(top))
            for ident, top in sys._current_frames().items()
        )
        pytest.fail(f"still running after {TEST_LIMIT_S} s; the threads:{stacks}", pytrace=False)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, TEST_LIMIT_S)
    faulthandler.dump_traceback_later(TEST_LIMIT_S + 60, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    ray = ray_or_skip()
    from ray.cluster_utils import Cluster

    store = 80 * 1024**2
    made = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "object_store_memory": store,
            "include_dashboard": False,
            "_system_config": ray_pool.SYSTEM_CONFIG,  # workers at the tests' priority
        },
    )
    try:
        made.add_node(num_cpus=1, object_store_memory=store)
        ray.init(address=made.address, logging_level=logging.WARNING, log_to_driver=False)
        made.wait_for_nodes()
        yield made
    finally:
        ray.shutdown()
        made.shutdown()


@pytest.fixture(scope="module")
def slow_local(tmp_path_factory) -> bytes:
    """The `SLOW` episodes' results, played in this process."""
    out = tmp_path_factory.mktemp("slow") / "local"
    _cli(["eval", *SLOW, "-j", "1", "-o", str(out)])
    return _results(out)


def _cli(args: list[str], code: int = 0) -> str:
    done = runner.invoke(app, args)
    assert done.exit_code == code, done.output
    return done.output


def _results(out: Path) -> bytes:
    return (out / "results.jsonl").read_bytes()


def _task_pids() -> list[int]:
    """The Ray worker processes running a `RayPool` task now (by process title)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            title = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title == TASK_TITLE:
            found.append(int(entry))
    return found


def _when_running(act: Callable[[list[int]], None], count: int = 1) -> threading.Thread:
    """A thread that calls `act(pids)` once `count` worker processes run a task (15 s at most)."""

    def watch() -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            pids = _task_pids()
            if len(pids) >= count:
                act(pids)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_without_ray_the_backend_error_names_the_install_command(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(InputError, match=r"uv sync --extra ray"):
        backend_option("ray", None)
    with pytest.raises(InputError, match="--address needs --backend ray"):
        backend_option("local", "127.0.0.1:6379")
    with pytest.raises(InputError, match="--backend must be one of local, ray"):
        backend_option("dask", None)
    with pytest.raises(InputError, match="a model's episodes play in this process"):
        backend_option("ray", None, model=True)


def test_a_driver_under_uv_run_sends_no_uv_environment(monkeypatch) -> None:
    # Under `uv run` (the test command) Ray's default would zip the working directory and start
    # workers with `uv run` in that copy, where nothing is installed: none ever registered
    ray_or_skip()
    from ray._private import worker
    from ray._private.runtime_env import uv_runtime_env_hook

    uv = ["/usr/bin/uv", "run", "--no-sync", "pytest"]
    monkeypatch.setattr(uv_runtime_env_hook, "_get_uv_run_cmdline", lambda: uv)
    assert worker._maybe_modify_runtime_env(None, _skip_env_hook=True) is None


def test_the_address_defaults_to_ray_address(monkeypatch) -> None:
    ray_or_skip()
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert backend_option("ray", None) == Backend("ray", "10.0.0.5:6379")
    assert backend_option("ray", "") == Backend("ray", None)  # empty: a Ray instance here


def test_a_worker_with_other_code_refuses_to_play(cluster) -> None:
    # the task's body, called here: the digest is checked before the job
    assert ray_pool._run("t", None, ray_pool.code_digest(), None, len, ([1, 2],), {})[0] == 2
    with pytest.raises(RuntimeError, match="runs other code than the run's"):
        ray_pool._run("t", None, "0" * 16, None, len, ([1, 2],), {})


def test_eval_on_ray_writes_the_local_runs_results_from_ray_workers(cluster, tmp_path) -> None:
    args = ["eval", "-p", "lru,compress-all,lookahead,swap-paused", "-s", "easy,hard", "-n", "2"]
    _cli([*args, "-j", "1", "-o", str(tmp_path / "local")])
    before = ray_pool.placements()
    output = _cli([*args, "--backend", "ray", "-o", str(tmp_path / "ray")])
    assert _results(tmp_path / "ray") == _results(tmp_path / "local")
    ran = ray_pool.placements() - before
    assert ran.total() == 16  # every episode (the shipped table holds only noop and the bound)
    assert os.getpid() not in {pid for _, pid in ran}  # in Ray's worker processes
    assert "on Ray: 16 tasks ran in" in output
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["status"] == "complete" and run["arguments"]["backend"] == "ray"


def test_context_eval_on_ray_writes_the_local_runs_results(cluster, tmp_path) -> None:
    args = ["context-eval", "-p", "noop,trt-lru,oracle", "-l", "easy,medium", "-n", "1"]
    _cli([*args, "-j", "1", "-o", str(tmp_path / "local")])
    before = ray_pool.placements()
    _cli([*args, "--backend", "ray", "-o", str(tmp_path / "ray")])
    assert _results(tmp_path / "ray") == _results(tmp_path / "local")
    ran = ray_pool.placements() - before
    assert ran.total() == 6 and os.getpid() not in {pid for _, pid in ran}


def test_validate_jobs_on_ray_give_the_local_results(cluster) -> None:
    # every kind of agent validate plays, on the CI block (off every proof block); the whole
    # `validate --ci --json` comparison is scripts/bench_ray.py's (minutes on 2 cores)
    from evals.serving.validate import CI_START
    from evals.serving.validate_jobs import Job, run_jobs

    jobs = [
        Job("lru", "hard", CI_START),
        Job("swap-paused", "chat-human", CI_START + 1),
        Job("bound", "easy", CI_START, kind="bound"),
        Job("no-swap", "easy", CI_START, kind="no-swap"),
        Job("expert", "easy", CI_START, kind="expert"),
    ]
    local = run_jobs(jobs, workers=1)
    before = ray_pool.placements()
    with backends.use(Backend("ray")):
        remote = run_jobs(jobs, workers=2)
    assert (ray_pool.placements() - before).total() == len(jobs)
    assert {r.key: r.fingerprint() for r in remote} == {r.key: r.fingerprint() for r in local}


def test_a_killed_worker_process_is_retried_and_nothing_is_lost(
    cluster, slow_local, tmp_path
) -> None:
    killed: list[int] = []

    def kill(pids: list[int]) -> None:
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])

    watcher = _when_running(kill)
    before = ray_pool.placements()
    _cli(["eval", *SLOW, "--backend", "ray", "-o", str(tmp_path / "ray")])
    watcher.join()
    assert killed, "no Ray worker ran a task to kill"
    assert (ray_pool.placements() - before).total() == 2  # each episode finished once
    assert _title(killed[0]) is None  # the process is gone: its episode ran again elsewhere
    assert _results(tmp_path / "ray") == slow_local


def test_a_worker_lost_on_every_try_is_a_failed_episode_that_resume_plays(
    cluster, slow_local, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(ray_pool, "TASK_RETRIES", 0)
    out = tmp_path / "ray"
    watcher = _when_running(lambda pids: os.kill(pids[0], signal.SIGKILL))
    _cli(["eval", *SLOW, "--backend", "ray", "-o", str(out)], code=EXIT_EPISODES_FAILED)
    watcher.join()
    lines = [json.loads(line) for line in _results(out).splitlines()]
    assert len(lines) == 2  # both episodes, once each
    failed = [line for line in lines if line["status"] != "ok"]
    assert len(failed) == 1 and "lost after 0 retries" in failed[0]["error"]
    _cli(["eval", *SLOW, "--backend", "ray", "--resume", "-o", str(out)])
    assert _results(out) == slow_local


def test_stopping_a_pool_cancels_its_running_tasks(cluster) -> None:
    # what an interrupted run does (Ctrl-C or SIGTERM: `stop_pool` on the way out)
    from evals.common.processes import stop_pool, worker_pool

    with backends.use(Backend("ray")):
        pool = worker_pool(2)
        futures = [pool.submit(time.sleep, 60) for _ in range(2)]
        deadline = time.monotonic() + 15
        while len(_task_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        running = _task_pids()
        assert len(running) == 2
        stop_pool(pool)
        for future in futures:
            with pytest.raises(cluster_ray().exceptions.TaskCancelledError):
                future.result(timeout=30)
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{pid}").exists() for pid in running) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in running if _title(pid) == TASK_TITLE]


def ray_or_skip() -> Any:
    """Ray, imported as the backend imports it (`ray_pool.import_ray`: under `uv run`, as the
    test command runs, Ray's own default would start workers that never register)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is the optional extra: uv sync --extra ray")
    return ray_pool.import_ray()


def cluster_ray() -> Any:
    return ray_pool.import_ray()


def _title(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return None


def test_a_task_on_a_dead_node_that_ray_does_not_rerun_is_sent_again_then_lost(
    cluster, monkeypatch
) -> None:
    # Ray reruns a removed node's tasks itself (the next test); where it does not, the pool's
    # watcher stops waiting. The nodes the task starts on are reported dead here (both
    # nodes stay up), so Ray never reruns it: the pool sends it once more, then gives up.
    monkeypatch.setattr(ray_pool, "WATCH_S", 0.2)
    monkeypatch.setattr(ray_pool, "LOST_AFTER_S", 1.0)
    monkeypatch.setattr(ray_pool, "TASK_RETRIES", 1)
    dead: set[str] = set()
    alive = ray_pool.RayPool._alive_nodes
    monkeypatch.setattr(ray_pool.RayPool, "_alive_nodes", lambda pool: alive(pool) - dead)
    pool = ray_pool.RayPool(None, 2)
    started: list[int] = []
    deadline = time.monotonic() + 60
    future = pool.submit(time.sleep, 120)
    while not future.done() and time.monotonic() < deadline:
        for pid in set(_task_pids()) - set(started):  # an attempt runs: its node "dies"
            started.append(pid)
            dead.update(node["NodeID"] for node in cluster_ray().nodes())
        time.sleep(0.05)
    with pytest.raises(ray_pool.WorkerLost, match="died and Ray did not run it again"):
        future.result(timeout=0)
    assert len(started) == 2  # sent once more, then lost
    pool.shutdown()
    deadline = time.monotonic() + 15  # both attempts cancelled: their processes end
    while [pid for pid in started if _title(pid) == TASK_TITLE] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in started if _title(pid) == TASK_TITLE]


def test_a_removed_node_costs_nothing_but_time(cluster, slow_local, tmp_path) -> None:
    # last in the module: the worker node goes for good
    worker = next(node for node in cluster.list_all_nodes() if node is not cluster.head_node)
    removed: list[bool] = []

    def remove(pids: list[int]) -> None:  # both nodes busy, one episode each
        cluster.remove_node(worker, allow_graceful=False)
        removed.append(True)

    watcher = _when_running(remove, count=2)
    _cli(["eval", *SLOW, "--backend", "ray", "-o", str(tmp_path / "ray")])
    watcher.join()
    assert removed, "the two nodes never ran a task each at once"
    assert _results(tmp_path / "ray") == slow_local
