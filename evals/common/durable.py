"""Writing output that survives faults: a whole file appears complete or not at all, an appended
line is whole, nothing is written through a symbolic link inside a run directory, every byte
passes the secret scrubber (`secrets.scrub`), and a full or failing disk is one line saying so
(`OutputError`), never a traceback.

- `write_atomic(path, text)`: a temporary file beside `path` (a fresh name, created
  exclusively, so never through a link), fsync, then renamed over `path` (a rename replaces a
  link; it never writes through one). `write_all_atomic` does it for several files at once:
  all renamed, or none. `in_place_fallback=True` (`run.json`): when the disk is
  too full for the temporary file, the old file is overwritten in place if its allocated blocks
  hold the new text, so the run's final status is still recorded.
- `LineLog`: a file opened for appending (a link is refused); `append(line)` writes one whole
  line and fsyncs it; a write that fails part-way is cut back to the last whole line.
- `refuse_links(directory, names)`: OutputError naming the first entry that is a link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .secrets import scrub


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()
"""What a new file's permissions are (as `open` would give them; `mkstemp` gives 0600)."""


class OutputError(Exception):
    """Output that cannot be written (no space, an I/O error, a link where a file belongs);
    the message is one line naming the path and the reason."""


def describe(error: OSError) -> str:
    """ "No space left on device (ENOSPC)"-style text for an OSError."""
    code = errno.errorcode.get(error.errno or 0)
    reason = error.strerror or str(error)
    return f"{reason} ({code})" if code else reason


def refuse_links(directory: Path, names: Iterable[str]) -> None:
    """OutputError if `directory/NAME` is a symbolic link for any NAME (the directory itself
    may be one: only what lies inside it is guarded)."""
    for name in names:
        entry = directory / name
        if entry.is_symlink():
            raise OutputError(
                f"{entry} is a symbolic link; a run directory's entries must be plain files "
                "(remove the link, or write the run elsewhere)"
            )


def write_atomic(path: Path, text: str, *, in_place_fallback: bool = False) -> None:
    """`path` holds `text` (scrubbed) in full, or keeps what it held: OutputError otherwise."""
    try:
        write_all_atomic([(path, text)])
    except OutputError:
        if in_place_fallback and _overwrite_in_place(path, scrub(text).encode("utf-8")):
            return
        raise


def write_all_atomic(files: Iterable[tuple[Path, str]]) -> None:
    """Every `(path, text)` written whole, or none of them changed: each text goes to a
    temporary file beside its path first, and only when all are on disk are they renamed into
    place (a report's files appear together or not at all)."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files:
            try:
                staged.append((_stage(path, scrub(text).encode("utf-8")), path))
            except OSError as error:
                raise OutputError(f"cannot write {path}: {describe(error)}") from None
        for temporary, path in staged:
            try:
                os.replace(temporary, path)
            except OSError as error:
                raise OutputError(f"cannot write {path}: {describe(error)}") from None
    finally:
        for temporary, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary)  # gone already once renamed


def _stage(path: Path, data: bytes) -> str:
    """A fresh temporary file beside `path` holding `data`, fsynced; its name."""
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(descriptor, FILE_MODE)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary


def _overwrite_in_place(path: Path, data: bytes) -> bool:
    """Write `data` over a regular file whose allocated blocks already hold it (no new space
    needed); False where that is not possible."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        allocated = os.fstat(descriptor).st_blocks * 512
        if allocated < len(data):
            return False
        os.pwrite(descriptor, data, 0)
        os.ftruncate(descriptor, len(data))
        os.fsync(descriptor)
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


class LineLog:
    """A file appended one whole line at a time (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(
                path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
            )
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise OutputError(
                    f"{path} is a symbolic link; a run directory's entries must be plain files"
                ) from None
            raise OutputError(f"cannot open {path}: {describe(error)}") from None
        self._size = os.fstat(self._fd).st_size

    def append(self, line: str) -> None:
        """Write `line` (no newline of its own) and a newline, then fsync; OutputError, with
        the file cut back to its last whole line, if that fails."""
        data = (scrub(line) + "\n").encode("utf-8")
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except BaseException as error:  # a full disk, or Ctrl-C between two writes
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            if isinstance(error, OSError):
                raise OutputError(f"cannot write {self.path}: {describe(error)}") from None
            raise
        self._size += len(data)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0
