"""Where a run's episodes play: this machine's process pool (`local`, the default) or the
processes of a Ray cluster (`ray`).

A command parses `--backend` and `--address` once, at its edge, into a `Backend`
(`backend_option`) and runs under `use(backend)`. `processes.worker_pool` — the one pool
every command fans its episodes out through — reads `current()`, so no command chooses a
backend itself, and the callers that play a small run in their own process ask `plays_here`
(on Ray every episode goes to the cluster, however few). Ray is an optional extra, imported
only by `ray_pool` when a run asks for it; without it `--backend ray` is an input error that
names the install command (`RAY_INSTALL`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from . import ray_pool
from .console import console
from .edge import InputError
from .ray_pool import RAY_INSTALL, WorkerLost

BackendKind = Literal["local", "ray"]
BACKENDS: tuple[BackendKind, ...] = ("local", "ray")


@dataclass(frozen=True)
class Backend:
    """Where episodes play (module docstring)."""

    kind: BackendKind = "local"
    """`local`: worker processes of this machine (`-j` of them); `ray`: Ray tasks."""
    address: str | None = None
    """The Ray cluster to join (`host:port`, or `ray://host:port` through Ray Client); None:
    start a Ray instance on this machine for the run, with `-j` CPUs, and stop it after."""


BACKEND_HELP = (
    "Where built-in policies' episodes play: local worker processes, or a Ray cluster "
    "(the `ray` extra; results are the same)."
)
ADDRESS_HELP = (
    "With --backend ray: the cluster to join, host:port (default: $RAY_ADDRESS; none: a Ray "
    "instance on this machine with -j CPUs, for the run)."
)
LOCAL = Backend()
_CURRENT: ContextVar[Backend] = ContextVar("backend", default=LOCAL)


def backend_option(kind: str, address: str | None, model: bool = False) -> Backend:
    """`--backend` and `--address` as one value; InputError for a bad pair or a missing Ray.
    `address` None: `RAY_ADDRESS` from the environment, where set (empty: none). `model`:
    the run's episodes are a model's (or a model reader's), which play in this process."""
    if kind not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}, not {kind!r}")
    if kind == "local":
        if address:
            raise InputError("--address needs --backend ray")
        return LOCAL
    if model:
        raise InputError(
            "--backend ray plays built-in policies (read by the extractive reader); a model's "
            "episodes play in this process: drop --backend"
        )
    if importlib.util.find_spec("ray") is None:
        raise InputError(f"--backend ray needs Ray, which is not installed: {RAY_INSTALL}")
    if address is None:
        address = os.environ.get("RAY_ADDRESS", "")
    return Backend("ray", address.strip() or None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--backend` and `--address` on a script's argument parser (`from_arguments` reads them)."""
    parser.add_argument("--backend", choices=BACKENDS, default="local", help=BACKEND_HELP)
    parser.add_argument("--address", metavar="ADDRESS", help=ADDRESS_HELP)


def from_arguments(args: argparse.Namespace) -> Backend:
    """A script's `--backend` and `--address` (`add_arguments`) as one value; exits with the
    message on a bad pair or a missing Ray."""
    try:
        return backend_option(args.backend, args.address)
    except InputError as error:
        raise SystemExit(f"error: {error}") from None


def current() -> Backend:
    """The backend the running command chose (`LOCAL` outside `use`)."""
    return _CURRENT.get()


@contextmanager
def use(backend: Backend, workers: int = 1) -> Iterator[Backend]:
    """Run the block's worker pools on `backend`. On Ray, connect first (joining the cluster,
    or starting a Ray instance here with `workers` CPUs), so that the start-up is not counted
    in the episodes' progress and rate; a Ray instance this block started is stopped when it
    ends, however it ends (a cluster joined by address is left running), and a closing line
    says where the block's tasks ran."""
    token = _CURRENT.set(backend)
    before = None
    try:
        if backend.kind == "ray":
            before = ray_pool.placements()
            started = time.perf_counter()
            address = backend.address
            where = f"joining Ray at {address}" if address else f"starting Ray ({workers} CPUs)"
            with console.status(where):
                cpus = ray_pool.connect(backend.address, workers)
            console.print(
                f"on Ray: {cpus} CPUs ({time.perf_counter() - started:.1f} s to connect)",
                highlight=False,
            )
        yield backend
    finally:
        _CURRENT.reset(token)
        if before is not None:
            ran = ray_pool.placements() - before
            if ran:
                nodes = len({node for node, _ in ran})
                console.print(
                    f"on Ray: {ran.total()} tasks ran in {len(ran)} worker processes on "
                    f"{nodes} node{'s' * (nodes != 1)}"
                )
        if backend.kind == "ray":
            ray_pool.disconnect()


def plays_here(workers: int, jobs: int) -> bool:
    """Whether a caller plays its `jobs` in its own process rather than through a pool: one
    worker or one job on this machine; never on Ray (the cluster plays them all)."""
    return current().kind == "local" and (workers <= 1 or jobs <= 1)


__all__ = [
    "ADDRESS_HELP",
    "BACKENDS",
    "BACKEND_HELP",
    "LOCAL",
    "RAY_INSTALL",
    "Backend",
    "BackendKind",
    "WorkerLost",
    "add_arguments",
    "backend_option",
    "current",
    "from_arguments",
    "plays_here",
    "use",
]
