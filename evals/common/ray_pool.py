"""Ray tasks behind the executor interface `processes.worker_pool` returns (`RayPool`), and
this process's connection to the cluster. Ray itself is imported only when a pool starts.

- `submit(fn, *args)` sends one Ray task (one CPU) that calls `fn(*args)` in a Ray worker
  process and returns a `concurrent.futures.Future` of its value, so `as_completed` and
  `wait(FIRST_COMPLETED)` drive progress, ETA and the summary as they do over local workers.
  What travels: `fn` by reference (its module is imported on the worker: every node runs the
  same checkout), its arguments pickled (an episode's job: scenario, seed, agent, weights),
  and the value back.
- A task whose worker process or node dies is run again, up to `TASK_RETRIES` times (episodes
  are deterministic, so a retry gives the same result); after that its future raises
  `WorkerLost`, which the callers record as a failed episode (`--resume` plays it again).
- A lost node is never waited on for ever: while a pool has unfinished tasks, a watcher thread
  asks the cluster which nodes are alive every `WATCH_S` seconds. Each task notes the node it
  starts on (in Ray's key-value store, read only after a node has died). A task whose every
  start was on a node now dead, and that has not finished `LOST_AFTER_S` seconds later (Ray
  had not run it again), is cancelled and sent again by the pool, within the same
  `TASK_RETRIES`; then `WorkerLost`.
- The pool's initializer runs once per Ray worker process, before its first task of that pool.
- Every node must run the same code as this process: before its first task a worker compares
  a digest of the project's packages (`code_digest`: the bytes of their code and data) with
  this process's, and refuses to play on a mismatch (the run stops with the error), so a node
  with another checkout — or a checkout edited since the run started — never mixes its
  results into a run.
- `shutdown(cancel_futures=True)` (an interrupted run, `stop_pool`) and leaving the `with`
  block on an error cancel every unfinished task of the pool, killing the workers that run
  them (`ray.cancel(force=True)`); other runs' tasks on the cluster are left alone.
- `connect` joins the cluster at an address, or starts a Ray instance on this machine with
  `-j` CPUs whose workers run at this process's priority, as local workers do (Ray's default
  lowers them by 15, which starves episodes behind any busy process on the machine); a
  connection made before, by a test or a notebook, is used as it is;
  `disconnect` stops what `connect` started. `placements()` counts where this connection's
  tasks ran ((node id, process id) → tasks), for the run's closing line and the tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import count
from pathlib import Path
from typing import Any
from uuid import uuid4

RAY_INSTALL = "uv sync --extra ray (or: pip install 'kvcache-arena[ray]')"
"""The command that installs the `ray` extra, as the error without it names it."""
TASK_RETRIES = 3
"""Runs again of a task whose worker process or node died (Ray's own default)."""
PACKAGES = ("evals", "kv_cache_env", "kv_context_env", "rubrics", "model_client")
"""The project's packages, whose files `code_digest` covers."""
CODE_SUFFIXES = frozenset({".py", ".json", ".jsonl", ".gz", ".csv", ".txt", ".toml", ".yaml"})
"""The files `code_digest` reads: code and the data shipped with it (not what a run writes
beside it, such as the reference table's `.partial` file while it is built)."""
OBJECT_STORE_BYTES = 200 * 1024**2
"""The object store of a Ray instance started here: jobs and results are a few kB each."""
UV_HOOK_SETTING = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
"""The environment variable of Ray's `uv run` hook, off here by default (`import_ray`)."""
SYSTEM_CONFIG = {"worker_niceness": 0}
"""Ray's settings for an instance started here: workers at this process's priority."""
WATCH_S = 2.0
"""How often a pool with unfinished tasks asks the cluster which nodes are alive."""
LOST_AFTER_S = 30.0
"""How long a task started only on nodes now dead may stay unfinished before the pool stops
waiting for Ray to run it again and sends it again itself (Ray's own retry after a node's
death takes a few seconds here: ~10 s, run included)."""
STARTS_NAMESPACE = "kvcache-arena-starts"
"""The namespace of Ray's key-value store where each task notes the node it started on."""

_started_here = False
_placements: Counter[tuple[str, int]] = Counter()
_lock = threading.Lock()
_initialized: set[str] = set()
"""(in a Ray worker) The pools whose initializer this worker process has run."""


class WorkerLost(RuntimeError):
    """A task's Ray worker process or node died on every try (the message says how); the
    callers record the episode as failed, and `--resume` plays it again."""


def import_ray() -> Any:
    """The `ray` module, imported with Ray's `uv run` hook off unless the environment turns it
    on: under `uv run` (this project's test command, and a user's `uv run kvarena ...`), Ray's
    default zips the working directory into the job and starts every worker with
    `uv run --no-sync` inside that copy, where no environment is installed, so no worker ever
    registers. Here every node runs the same installed checkout (`code_digest` checks it);
    `RAY_ENABLE_UV_RUN_RUNTIME_ENV=1` restores Ray's behaviour. The setting is read when Ray
    is first imported, so whatever imports Ray in this process goes through here."""
    os.environ.setdefault(UV_HOOK_SETTING, "0")
    try:
        import ray
    except ImportError:
        raise RuntimeError(f"Ray is not installed: {RAY_INSTALL}") from None
    return ray


def connect(address: str | None, cpus: int) -> int:
    """Join the cluster at `address`, or start a Ray instance here with `cpus` CPUs (module
    docstring); the cluster's CPUs. Ray's driver SIGTERM handler is taken back: a run stopped
    by SIGTERM closes as one stopped by Ctrl-C (`processes.terminate_as_interrupt`)."""
    global _started_here
    ray = import_ray()
    if ray.is_initialized():
        return int(ray.cluster_resources().get("CPU", 0))
    term = signal.getsignal(signal.SIGTERM)
    options: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address:
        ray.init(address=address, **options)
    else:  # "local": a new instance even where RAY_ADDRESS names a cluster
        ray.init(
            address="local",
            num_cpus=cpus,
            object_store_memory=OBJECT_STORE_BYTES,
            include_dashboard=False,
            _system_config=SYSTEM_CONFIG,
            **options,
        )
        _started_here = True
    if threading.current_thread() is threading.main_thread() and term is not None:
        signal.signal(signal.SIGTERM, term)
    return int(ray.cluster_resources().get("CPU", 0))


def disconnect() -> None:
    """Stop the Ray instance `connect` started (a cluster joined by address keeps running)."""
    global _started_here
    if _started_here:
        import_ray().shutdown()
        _started_here = False


def placements() -> Counter[tuple[str, int]]:
    """(node id, worker process id) → tasks run there, over this process's Ray runs."""
    with _lock:
        return Counter(_placements)


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 (16 hex digits) of the project's packages as this process imports them: every
    file of code or shipped data (`CODE_SUFFIXES`)."""
    digest = hashlib.sha256()
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            root = Path(location)
            for path in sorted(root.rglob("*")):
                if path.suffix in CODE_SUFFIXES and "__pycache__" not in path.parts:
                    digest.update(f"{name}/{path.relative_to(root)}".encode() + b"\0")
                    digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _run(
    token: str,
    start: str | None,
    code: str,
    init: tuple[Callable[..., Any], tuple[Any, ...]] | None,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[Any, str, int]:
    """(In a Ray worker) Note this node under the key `start`/ (the watcher's), the code check
    and the pool's initializer once per process, then `fn`: its value, with the node and
    process that computed it."""
    import ray
    from ray.experimental.internal_kv import _internal_kv_put

    node = ray.get_runtime_context().get_node_id()
    if start is not None:
        _internal_kv_put(f"{start}/{node}", b"", namespace=STARTS_NAMESPACE)
    if code_digest() != code:
        raise RuntimeError(
            f"the Ray node {ray.util.get_node_ip_address()} runs other code than the run's "
            f"(digest {code_digest()}, not {code}): install the same kvcache-arena on every node"
        )
    if init is not None and token not in _initialized:
        initializer, initargs = init
        initializer(*initargs)
        _initialized.add(token)
    value = fn(*args, **kwargs)
    return value, node, os.getpid()


@dataclass
class _Task:
    """One submitted call: its future, and the Ray task now running it (`attempt`, `ref`)."""

    out: Future[Any]
    call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
    tries_left: int
    attempt: str = ""
    ref: Any = None
    lost_since: float | None = field(default=None)


class RayPool(Executor):
    """`worker_pool`'s executor on Ray (module docstring)."""

    def __init__(
        self,
        address: str | None,
        workers: int,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
    ) -> None:
        connect(address, workers)
        ray = import_ray()
        self._ray = ray
        self._task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(_run)
        self._token = uuid4().hex
        self._init = (initializer, initargs) if initializer is not None else None
        self._attempts = count()
        self._running: dict[str, _Task] = {}
        """Attempt key → its task, while unfinished."""
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None
        self._seen_alive = self._alive_nodes()
        """The nodes alive at some look since the pool started (one of them dead: look up)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        out: Future[Any] = Future()
        out.set_running_or_notify_cancel()
        self._send(_Task(out, (fn, args, kwargs), TASK_RETRIES))
        return out

    def _send(self, task: _Task) -> None:
        """Run `task` as a new Ray task (a new attempt) and watch it."""
        fn, args, kwargs = task.call
        task.attempt = f"{self._token}/{next(self._attempts)}"
        task.lost_since = None
        with self._lock:
            self._running[task.attempt] = task
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="ray-watch", daemon=True)
                self._watcher.start()
        task.ref = self._task.remote(
            self._token, task.attempt, code_digest(), self._init, fn, args, kwargs
        )
        attempt = task.attempt
        task.ref.future().add_done_callback(lambda done: self._settle(done, task, attempt))

    def _settle(self, done: Future[Any], task: _Task, attempt: str) -> None:
        """The task's future gets the attempt's value, or the error its own code raised, or
        `WorkerLost`; an attempt the watcher gave up on is ignored."""
        with self._lock:
            if self._running.get(attempt) is not task:
                return
            del self._running[attempt]
        exceptions = self._ray.exceptions
        try:
            value, node, pid = done.result()
        except exceptions.RayTaskError as error:  # the function raised: that error
            cause = error.cause if isinstance(error.cause, BaseException) else error
            task.out.set_exception(cause)
        except (
            exceptions.WorkerCrashedError,
            exceptions.NodeDiedError,
            exceptions.ObjectLostError,
        ) as error:
            task.out.set_exception(WorkerLost(f"lost after {TASK_RETRIES} retries: {error}"))
        except BaseException as error:  # cancelled, or the cluster is gone
            task.out.set_exception(error)
        else:
            with _lock:
                _placements[node, pid] += 1
            task.out.set_result(value)

    def _alive_nodes(self) -> set[str]:
        """The ids of the cluster's nodes alive now."""
        return {node["NodeID"] for node in self._ray.nodes() if node["Alive"]}

    def _watch(self) -> None:
        """(Thread) Until the pool has no unfinished task: every `WATCH_S`, look for tasks
        started only on nodes that have died, and send again those Ray has not finished
        `LOST_AFTER_S` later (module docstring)."""
        while not self._closed.wait(WATCH_S):
            with self._lock:
                if not self._running:
                    self._watcher = None
                    return
            try:
                self._look()
            except Exception:  # the cluster did not answer: ask again next time
                continue

    def _look(self) -> None:
        from ray.experimental.internal_kv import _internal_kv_list

        alive = self._alive_nodes()
        self._seen_alive |= alive
        if not self._seen_alive - alive:
            return  # no node seen alive by this pool has died: nothing to look up
        starts: dict[str, set[str]] = {}
        for key in _internal_kv_list(f"{self._token}/", namespace=STARTS_NAMESPACE):
            attempt, _, node = key.decode().rpartition("/")
            starts.setdefault(attempt, set()).add(node)
        now = time.monotonic()
        given_up: list[_Task] = []
        with self._lock:
            for attempt, task in self._running.items():
                nodes = starts.get(attempt)
                if not nodes or nodes & alive:
                    task.lost_since = None  # not started yet, or running on a live node
                elif task.lost_since is None:
                    task.lost_since = now
                elif now - task.lost_since >= LOST_AFTER_S:
                    given_up.append(task)
            for task in given_up:
                del self._running[task.attempt]
        for task in given_up:
            self._give_up(task, starts[task.attempt])

    def _give_up(self, task: _Task, nodes: set[str]) -> None:
        """Stop waiting for Ray to run `task` again: cancel it, and send it again or fail it."""
        with contextlib.suppress(Exception):
            self._ray.cancel(task.ref, force=True)
        if task.tries_left > 0 and not self._closed.is_set():
            task.tries_left -= 1
            self._send(task)
            return
        dead = ", ".join(sorted(node[:12] for node in nodes))
        task.out.set_exception(
            WorkerLost(
                f"lost after {TASK_RETRIES} retries: its node ({dead}) died and Ray did not "
                f"run it again within {LOST_AFTER_S:g} s"
            )
        )

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop sending; with `cancel_futures`, cancel (and kill) every unfinished task. The
        watcher stops once no task is left (at once with `cancel_futures`)."""
        if cancel_futures:
            self._closed.set()
            self.cancel_all()
        if cancel_futures or not self._running:  # the notes of where tasks started go
            with contextlib.suppress(Exception):
                from ray.experimental.internal_kv import _internal_kv_del

                _internal_kv_del(f"{self._token}/", del_by_prefix=True, namespace=STARTS_NAMESPACE)

    def cancel_all(self) -> None:
        """Cancel this pool's unfinished tasks, killing the worker processes that run them."""
        with self._lock:
            refs = [task.ref for task in self._running.values()]
        for ref in refs:
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # finished meanwhile, or the cluster is gone
                continue

    def __exit__(self, kind: object, error: object, trace: object) -> bool | None:
        self.shutdown(cancel_futures=error is not None)
        return None


__all__ = [
    "LOST_AFTER_S",
    "OBJECT_STORE_BYTES",
    "RAY_INSTALL",
    "SYSTEM_CONFIG",
    "TASK_RETRIES",
    "WATCH_S",
    "RayPool",
    "WorkerLost",
    "code_digest",
    "connect",
    "disconnect",
    "placements",
]
