"""A bounded HTTP/1.1 server for the keyless endpoints (`serve-policy`, and the front of
`serve-model`): whatever a client sends, it gets an answer or a closed connection within set
times, and no request can hold more than its share of memory or threads.

- Body: a POST needs `Content-Length` (411 without one; `Transfer-Encoding` bodies are refused
  with 411 too), a plain decimal integer (400), one value (400), at most `MAX_BODY_BYTES`
  (413, the body left unread and the connection closed).
- JSON: UTF-8, well formed, an object, nested at most `MAX_JSON_DEPTH` deep (400 otherwise;
  `GuardedHandler.read_json`).
- Errors: every refusal is a JSON body `{"error": {"message", "type", "code"}}`, including
  what `http.server` itself refuses (a bad request line, headers too long or too many: 400 /
  431) and unknown methods (405).
- Time: from a connection's first byte (or the end of its previous response: an idle
  keep-alive connection) to the end of the request's headers, at most `header_timeout_s`; the
  body within `body_timeout_s` of the headers. A reaper thread shuts the reading side of a
  connection past its deadline (a client trickling one byte at a time cannot reset it); the
  request is answered 408 where an answer can still be sent.
- Threads: `max_connections` worker threads (default `MAX_CONNECTIONS`, at least the CLI's
  largest `--concurrency`); a connection beyond them is answered 503 with `Retry-After: 1`
  (the OpenAI and Anthropic SDKs wait that long and retry) and closed.
- Addresses: an IPv6 host (`::1`) binds an IPv6 socket.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from kv_cache_env.bounded_read import MAX_JSON_DEPTH, FileReadError, loads

MAX_BODY_BYTES = 8 << 20
"""Largest request body (8 MiB): a request of the longest conversation a 128k-token context
holds is ~0.5 MB of JSON."""
MAX_CONNECTIONS = 256
"""Worker threads: the CLI's largest `--concurrency` (`OPTION_LIMITS`)."""
HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
REAPER_TICK_S = 0.1
RETRY_AFTER_S = 1
_DECIMAL = re.compile(r"[0-9]{1,19}")


def error_body(message: str, status: int) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "code": status}}


class GuardedHTTPServer(HTTPServer):
    """`HTTPServer` with the module's bounds: a worker pool, deadlines and a 503 beyond it."""

    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS
    """The listen backlog: a burst of the largest --concurrency waits to be accepted (5, the
    default, drops connections beyond it until the client's SYN retry a second later)."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[GuardedHandler],
        *,
        max_connections: int = MAX_CONNECTIONS,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.refused = 0
        """Connections answered 503 because every worker was busy."""
        self._slots = threading.BoundedSemaphore(max_connections)
        self._workers = ThreadPoolExecutor(max_connections, thread_name_prefix="http")
        self._refusers = ThreadPoolExecutor(4, thread_name_prefix="http-busy")
        self._deadlines: dict[socket.socket, float] = {}
        self._active: set[socket.socket] = set()
        """Connections a worker holds (closed by `server_close`)."""
        self._expired: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        super().__init__(address, handler)
        self._reaper = threading.Thread(target=self._reap, name="http-reaper", daemon=True)
        self._reaper.start()

    # --- connections ---------------------------------------------------------------------------
    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with self._lock:
                self.refused += 1
            try:
                self._refusers.submit(self._refuse_busy, request)
            except RuntimeError:  # shutting down
                self.shutdown_request(request)
            return
        with self._lock:
            self._active.add(request)
        try:
            self._workers.submit(self._work, request, client_address)
        except RuntimeError:
            with self._lock:
                self._active.discard(request)
            self._slots.release()
            self.shutdown_request(request)

    def _work(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # a handler bug must not take the server down; the client sees EOF
            pass
        finally:
            self.disarm(request)
            with self._lock:
                self._expired.discard(request)
                self._active.discard(request)
            self.shutdown_request(request)
            self._slots.release()

    def _refuse_busy(self, sock: socket.socket) -> None:
        body = json.dumps(
            error_body("every worker is busy; retry after the Retry-After delay", 503)
        ).encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\n"
            f"Retry-After: {RETRY_AFTER_S}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        try:
            sock.settimeout(1.0)
            sock.sendall(head + body)
            sock.shutdown(socket.SHUT_WR)
            # read what the client sent, briefly, so closing does not reset the connection
            # before it reads the answer
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline and sock.recv(65536):
                pass
        except OSError:
            pass
        finally:
            self.shutdown_request(sock)

    # --- deadlines -----------------------------------------------------------------------------
    def arm(self, sock: socket.socket, seconds: float) -> None:
        with self._lock:
            self._deadlines[sock] = time.monotonic() + seconds

    def disarm(self, sock: socket.socket) -> None:
        with self._lock:
            self._deadlines.pop(sock, None)

    def expired(self, sock: socket.socket) -> bool:
        with self._lock:
            return sock in self._expired

    def _reap(self) -> None:
        while not self._closing.wait(REAPER_TICK_S):
            now = time.monotonic()
            with self._lock:
                late = [s for s, d in self._deadlines.items() if d <= now]
                for sock in late:
                    del self._deadlines[sock]
                    self._expired.add(sock)
            for sock in late:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RD)

    def server_close(self) -> None:
        """Stop listening and end every connection now: a worker blocked reading an idle
        client would otherwise hold the process's exit until its deadline."""
        self._closing.set()
        super().server_close()
        with self._lock:
            active = list(self._active)
        for sock in active:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._workers.shutdown(wait=False, cancel_futures=True)
        self._refusers.shutdown(wait=False, cancel_futures=True)


class GuardedHandler(BaseHTTPRequestHandler):
    """A request handler under `GuardedHTTPServer`'s bounds; subclasses implement `do_GET` /
    `do_POST` with `read_json` and `send_json`."""

    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"
    """What a request without a version is answered as: with headers (HTTP/0.9 has none, and
    a JSON error without a status line is no answer)."""
    server: GuardedHTTPServer

    def setup(self) -> None:
        self.timeout = self.server.header_timeout_s  # each read's own limit, under the deadline
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def handle_one_request(self) -> None:
        self.server.arm(self.connection, self.server.header_timeout_s)
        try:
            super().handle_one_request()
        finally:
            self.server.disarm(self.connection)

    def parse_request(self) -> bool:
        if self.server.expired(self.connection):
            self.send_error(HTTPStatus.REQUEST_TIMEOUT)
            return False
        if not super().parse_request():
            return False
        if self.server.expired(self.connection):
            self.send_error(HTTPStatus.REQUEST_TIMEOUT)
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Every refusal as JSON (http.server's own ones included); 501 becomes 405."""
        if code == HTTPStatus.NOT_IMPLEMENTED:
            code = HTTPStatus.METHOD_NOT_ALLOWED
            message = f"method {self.command!r} is not allowed; use GET or POST"
        if self.server.expired(self.connection) and code < 500:
            code, message = HTTPStatus.REQUEST_TIMEOUT, "the request took too long to arrive"
        status = HTTPStatus(code)
        self.close_connection = True
        text = message or status.phrase
        self.send_json(status, error_body(text, int(status)), close=True)

    def read_json(self) -> dict[str, Any] | None:
        """The request's JSON object, or None after answering the error (module docstring)."""
        if self.headers.get("Transfer-Encoding") is not None:
            self._refuse(HTTPStatus.LENGTH_REQUIRED, "send a Content-Length (no chunked bodies)")
            return None
        values = self.headers.get_all("Content-Length") or []
        if not values:
            self._refuse(HTTPStatus.LENGTH_REQUIRED, "a POST needs a Content-Length header")
            return None
        if len(set(values)) != 1 or not _DECIMAL.fullmatch(values[0].strip()):
            shown = ", ".join(v[:20] for v in values)
            self._refuse(HTTPStatus.BAD_REQUEST, f"bad Content-Length: {shown!r}")
            return None
        length = int(values[0])
        if length > MAX_BODY_BYTES:
            self._refuse(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the body is {length} bytes; the limit is {MAX_BODY_BYTES}",
            )
            return None
        self.server.arm(self.connection, self.server.body_timeout_s)
        self.connection.settimeout(self.server.body_timeout_s)
        timed_out = False
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            raw, timed_out = b"", True
        except OSError:
            raw = b""
        self.connection.settimeout(self.server.header_timeout_s)
        if len(raw) < length:
            if timed_out or self.server.expired(self.connection):
                self._refuse(HTTPStatus.REQUEST_TIMEOUT, "the body took too long to arrive")
            else:
                self._refuse(HTTPStatus.BAD_REQUEST, "the body is shorter than Content-Length")
            return None
        self.server.disarm(self.connection)
        try:
            body = loads(raw, "request body", MAX_JSON_DEPTH)
        except FileReadError as error:
            self.send_json(HTTPStatus.BAD_REQUEST, error_body(str(error), 400))
            return None
        if not isinstance(body, dict):
            self.send_json(
                HTTPStatus.BAD_REQUEST, error_body("the request body must be a JSON object", 400)
            )
            return None
        return body

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        """An error after which the connection cannot be reused (the body is unread)."""
        self.send_json(status, error_body(message, int(status)), close=True)

    def send_json(
        self,
        status: HTTPStatus,
        payload: Mapping[str, Any] | None,
        raw: bytes | None = None,
        *,
        close: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode() if raw is None else raw
        if close:
            self.close_connection = True
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, TimeoutError, OSError):
            self.close_connection = True  # the client gave up; nothing to do


MAX_UPSTREAM_BYTES = 64 << 20
"""Largest answer relayed from the server behind a front (`proxy_handler`)."""


def proxy_handler(upstream: tuple[str, int], timeout_s: float = 600.0) -> type[GuardedHandler]:
    """A handler that checks each request within the module's bounds and relays it to the HTTP
    server at `upstream` (`serve-model`'s front to the local model server): the JSON body as
    read, the answer's status, content type and body (at most `MAX_UPSTREAM_BYTES`; a streamed
    answer arrives whole). An upstream that cannot be reached or answers too much is a 502."""
    import http.client

    class Proxy(GuardedHandler):
        def do_GET(self) -> None:
            self._relay("GET", None)

        def do_POST(self) -> None:
            body = self.read_json()
            if body is not None:
                self._relay("POST", json.dumps(body).encode())

        def _relay(self, method: str, data: bytes | None) -> None:
            connection = http.client.HTTPConnection(*upstream, timeout=timeout_s)
            try:
                headers = {"Content-Type": "application/json"} if data is not None else {}
                connection.request(method, self.path, body=data, headers=headers)
                answer = connection.getresponse()
                payload = answer.read(MAX_UPSTREAM_BYTES + 1)
                if len(payload) > MAX_UPSTREAM_BYTES:
                    raise ValueError(f"the model server answered over {MAX_UPSTREAM_BYTES} bytes")
                status = HTTPStatus(answer.status)
            except (OSError, ValueError, http.client.HTTPException) as error:
                message = f"the model server did not answer: {type(error).__name__}: {error}"
                self.send_json(HTTPStatus.BAD_GATEWAY, error_body(message[:300], 502))
                return
            finally:
                connection.close()
            self.send_json(status, None, payload)

    return Proxy
