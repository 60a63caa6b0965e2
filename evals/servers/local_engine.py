"""The local model server process: one GGUF model run by llama.cpp in this process (the
`xllamacpp` wheel: llama.cpp's own server engine, prebuilt for CPUs, so nothing is compiled on
install) behind the bounded HTTP front of `http_guard`, as an OpenAI-compatible endpoint.

`python -m evals.servers.local_engine --model PATH --alias NAME --port N` serves
`GET /v1/models` (the alias) and `POST /v1/chat/completions`, answered by
`local_tool_calls.chat_completion`: tool calls by constrained decoding (the default) or, with
`--no-constrain`, llama.cpp's own chat completion under the model's chat template. Streaming is
not offered. `LocalModelServer` (`local_model`) starts, waits for and stops this process.

The prebuilt CPU wheel leaves out AVX-512 and AMX (built for any x86-64 machine): llama.cpp's
native build enables AMX, which crashes on virtual machines that advertise AMX without granting
it. llama.cpp also opens a listener of its own on a free loopback port, which nothing here uses.
"""

from __future__ import annotations

import argparse
from http import HTTPStatus
from typing import Any

from model_client.model_output import one_line

from .http_guard import GuardedHandler, GuardedHTTPServer, error_body
from .local_tool_calls import Engine, chat_completion

ROUTES = ("/v1/chat/completions", "/chat/completions")
MODEL_ROUTES = ("/v1/models", "/models")


def handler_for(engine: Engine, alias: str, constrain: bool) -> type[GuardedHandler]:
    """The request handler answering from `engine` under the model name `alias`."""

    class Handler(GuardedHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") in MODEL_ROUTES:
                model = {"id": alias, "object": "model", "owned_by": "kvarena"}
                self.send_json(HTTPStatus.OK, {"object": "list", "data": [model]})
            else:
                self.send_json(HTTPStatus.NOT_FOUND, error_body(f"no route {self.path[:200]}", 404))

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ROUTES:
                self.send_json(HTTPStatus.NOT_FOUND, error_body(f"no route {self.path[:200]}", 404))
                return
            body = self.read_json()
            if body is None:
                return  # answered with its 4xx
            problem = _problem(body)
            if problem:
                self.send_json(HTTPStatus.BAD_REQUEST, error_body(problem, 400))
                return
            try:
                reply = chat_completion(engine, body, constrain=constrain)
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                self.send_json(HTTPStatus.BAD_REQUEST, error_body(_line(error), 400))
                return
            except Exception as error:  # a bug answers 500, never a dropped connection
                self.send_json(HTTPStatus.INTERNAL_SERVER_ERROR, error_body(_line(error), 500))
                return
            error = reply.get("error")
            if isinstance(error, dict):
                code = error.get("code")
                status = code if isinstance(code, int) and 400 <= code < 600 else 500
                self.send_json(HTTPStatus(status), reply)
                return
            self.send_json(HTTPStatus.OK, reply | {"model": alias})

    return Handler


def _line(error: BaseException) -> str:
    return one_line(f"{type(error).__name__}: {error}", 300)


def _problem(body: dict[str, Any]) -> str | None:
    """Why llama.cpp would not be asked (None: ask it)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    if not all(isinstance(m, dict) for m in messages):
        return "every message must be an object"
    if body.get("stream"):
        return "streaming is not offered by this server"
    tools = body.get("tools")
    if tools is not None and not (
        isinstance(tools, list)
        and all(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in tools)
    ):
        return "'tools' must be a list of function tools"
    return None


def load_engine(model: str, alias: str, context_tokens: int, threads: int) -> Engine:
    """llama.cpp's server engine with `model` loaded (one slot of `context_tokens`)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {alias}
    params.n_ctx = context_tokens
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True  # the model's own chat template for unconstrained requests
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    engine: Engine = xllamacpp.Server(params)
    return engine


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - the process entry point
    parser = argparse.ArgumentParser(prog="python -m evals.servers.local_engine")
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the model name clients send")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-constrain", action="store_true")
    args = parser.parse_args(argv)
    engine = load_engine(args.model, args.alias, args.n_ctx, args.threads)
    handler = handler_for(engine, args.alias, constrain=not args.no_constrain)
    GuardedHTTPServer(("127.0.0.1", args.port), handler).serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
