"""Raw HTTP/1.1 over sockets, for probing servers and clients with what a well-behaved library
would never send or answer: malformed headers, lying lengths, trickled bytes.

The hostile-input harness (`scripts/hostile.py`) and the tests of the guarded servers and the
hosted-model clients share it:
- `request_bytes` builds a request by hand (any `Content-Length`, or none);
- `exchange` sends one request and reads one response; `read_response` reads one from an
  open socket (`None` when the peer closed first);
- `read_request` reads one request's head and body on the server side;
- `serve_raw` listens on a free loopback port and hands each connection to a function on its
  own daemon thread (close the returned listener to stop accepting).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any, NamedTuple


class Response(NamedTuple):
    """One HTTP response: status, headers (names lower-cased) and the body's bytes."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (`None` for an empty body)."""
        return json.loads(self.body) if self.body else None


def request_bytes(
    path: str, body: bytes, *, method: str = "POST", extra: str = "", length: str | None = None
) -> bytes:
    """A request for `path` carrying `body`; `length` overrides the `Content-Length` value
    (`""` leaves the header out); `extra` is inserted as further header lines."""
    size = str(len(body)) if length is None else length
    header = f"Content-Length: {size}\r\n" if size != "" else ""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{header}{extra}\r\n"
    ).encode() + body


def _read_message(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """One message's head and body: the head up to its blank line, then the body until it
    holds its `Content-Length` or the peer closes (`None` if it closed within the head)."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(_headers(head).get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head, body[:length]


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {
        name.strip().lower(): value.strip()
        for name, value in (line.split(":", 1) for line in lines if ":" in line)
    }


def read_response(sock: socket.socket) -> Response | None:
    """Read one response from `sock`, or `None` if it closed before a whole head arrived."""
    message = _read_message(sock)
    if message is None:
        return None
    head, body = message
    return Response(int(head.split()[1]), _headers(head), body)


def exchange(
    port: int, data: bytes, *, host: str = "127.0.0.1", wait: float = 10.0
) -> Response | None:
    """Send `data` to `host:port` on a new connection and read one response (`wait` bounds
    each socket operation)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.settimeout(wait)
        sock.connect((host, port))
        sock.sendall(data)
        return read_response(sock)


def read_request(conn: socket.socket) -> tuple[bytes, bytes] | None:
    """Read one request's head and body (by its `Content-Length`), or `None` if the client
    closed before a whole head arrived."""
    return _read_message(conn)


def serve_raw(handle: Callable[[socket.socket], None]) -> tuple[socket.socket, int]:
    """Listen on a free loopback port; each accepted connection goes to `handle` on its own
    daemon thread. Returns the listener (close it to stop) and its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener, listener.getsockname()[1]


__all__ = ["Response", "exchange", "read_request", "read_response", "request_bytes", "serve_raw"]
