"""The commands every family shares: `serve-policy` (a built-in policy as an OpenAI-compatible
endpoint, no key needed) and `serve-model` (a local GGUF model, loopback)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from .console import console
from .edge import InputError
from .options import Constrain

Port = Annotated[
    int,
    typer.Option(min=0, max=65535, help="Port to listen on (loopback only)."),
]


def serve_policy_command(
    name: Annotated[str, typer.Argument(help="An observation-based policy, e.g. lru.")],
    port: Port = 8000,
    host: Annotated[str, typer.Option(help="Loopback address to bind.")] = "127.0.0.1",
    faults: Annotated[
        str | None,
        typer.Option(
            help="Inject faults for tests: N:KIND,... with KIND in 429, 500, timeout, "
            "badjson, drop (N counts chat requests from 1)."
        ),
    ] = None,
    fault_delay: Annotated[
        float, typer.Option(min=0, help="Seconds a 'timeout' fault waits.")
    ] = 30.0,
) -> None:
    """Serve a policy as an OpenAI-compatible chat endpoint (tool calls), loopback only."""
    from .policy_server import PolicyServer, parse_faults

    try:
        server = PolicyServer(
            name, host=host, port=port, faults=parse_faults(faults), timeout_s=fault_delay
        )
    except (ValueError, OSError) as error:
        raise InputError(str(error)) from None
    console.print(
        f"serving policy [bold]{name}[/bold] at {server.base_url} (OpenAI chat) and "
        f"{server.anthropic_base_url} (Anthropic Messages) (Ctrl-C stops)"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def serve_model_command(
    model: Annotated[str, typer.Argument(help="local:smollm2 or local:/path/model.gguf")],
    port: Port = 8000,
    constrain: Constrain = True,
) -> None:
    """Serve a local GGUF model as an OpenAI-compatible endpoint with tool calls (loopback)."""
    from .local_model import LocalModelError, LocalModelServer, start_local

    try:
        server = LocalModelServer(model, port=port, constrain=constrain)
    except LocalModelError as error:
        raise InputError(str(error)) from None
    try:
        start_local(server)
        console.print(f"model name for clients: [bold]{server.alias}[/bold]; Ctrl-C stops")
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
