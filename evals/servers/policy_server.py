"""A keyless "model": any observation-based policy behind a real OpenAI-compatible HTTP server.

`POST /v1/chat/completions` reads the last user message, rebuilds the structured observation
from its text (`kv_cache_env.sim.parse`), asks the policy, and answers with its actions as tool
calls (no tool call = noop). `GET /v1/models` lists the policy. Loopback only. A seeded policy
(`random`) is reseeded from each request's text, and from its `seed` when the request sends one
(as llama.cpp's server and OpenAI's API take it): without a seed every rollout of a task is the
same; `kvarena eval --sampling-seed S` gives each S its own rollout, reproducibly.

Requests of the conversation-context family (recognised by their system prompt) are answered by
`kv_context_env.policies.text_agent` instead: its tool calls for an observation, or the extractive
reader's answer for a reader request. So the keyless server stands in for a model on both
families.

`POST /v1/messages` does the same in the shape of Anthropic's Messages API, for the prompt-cache
path (`--api anthropic`, base URL without `/v1`). It checks the request the way the provider
does (at most 4 `cache_control` breakpoints, each `ephemeral`; tool results answering the
previous assistant's tool uses), answers with `cache_read_input_tokens` /
`cache_creation_input_tokens` from a model of the provider's cache
(`evals.prompt_cache.provider`) shared by all requests, and logs every request's breakpoints in
`anthropic_log` for tests.

For tests of the hosted-model path the server can inject faults on chosen requests (counted from
1 over all chat requests): `429`, `500`, `timeout` (answer after `timeout_s`), `badjson`
(tool-call arguments that are not JSON), `drop` (close the connection without answering), and
on chat completions every kind in `evals.servers.faults` (bodies that are not completions, malformed
tool calls). Injected 429/500 ask for a 1 ms retry (`retry-after-ms`) so tests do not wait.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from kv_cache_env.policies import Policy, SimulatorPolicy, create
from kv_cache_env.sim import ACTIONS, Action, approx_tokens, noop, parse
from kv_context_env.llm.agent import READER_SYSTEM, context_system_prompt
from kv_context_env.policies.text_agent import context_text_answer, context_text_calls
from model_client.model_output import one_line

from ..prompt_cache.provider import BreakpointError, ProviderCache, Unit, content_key
from ..prompt_cache.tokens import estimate_tokens
from .faults import INJECTED, inject
from .http_guard import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    MAX_CONNECTIONS,
    GuardedHandler,
    GuardedHTTPServer,
    error_body,
)

EMPTY_REPLY = noop().kind
"""What a served policy writes when it calls no tool this turn (the turn rule reads it as noop)."""

CONTEXT_SYSTEM_START = context_system_prompt(0)[:60]
"""How a request of the conversation-context family is recognised (its system prompt)."""
FAULT_KINDS = ("429", "500", "timeout", "badjson", "drop", *INJECTED)
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
        arguments = {"seq_id": action.seq_id} if ACTIONS[action.kind].targets else {}
        calls.append(
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": action.kind, "arguments": json.dumps(arguments)},
            }
        )
    return calls


def policy_tool_calls(policy_name: str, text: str, seed: object = None) -> list[dict[str, Any]]:
    """The tool calls the served policy answers the observation `text` with (no call = noop).
    A seeded policy is reseeded from the text, and from the request's sampling `seed` if any."""
    policy: Policy = create(policy_name)
    salt = f"{seed}\n" if isinstance(seed, int) and not isinstance(seed, bool) else ""
    policy.reset(zlib.crc32((salt + text).encode()))
    return tool_calls_for(policy.act(parse(text)))


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
        max_connections: int = MAX_CONNECTIONS,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ) -> None:
        if host not in LOOPBACK:
            raise ValueError(f"the policy server binds to loopback only, not {host!r}")
        check_servable(policy_name)
        self.policy_name = policy_name
        self.faults = dict(faults or {})
        self.timeout_s = timeout_s
        self.requests = 0
        self.provider_cache = ProviderCache()
        self.anthropic_log: list[dict[str, Any]] = []
        """Per Messages request: breakpoint unit indices, unit count, usage."""
        self.chat_marks: list[list[int]] = []
        """Per chat-completions request: indices of messages carrying `cache_control`."""
        self._lock = threading.Lock()
        self._httpd = GuardedHTTPServer(
            (host, port),
            _handler_for(self),
            max_connections=max_connections,
            header_timeout_s=header_timeout_s,
            body_timeout_s=body_timeout_s,
        )
        self.host = host
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        host = "[::1]" if self.host == "::1" else "127.0.0.1"
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For the `anthropic` SDK, which appends `/v1/messages` itself."""
        return self.origin

    @property
    def refused(self) -> int:
        """Connections answered 503 because every worker was busy."""
        return self._httpd.refused

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

    def _policy_calls(
        self, text: str, fault: str | None, seed: object = None
    ) -> list[dict[str, Any]]:
        calls = policy_tool_calls(self.policy_name, text, seed)
        if fault == "badjson" and calls:
            calls[0]["function"]["arguments"] = calls[0]["function"]["arguments"][:-1] + ',"'
        elif fault == "badjson":
            broken = {"name": "evict", "arguments": "{"}
            calls = [{"id": "call_0", "type": "function", "function": broken}]
        return calls

    def messages(
        self, body: Mapping[str, Any], fault: str | None, number: int = 0
    ) -> dict[str, Any]:
        """The Anthropic Messages response for request `number` (ValueError = HTTP 400)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages: must be a non-empty list")
        if not isinstance(body.get("max_tokens"), int):
            raise ValueError("max_tokens: Field required")
        _check_messages_shape(body)
        units, marks = _anthropic_units(body)
        _check_tool_results(messages)
        _check_text_blocks(body)
        with self._lock:
            try:
                usage = self.provider_cache.serve(units, marks)
            except BreakpointError as error:
                raise ValueError(str(error)) from None
            self.anthropic_log.append(
                {"breakpoints": marks, "units": len(units), "usage": usage, "body": dict(body)}
            )
        last = messages[-1]
        if last.get("role") != "user":
            raise ValueError("the last message must be a user message")
        content = last.get("content")
        if isinstance(content, str):
            text = content
        else:
            text = "".join(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
        calls = self._policy_calls(text, fault)
        blocks: list[dict[str, Any]] = []
        for i, call in enumerate(calls):
            try:
                arguments = json.loads(call["function"]["arguments"])
            except ValueError:
                arguments = {"seq_id": "?"}  # a provider always returns a JSON object
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{number}_{i}",
                    "name": call["function"]["name"],
                    "input": arguments,
                }
            )
        if not blocks:
            blocks = [{"type": "text", "text": EMPTY_REPLY}]
        return {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model", self.policy_name)),
            "content": blocks,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.uncached,
                "cache_creation_input_tokens": usage.written,
                "cache_read_input_tokens": usage.read,
                "output_tokens": approx_tokens(json.dumps(blocks)),
            },
        }

    def complete(self, body: Mapping[str, Any], fault: str | None) -> dict[str, Any]:
        """The chat-completion response for one request."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise ValueError(f"messages[{i}]: must be an object")
            content = message.get("content")
            if isinstance(content, list) and not all(
                isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in content
            ):
                raise ValueError(f"messages[{i}].content: parts must be objects with text")
        marks = [i for i, m in enumerate(messages) if _count_marks(m)]
        if len(marks) > 4:
            raise ValueError(
                f"A maximum of 4 blocks with cache_control may be provided. Found {len(marks)}."
            )
        with self._lock:
            self.chat_marks.append(marks)
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise ValueError("no user message to read an observation from")
        text = users[-1].get("content")
        if isinstance(text, list):  # content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        if not isinstance(text, str):
            raise ValueError("the last user message has no text content")
        system = messages[0].get("content") if messages[0].get("role") == "system" else ""
        reply_text = EMPTY_REPLY
        if isinstance(system, str) and system.startswith(CONTEXT_SYSTEM_START):
            calls = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": n, "arguments": json.dumps(a)},
                }
                for i, (n, a) in enumerate(context_text_calls(text))
            ]
        elif system == READER_SYSTEM:
            context, _, question = text.removeprefix("Conversation:\n").rpartition("\n\nQuestion: ")
            calls, reply_text = [], context_text_answer(context, question)
        else:
            calls = self._policy_calls(text, fault, body.get("seed"))
        prompt_tokens = sum(approx_tokens(json.dumps(m)) for m in messages)
        completion_tokens = approx_tokens(json.dumps(calls))
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else reply_text}
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


def _handler_for(server: PolicyServer) -> type[GuardedHandler]:
    class Handler(GuardedHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self.send_json(
                    HTTPStatus.OK,
                    {"object": "list", "data": [{"id": server.policy_name, "object": "model"}]},
                )
            else:
                self.send_json(HTTPStatus.NOT_FOUND, _error(f"no route {self.path[:200]}"))

        def do_POST(self) -> None:
            route = self.path.rstrip("/")
            if route not in ("/v1/chat/completions", "/chat/completions", "/v1/messages"):
                self.send_json(HTTPStatus.NOT_FOUND, _error(f"no route {self.path[:200]}"))
                return
            body = self.read_json()
            if body is None:
                return  # answered with its 4xx
            number, fault = server.next_fault()
            if fault == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if fault in ("429", "500"):
                status = HTTPStatus(int(fault))
                message = "rate limited" if fault == "429" else "server error"
                # a 1 ms retry, so tests do not wait
                self.send_json(
                    status, _error(f"{message} (injected)"), headers={"retry-after-ms": "1"}
                )
                return
            if fault == "timeout":
                time.sleep(server.timeout_s)
            try:
                if route == "/v1/messages":
                    response = server.messages(body, fault, number)
                else:
                    response = server.complete(body, fault)
            except (ValueError, TypeError, AttributeError, KeyError) as error:
                message = one_line(f"malformed request: {error}", 300)
                self.send_json(HTTPStatus.BAD_REQUEST, _error(message))
                return
            except Exception as error:  # a bug answers 500, never a dropped connection
                message = one_line(f"internal error: {type(error).__name__}: {error}", 300)
                self.send_json(HTTPStatus.INTERNAL_SERVER_ERROR, error_body(message, 500))
                return
            if fault in INJECTED and route != "/v1/messages":
                self.send_json(HTTPStatus.OK, response, inject(fault, response))
                return
            self.send_json(HTTPStatus.OK, response)

    return Handler


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def _strip_marks(value: Any) -> Any:
    """`value` without its cache_control markers (they are not content)."""
    if isinstance(value, dict):
        return {k: _strip_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_marks(v) for v in value]
    return value


def _anthropic_units(body: Mapping[str, Any]) -> tuple[list[Unit], list[int]]:
    """The request as provider-cache units, one per content block as the provider counts them
    (each tool definition, each system block, each block of each message; a string content is
    one block), and the units that carry a breakpoint."""
    system = body.get("system") or []
    blocks: list[Any] = [
        *(body.get("tools") or []),
        *([system] if isinstance(system, str) else system),
    ]
    for message in body["messages"]:
        content = message.get("content") if isinstance(message, dict) else None
        blocks.extend(content if isinstance(content, list) else [content])
    units: list[Unit] = []
    marks: list[int] = []
    count = 0
    for index, block in enumerate(blocks):
        text = json.dumps(_strip_marks(block), sort_keys=True)
        units.append(Unit(content_key(text), estimate_tokens(text)))
        n = _count_marks(block)
        count += n
        if n:
            marks.append(index)
    if count > 4:
        raise ValueError(
            f"A maximum of 4 blocks with cache_control may be provided. Found {count}."
        )
    return units, marks


def _count_marks(value: Any) -> int:
    """cache_control markers anywhere in `value`; ValueError on a kind other than ephemeral."""
    if isinstance(value, dict):
        own = 0
        if "cache_control" in value:
            mark = value["cache_control"]
            if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
                raise ValueError("cache_control: only {'type': 'ephemeral'} is supported")
            own = 1
        return own + sum(_count_marks(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_count_marks(v) for v in value)
    return 0


def _check_messages_shape(body: Mapping[str, Any]) -> None:
    """ValueError naming the first field of a Messages request whose type is wrong."""
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise ValueError("system: must be a string or a list of text blocks")
    blocks = system if isinstance(system, list) else []
    for i, message in enumerate(body["messages"]):
        if not isinstance(message, dict):
            raise ValueError(f"messages.{i}: must be an object")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise ValueError(f"messages.{i}.content: must be a string or a list of blocks")
        if isinstance(content, list):
            blocks = [*blocks, *content]
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise ValueError("content blocks must be objects with a type")
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise ValueError("text blocks need a text string")
    tools = body.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    ):
        raise ValueError("tools: must be a list of objects")


def _check_tool_results(messages: list[Any]) -> None:
    """Every tool_result answers a tool_use of the assistant message just before its turn."""
    pending: set[str] = set()
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise ValueError("messages: each message needs role 'user' or 'assistant'")
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message["role"] == "assistant":
            if pending:
                raise ValueError(f"tool_use ids without tool_result: {sorted(pending)}")
            pending = {
                b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            continue
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                if block.get("tool_use_id") not in pending:
                    raise ValueError(
                        f"unexpected tool_use_id {block.get('tool_use_id')!r} in tool_result"
                    )
                pending.discard(block["tool_use_id"])


def _check_text_blocks(body: Mapping[str, Any]) -> None:
    """Text blocks must hold non-whitespace text (the provider answers 400 otherwise)."""
    blocks: list[Any] = list(body.get("system") or [])
    for message in body["messages"]:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks.extend(content)
    for block in blocks:
        blank = isinstance(block, dict) and not str(block.get("text", "")).strip()
        if blank and block.get("type") == "text":
            raise ValueError("text content blocks must contain non-whitespace text")
