"""Processes a run starts and the signals that end it.

- `worker_pool(workers)`: the one pool every command plays its episodes through. On the
  `local` backend (`backends`; the default) a `ProcessPoolExecutor` whose workers die with the
  process that started them, however it ends (kill -9 included): each worker asks the kernel
  for SIGKILL when its parent dies (Linux `PR_SET_PDEATHSIG`) and, where that is not
  available, a thread polls its parent every `PARENT_POLL_S` seconds. On `ray`, the same
  futures interface over Ray tasks (`ray_pool.RayPool`). `stop_pool` kills a pool's workers
  at once (an interrupted run does not wait for their episodes; on Ray it cancels the run's
  tasks).
- `die_with_parent`: the same request for any child (`subprocess.Popen(preexec_fn=...)`, e.g.
  the local model server).
- `terminate_as_interrupt()`: while active, SIGTERM raises `Terminated` (a KeyboardInterrupt),
  so a run stopped by `kill` or a CI timeout closes as one stopped by Ctrl-C: every finished
  episode kept, `run.json` `interrupted`, exit status 143 (130 for Ctrl-C).
- `interrupts_deferred()`: Ctrl-C and SIGTERM wait until the block is done, then act as they
  would have: a result line and its record are written together or not at all (an interrupt
  that landed while a whole line was being fsynced used to take the line back).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

from . import backends

PARENT_POLL_S = 0.5
"""How often a worker checks that its parent is alive where the kernel cannot tell it."""
_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C."""


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); no-op elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _watch_parent(parent: int) -> None:
    """Worker initializer: die with `parent` (the kernel's signal, and a polling thread)."""
    die_with_parent()
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)

    def poll() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=poll, name="parent-watch", daemon=True).start()


def _initialize(parent: int, initializer: Callable[..., Any] | None, args: tuple[Any, ...]) -> None:
    _watch_parent(parent)
    # a worker leaves SIGTERM and SIGINT to the parent, which stops the pool itself
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if initializer is not None:
        initializer(*args)


def worker_pool(
    workers: int,
    initializer: Callable[..., Any] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Executor:
    """A pool of `workers` on the running command's backend (`backends.current()`): on Ray,
    `ray_pool.RayPool` (its initializer runs once in each Ray worker process). Locally, a
    process pool whose workers die with this process (module docstring). The objects
    alive now (modules, the run's set-up) move to the collector's permanent generation first
    (`gc.freeze`, as Python's docs advise before a fork): a forked worker's collections then
    never scan them, nor copy the pages it shares with this process, and this process's
    collections skip them too (~1.4 s of CPU of the main job's ~20 s)."""
    backend = backends.current()
    if backend.kind == "ray":
        from .ray_pool import RayPool

        return RayPool(backend.address, workers, initializer, initargs)
    gc.freeze()
    return ProcessPoolExecutor(
        max_workers=workers, initializer=_initialize, initargs=(os.getpid(), initializer, initargs)
    )


def stop_pool(pool: Executor) -> None:
    """Cancel what has not started and kill the workers now (an interrupted run); on Ray,
    cancel the pool's unfinished tasks (`RayPool.shutdown`)."""
    processes = dict(getattr(pool, "_processes", None) or {})
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes.values():
        with contextlib.suppress(OSError, AttributeError):
            process.kill()
    for process in processes.values():
        with contextlib.suppress(OSError, AttributeError, ValueError):
            process.join(timeout=5)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread while this is active (module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def interrupts_deferred(
    signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM),
) -> Iterator[None]:
    """Hold `signums` until the block ends, then hand each one caught to the handler that was in
    place (Ctrl-C's KeyboardInterrupt, `terminate_as_interrupt`'s `Terminated`, asyncio's
    cancelling handler, or the default action). Python runs signal handlers in the main thread
    only, so elsewhere this is a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, Any]] = []
    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            if signal.getsignal(signum) is None:  # a handler not set from Python: leave it
                continue
            previous[signum] = signal.signal(signum, lambda n, frame: caught.append((n, frame)))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum, frame in caught:
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def interrupt_status(error: KeyboardInterrupt) -> int:
    """The exit status of a run stopped by `error`: 143 for SIGTERM, 130 for Ctrl-C."""
    return 128 + (signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT)
