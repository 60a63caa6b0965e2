"""The commands every family shares: `serve-policy` (a built-in policy as an OpenAI-compatible
endpoint, no key needed) and `serve-model` (a local GGUF model, loopback)."""

from __future__ import annotations

import threading
import time
from typing import Annotated

import typer

from ..common.console import console, status_line
from ..common.edge import InputError, check_options, check_path
from ..common.options import Constrain

Port = Annotated[
    int,
    typer.Option(min=0, max=65535, metavar="PORT", help="Port to listen on (loopback only)."),
]
HeaderTimeout = Annotated[
    float | None,
    typer.Option(
        min=0.1,
        max=3600,
        metavar="SECONDS",
        help="Seconds a connection has to send a request's headers, idle keep-alive included "
        "(default 10).",
    ),
]
BodyTimeout = Annotated[
    float | None,
    typer.Option(
        min=0.1,
        max=3600,
        metavar="SECONDS",
        help="Seconds a request has to send its body (default 30).",
    ),
]


def _timeouts(header: float | None, body: float | None) -> dict[str, float]:
    """The server's keyword arguments for the timeouts given (the others keep its defaults)."""
    check_options({"--header-timeout": header, "--body-timeout": body})
    given = {"header_timeout_s": header, "body_timeout_s": body}
    return {k: v for k, v in given.items() if v is not None}


def serve_policy_command(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="An observation-based policy, e.g. lru.")
    ],
    port: Port = 8000,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="Loopback address to bind.")
    ] = "127.0.0.1",
    faults: Annotated[
        str | None,
        typer.Option(
            metavar="FAULTS",
            help="Inject faults for tests: N:KIND,... with KIND in 429, 500, timeout, "
            "badjson, drop (N counts chat requests from 1).",
        ),
    ] = None,
    fault_delay: Annotated[
        float, typer.Option(min=0, metavar="SECONDS", help="Seconds a 'timeout' fault waits.")
    ] = 30.0,
    header_timeout: HeaderTimeout = None,
    body_timeout: BodyTimeout = None,
) -> None:
    """Serve a policy as an OpenAI-compatible chat endpoint (tool calls), loopback only
    (127.0.0.1, localhost or ::1)."""
    status_line(f"serve-policy: loading policy {name}")
    from .policy_server import PolicyServer, parse_faults

    try:
        server = PolicyServer(
            name,
            host=host,
            port=port,
            faults=parse_faults(faults),
            timeout_s=fault_delay,
            **_timeouts(header_timeout, body_timeout),
        )
    except ValueError as error:
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"--host {host} --port {port}: cannot listen there ({error})") from None
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
    model: Annotated[
        str, typer.Argument(metavar="MODEL", help="local:smollm2 or local:/path/model.gguf.")
    ],
    port: Port = 8000,
    constrain: Constrain = True,
    header_timeout: HeaderTimeout = None,
    body_timeout: BodyTimeout = None,
) -> None:
    """Serve a local GGUF model as an OpenAI-compatible endpoint with tool calls (loopback).
    Requests reach the model through the same bounded front as serve-policy's."""
    status_line(f"serve-model: starting {model} (loading a model takes a while)")
    from .http_guard import GuardedHTTPServer, proxy_handler
    from .local_model import LocalModelError, LocalModelServer, start_local

    check_path(model.removeprefix("local:"), "MODEL")
    timeouts = _timeouts(header_timeout, body_timeout)
    try:
        server = LocalModelServer(model, constrain=constrain)  # on a port of its own
        front = GuardedHTTPServer(
            ("127.0.0.1", port),
            proxy_handler(("127.0.0.1", server.port)),
            **timeouts,
        )
    except LocalModelError as error:
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"--port {port}: cannot listen there ({error})") from None
    try:
        start_local(server)
        threading.Thread(target=front.serve_forever, daemon=True).start()
        address = f"http://127.0.0.1:{front.server_address[1]}/v1"
        console.print(
            f"serving at {address}; model name for clients: [bold]{server.alias}[/bold]; "
            "Ctrl-C stops"
        )
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        front.shutdown()
        front.server_close()
        server.stop()
