"""A keyless "model": any observation-based policy behind a real OpenAI-compatible HTTP server.

`POST /v1/chat/completions` reads the last user message, rebuilds the structured observation
from its text (`kv_cache_env.sim.parse`), asks the policy, and answers with its actions as tool
calls (no tool call = noop). `GET /v1/models` lists the policy. Loopback only.

For tests of the hosted-model path the server can inject faults on chosen requests (counted from
1 over all chat requests): `429`, `500`, `timeout` (answer after `timeout_s`), `badjson`
(tool-call arguments that are not JSON), `drop` (close the connection without answering).
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kv_cache_env.sim import Action, approx_tokens, parse

from .policies import Policy, SimulatorPolicy, create

FAULT_KINDS = ("429", "500", "timeout", "badjson", "drop")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_faults(spec: str | None) -> dict[int, str]:
    """`"3:429,5:500"` -> {3: "429", 5: "500"}; ValueError on anything else."""
    faults: dict[int, str] = {}
    for item in (spec or "").split(","):
        if not item.strip():
            continue
        index, sep, kind = item.strip().partition(":")
        if not sep or not index.isdigit() or int(index) < 1 or kind not in FAULT_KINDS:
            raise ValueError(
                f"bad fault {item!r}: expected N:KIND with N >= 1 and KIND one of "
                f"{', '.join(FAULT_KINDS)}"
            )
        faults[int(index)] = kind
    return faults


def check_servable(name: str) -> None:
    """ValueError unless `name` is a policy that decides from the observation alone."""
    policy = create(name)
    if isinstance(policy, SimulatorPolicy):
        raise ValueError(
            f"policy {name!r} needs the simulator itself and cannot be served over HTTP; "
            "serve an observation-based policy (e.g. lru) or run it in-process with --policy"
        )


def tool_calls_for(actions: list[Action]) -> list[dict[str, Any]]:
    calls = []
    for i, action in enumerate(actions):
        arguments = {} if action.kind == "noop" else {"seq_id": action.seq_id}
        calls.append(
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": action.kind, "arguments": json.dumps(arguments)},
            }
        )
    return calls


class PolicyServer:
    """Serve `policy_name` on host:port (port 0 = pick a free one) in a background thread."""

    def __init__(
        self,
        policy_name: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Mapping[int, str] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        if host not in LOOPBACK:
            raise ValueError(f"the policy server binds to loopback only, not {host!r}")
        check_servable(policy_name)
        self.policy_name = policy_name
        self.faults = dict(faults or {})
        self.timeout_s = timeout_s
        self.requests = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> PolicyServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_fault(self) -> tuple[int, str | None]:
        with self._lock:
            self.requests += 1
            return self.requests, self.faults.get(self.requests)

    def complete(self, body: Mapping[str, Any], fault: str | None) -> dict[str, Any]:
        """The chat-completion response for one request."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise ValueError("no user message to read an observation from")
        text = users[-1].get("content")
        if isinstance(text, list):  # content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        if not isinstance(text, str):
            raise ValueError("the last user message has no text content")
        observation = parse(text)
        policy: Policy = create(self.policy_name)
        policy.reset(zlib.crc32(text.encode()))  # seeded policies: deterministic per request
        calls = tool_calls_for(policy.act(observation))
        if fault == "badjson" and calls:
            calls[0]["function"]["arguments"] = calls[0]["function"]["arguments"][:-1] + ',"'
        elif fault == "badjson":
            broken = {"name": "evict", "arguments": "{"}
            calls = [{"id": "call_0", "type": "function", "function": broken}]
        prompt_tokens = sum(approx_tokens(json.dumps(m)) for m in messages)
        completion_tokens = approx_tokens(json.dumps(calls))
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else "noop"}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": 0,
            "model": self.policy_name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _handler_for(server: PolicyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(
                    HTTPStatus.OK,
                    {"object": "list", "data": [{"id": server.policy_name, "object": "model"}]},
                )
            else:
                self._send(HTTPStatus.NOT_FOUND, _error(f"no route {self.path}"))

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(HTTPStatus.NOT_FOUND, _error(f"no route {self.path}"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            _, fault = server.next_fault()
            if fault == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if fault == "429":
                self._send(HTTPStatus.TOO_MANY_REQUESTS, _error("rate limited (injected)"))
                return
            if fault == "500":
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, _error("server error (injected)"))
                return
            if fault == "timeout":
                time.sleep(server.timeout_s)
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError("the request body must be a JSON object")
                response = server.complete(body, fault)
            except ValueError as error:
                self._send(HTTPStatus.BAD_REQUEST, _error(str(error)))
                return
            self._send(HTTPStatus.OK, response)

        def _send(self, status: HTTPStatus, payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. its timeout); nothing to do

    return Handler


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error"}}
