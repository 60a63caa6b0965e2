"""One bounded reader for every file the project reads that someone else may have written:
traces, results files, transcripts, `run.json`, learned weights.

Each kind of file has its `Limits` (whole-file bytes after decompression, bytes per line, JSON
nesting depth), derived from the largest legitimate file of that kind (the constants below say
how). Whatever the bytes, a read ends in one of two ways: the file's lines or value, or a
`FileReadError` whose one-line message names `FILE[:LINE]` and what is wrong — a missing or
unreadable file, something that is not a regular file, a `.gz` that is not gzip, truncated or
corrupt, more bytes than the limit (a gzip bomb stops there, after at most that much work), a
line over the line limit, bytes that are not UTF-8 text or hold a NUL, JSON that is not JSON or
nests deeper than the limit. Nothing else escapes: no EOFError, zlib.error, UnicodeDecodeError
or RecursionError, and no read of a whole file into memory before its size is known.

- `iter_lines(path, limits)`: (line number, text) of each non-blank line, streamed.
- `iter_line_bytes(path, limits)`: the same as bytes, checked for size only (a resumed run
  skips an undecodable line rather than stopping).
- `read_json(path, limits)`: one JSON document.
- `loads(text, where, max_depth)`: JSON text with the depth bound (the policy server's bodies).

Compressed input: a path ending in `.gz` is read as gzip (several members allowed).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MAX_JSON_DEPTH = 64
"""Deepest JSON nesting read anywhere. The deepest legitimate document is a Messages request
with tool schemas (about 8 levels); a results line nests 5 deep. Python code that walks parsed
JSON recursively stays far from the interpreter's recursion limit (1,000)."""

CHUNK_BYTES = 1 << 20
"""Bytes decompressed (or read) at a time: memory stays bounded whatever the file holds."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one kind of file may hold. `max_bytes` counts bytes after decompression."""

    kind: str
    """What the file is, for messages ("trace", "results file", ...)."""
    max_bytes: int | None
    """Largest file; None: no whole-file limit (read a line at a time)."""
    max_line_bytes: int
    """Longest line (line-oriented files), or the document (JSON files)."""
    max_depth: int = MAX_JSON_DEPTH


TRACE_LIMITS = Limits("trace", max_bytes=1 << 30, max_line_bytes=64 << 10)
"""A trace: 1 GiB decompressed (a week at the Mooncake conversation trace's density, 3 MB per
hour, is ~0.5 GB; the span limit is 8 days), 64 KiB a line (a request of the largest size a
replay accepts, 2^20 tokens, lists 2,048 hash ids: ~45 KB)."""
RESULTS_LIMITS = Limits("results file", max_bytes=None, max_line_bytes=64 << 20)
"""`results.jsonl`: read a line at a time, no whole-file limit; 64 MiB a line. One episode of a
`--full` replay of the built-in Mooncake trace (3,540 s) writes a line of 0.25 MB; the longest
trace span a replay accepts (8 days, 195 times longer) at that density writes ~48 MB."""
TRANSCRIPT_LIMITS = Limits("transcript", max_bytes=256 << 20, max_line_bytes=256 << 20)
"""One episode's transcript (`transcripts/*.json`): 256 MiB. A model's `--full` replay of the
built-in Mooncake trace (3,541 turns of a few KB of observation each) writes ~15 MB."""
SMALL_JSON_LIMITS = Limits("JSON file", max_bytes=1 << 20, max_line_bytes=1 << 20)
"""`run.json` and learned weights: a few KB each; 1 MiB."""


class FileReadError(ValueError):
    """A file that cannot be read within its limits; the message names FILE[:LINE]."""


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def _open(path: Path) -> IO[bytes]:
    try:
        raw = path.open("rb")
    except FileNotFoundError:
        raise FileReadError(f"{path}: no such file") from None
    except OSError as error:
        raise FileReadError(f"{path}: cannot read it ({error.strerror or error})") from None
    mode = os.fstat(raw.fileno()).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raw.close()
        raise FileReadError(f"{path}: not a regular file")
    return raw


def _chunks(path: Path, limits: Limits) -> Iterator[bytes]:
    """The file's bytes (decompressed for `.gz`), `CHUNK_BYTES` at a time, at most
    `limits.max_bytes` in all."""
    compressed = path.suffix == ".gz"
    with _open(path) as raw:
        stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
        total = 0
        while True:
            try:
                chunk = stream.read(CHUNK_BYTES)
            except gzip.BadGzipFile as error:
                raise FileReadError(f"{path}: not a gzip file ({error})") from None
            except EOFError:
                message = f"{path}: the compressed data ends early (truncated?)"
                raise FileReadError(message) from None
            except zlib.error as error:
                raise FileReadError(f"{path}: corrupt gzip data ({error})") from None
            except OSError as error:
                raise FileReadError(f"{path}: cannot read it ({error.strerror or error})") from None
            if not chunk:
                return
            total += len(chunk)
            if limits.max_bytes is not None and total > limits.max_bytes:
                unpacked = " decompressed" if compressed else ""
                raise FileReadError(
                    f"{path}: more than {_size(limits.max_bytes)}{unpacked}, the largest "
                    f"{limits.kind} read"
                )
            yield chunk


def iter_line_bytes(path: str | Path, limits: Limits) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the line ending) of each line that is not empty, streamed.
    FileReadError for the file's size, its compression or a line over the line limit."""
    path = Path(path)
    number = 1
    """Number of the line that starts the next unconsumed byte."""
    pending: list[bytes] = []
    pending_bytes = 0
    max_line = limits.max_line_bytes

    def too_long(at: int) -> FileReadError:
        return FileReadError(
            f"{path}:{at}: a line longer than {_size(max_line)}, the longest {limits.kind} "
            "line read"
        )

    def lines_of(block: bytes) -> Iterator[tuple[int, bytes]]:
        nonlocal number
        first = number
        number += block.count(b"\n")
        if block.isspace() or not block:
            return  # a run of blank lines (a newline bomb) costs one scan in C
        for offset, line in enumerate(block.split(b"\n")):
            if len(line) > max_line:
                raise too_long(first + offset)
            if line and not line.isspace():
                yield first + offset, line.removesuffix(b"\r")

    for chunk in _chunks(path, limits):
        cut = chunk.rfind(b"\n")
        if cut < 0:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes > max_line:
                raise too_long(number)
            continue
        block = b"".join([*pending, chunk[: cut + 1]]) if pending else chunk[: cut + 1]
        pending, pending_bytes = [chunk[cut + 1 :]], len(chunk) - cut - 1
        yield from lines_of(block)
    yield from lines_of(b"".join(pending))


def iter_lines(path: str | Path, limits: Limits) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line; FileReadError also for a line that is not
    UTF-8 text or holds a NUL byte (a binary file)."""
    for number, line in iter_line_bytes(path, limits):
        if b"\0" in line:
            raise FileReadError(f"{path}:{number}: not UTF-8 text (a NUL byte: a binary file?)")
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise FileReadError(f"{path}:{number}: not UTF-8 text (a binary file?)") from None
        if text.strip():
            yield number, text


def read_bytes(path: str | Path, limits: Limits) -> bytes:
    """The whole file (decompressed), at most `limits.max_bytes` (or `max_line_bytes`)."""
    path = Path(path)
    bound = limits.max_bytes if limits.max_bytes is not None else limits.max_line_bytes
    return b"".join(_chunks(path, Limits(limits.kind, bound, bound, limits.max_depth)))


def read_json(
    path: str | Path, limits: Limits, parse_constant: Callable[[str], Any] | None = None
) -> Any:
    """One JSON document from a file; FileReadError naming FILE[:LINE] for anything else."""
    path = Path(path)
    data = read_bytes(path, limits)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise FileReadError(f"{path}:{line}: not UTF-8 text (a binary file?)") from None
    return loads(text, str(path), limits.max_depth, parse_constant)


def loads(
    text: str | bytes,
    where: str,
    max_depth: int = MAX_JSON_DEPTH,
    parse_constant: Callable[[str], Any] | None = None,
) -> Any:
    """`json.loads(text)` nested at most `max_depth` deep; FileReadError `where[:LINE]: ...`
    otherwise. `parse_constant` as for `json.loads` (NaN, Infinity); a ValueError it raises
    becomes the message."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            line = text.count(b"\n", 0, error.start) + 1
            raise FileReadError(f"{where}:{line}: not UTF-8 text (a binary file?)") from None
    try:
        value = json.loads(text, parse_constant=parse_constant)
    except json.JSONDecodeError as error:
        raise FileReadError(f"{where}:{error.lineno}: not JSON ({error.msg})") from None
    except RecursionError:
        raise FileReadError(f"{where}: JSON nested more than {max_depth} deep") from None
    except ValueError as error:  # a parse_constant refusal; an integer of over 4,300 digits
        message = str(error)
        if "integer string conversion" in message:
            message = "an integer of more than 4,300 digits"
        raise FileReadError(f"{where}: {message.splitlines()[0][:200]}") from None
    if too_deep(text, max_depth):
        raise FileReadError(f"{where}: JSON nested more than {max_depth} deep")
    return value


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_EMPTY_PAIR = re.compile(r"\[\]|\{\}")


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether well-formed JSON `text` nests more than `limit` deep. Regular expressions in C:
    strings dropped, then everything but brackets, then one layer of innermost empty pairs per
    pass (at most `limit` passes; a document's typical layers vanish in a few)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(limit):
        brackets = _EMPTY_PAIR.sub("", brackets)
        if not brackets:
            return False
    return True
