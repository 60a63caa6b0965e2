"""The command line's edge: every number and path a user hands `kvarena` is checked here before
anything runs, and anything that still escapes becomes one line, never a traceback.

- `check_options`: CLI numbers are finite and within `OPTION_LIMITS` (click's own ranges let
  `nan` and `inf` through: `nan < 1` is false). The error names the option.
- `check_seeds`: the last episode's seed (`--seed` + episodes - 1) is within `--seed`'s range.
- `parse_weights`: `--weights` is a JSON object of known components to finite numbers with
  magnitude at most `MAX_WEIGHT` (so a reward can always be written as JSON), each named once,
  the text at most `MAX_WEIGHTS_CHARS` long and no number longer than `MAX_NUMBER_DIGITS`
  digits; it becomes the family's weights value (`rubrics.weights.RubricWeights`, whose
  constructor is the one check), which the run then passes unchanged to the rubric and the
  planners.
- `names_option`: a comma-separated list option (`-p lru,fifo -p noop`) -> its names; an empty
  item (`-s easy,`) is refused, a repeated name is run once with a note.
- `check_path`: a path a user gives is refused (`name too long`) when a component is longer
  than the file system's `NAME_MAX`, the whole is longer than `PATH_MAX`, or it is more than
  `MAX_PATH_DEPTH` components deep, before anything opens it.
- `check_out_dir`: an output directory that is a file, or cannot be created or written, is
  refused before the run, naming the option.
- `SafeGroup`: the top-level handler. An unexpected exception prints `error: <type>: <message>`
  on one line and a pointer to `--debug` (or `KVARENA_DEBUG=1`), which shows the traceback.
  Exit statuses: 0 done; 1 an unexpected error, or output that cannot be written
  (`durable.OutputError`: a full disk, an I/O error); 2 bad input (`InputError`, a file
  `bounded_read` refuses, or a path the system calls too long, ENAMETOOLONG); 3 a run that
  finished with failed episodes (`EXIT_EPISODES_FAILED`); 130 Ctrl-C, 143 SIGTERM. A closed
  output pipe (`kvarena ... | head`) ends quietly with 1. Every message passes the secret scrubber.
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
import typer.core
from typer.exceptions import TyperException

from kv_cache_env.bounded_read import FileReadError
from kv_cache_env.limits import MAX_EPISODE_STEPS, MAX_WEIGHT
from model_client.model_output import one_line

from .durable import OutputError
from .help import HelpGroup
from .secrets import scrub

if TYPE_CHECKING:
    from rubrics.weights import RubricWeights

W = TypeVar("W", bound="RubricWeights")

EXIT_EPISODES_FAILED = 3
"""Exit status of a run that finished but recorded failed episodes (0: every episode ok; 1: the
run stopped on an error; 2: bad input; 130 / 143: interrupted by Ctrl-C / SIGTERM)."""


OPTION_LIMITS: dict[str, tuple[float, float]] = {
    "--episodes": (1, 100_000),
    "--seed": (0, 2**62),
    "--steps": (1, MAX_EPISODE_STEPS),
    "--concurrency": (1, 256),
    "--workers": (1, 256),
    "--history-turns": (0, 100_000),
    "--timeout": (1, 3600),
    "--max-retries": (0, 20),
    "--temperature": (0, 2),
    "--sampling-seed": (0, 2**62),
    "--max-tokens": (1, 1 << 20),
    "--max-blocks": (1, 1 << 20),
    "--price-in": (0, 1e6),
    "--price-out": (0, 1e6),
    "--price-cached": (0, 1e6),
    "--price-write": (0, 1e6),
    "--cache-min-tokens": (0, 1 << 20),
    "--cache-buffer-multiplier": (1, 100),
    "--header-timeout": (0.1, 3600),
    "--body-timeout": (0.1, 3600),
    "--repeats": (1, 100),
    "--bound-episodes": (0, 100_000),
    "--speed-episodes": (1, 100_000),
    "--expert-episodes": (1, 100_000),
    "--ablation-episodes": (1, 100_000),
    "--screen-episodes": (1, 100_000),
}
"""Inclusive ranges of the numeric options (documented in the README)."""

MAX_WEIGHTS_CHARS = 10_000
"""Longest `--weights` text: far more than every component's weight written out."""
MAX_NUMBER_DIGITS = 400
"""Longest run of digits in one `--weights` number (its magnitude is checked after)."""
MAX_PATH_DEPTH = 64
"""Most components a path given on the command line may have."""
PATH_MAX = 4096
"""Longest path given on the command line, in bytes (Linux's PATH_MAX)."""
NAME_MAX = 255
"""Longest component of such a path, in bytes (the file system's own limit where it says)."""


class InputError(ValueError):
    """Bad user input; the message names the option, or FILE:LINE."""


def check_options(values: Mapping[str, float | int | None]) -> None:
    """InputError for the first option (by name, e.g. "--timeout") that is not finite or lies
    outside `OPTION_LIMITS`; None values (unset) pass."""
    for option, value in values.items():
        if value is None:
            continue
        lo, hi = OPTION_LIMITS[option]
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{option}: must be a finite number, got {value}")
        if not lo <= value <= hi:
            raise InputError(f"{option}: must be between {_fmt(lo)} and {_fmt(hi)}, got {value:g}")


def check_seeds(seed: int, episodes: int, option: str = "--seed") -> None:
    """InputError when the last episode's seed (`seed + episodes - 1`) lies past `option`'s
    range: every seed played is one the documentation allows."""
    hi = OPTION_LIMITS[option][1]
    last = seed + episodes - 1
    if last > hi:
        raise InputError(
            f"{option}: the last episode's seed ({option} + episodes - 1 = {last}) must be at "
            f"most {_fmt(hi)}; give a smaller {option} or fewer episodes"
        )


def names_option(values: Iterable[str] | None, option: str) -> list[str]:
    """`-p a,b -p c` -> ["a", "b", "c"]: InputError for an empty item (`a,,b`, `a,`, `,`);
    a name given twice is kept once (`repeated_names` says which, for a note)."""
    names: list[str] = []
    for value in values or []:
        items = [item.strip() for item in value.split(",")]
        if not any(items):
            raise InputError(f"{option}: the list is empty (leave the option out for the default)")
        if not all(items):
            raise InputError(
                f"{option} {value[:60]!r}: an empty item in the comma-separated list "
                "(a stray comma?)"
            )
        names += items
    return list(dict.fromkeys(names))


def repeated_names(values: Iterable[str] | None) -> list[str]:
    """The names a list option gives more than once (each once, in order)."""
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for value in values or []:
        for name in (item.strip() for item in value.split(",")):
            if name in seen:
                repeated[name] = None
            seen.add(name)
    return list(repeated)


def check_path(path: Path | str, option: str) -> Path:
    """`path`, or InputError naming `option` when it is too long or too deep (the module
    docstring's limits), before anything opens it."""
    text = os.fsencode(path)
    parts = [part for part in text.split(b"/") if part]
    name_max = _name_max(Path(os.fsdecode(text)))
    shown = os.fsdecode(text[:60]) + ("..." if len(text) > 60 else "")
    if len(os.fsencode(os.path.abspath(path))) > PATH_MAX:
        raise InputError(
            f"{option} {shown}: name too long ({len(text):,} bytes; at most {PATH_MAX:,})"
        )
    longest = max((len(part) for part in parts), default=0)
    if longest > name_max:
        raise InputError(
            f"{option} {shown}: name too long (a component of {longest:,} bytes; at most "
            f"{name_max})"
        )
    if len(parts) > MAX_PATH_DEPTH:
        raise InputError(
            f"{option} {shown}: name too long ({len(parts)} components deep; at most "
            f"{MAX_PATH_DEPTH})"
        )
    return Path(path)


def _name_max(path: Path) -> int:
    """NAME_MAX of the file system holding `path`'s nearest existing ancestor."""
    probe = path.absolute()
    for folder in (probe, *probe.parents):
        try:
            if folder.is_dir():
                return int(os.pathconf(folder, "PC_NAME_MAX"))
        except (OSError, ValueError):
            break
    return NAME_MAX


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def parse_weights(text: str | None, kind: type[W], option: str = "--weights") -> W:
    """`--weights` JSON -> the family's weights value (`kind`: `rubrics.Weights`,
    `rubrics.context.ContextWeights`), checked by its one constructor; InputError naming the
    option and the key."""
    from rubrics.weights import WeightError  # (start-up time: rubrics loads the simulator)

    if not text:
        return kind()

    def no_constants(name: str) -> Any:
        raise InputError(f"{option}: {name} is not a number (weights must be finite)")

    def short(literal: str) -> str:
        if len(literal) > MAX_NUMBER_DIGITS:
            raise InputError(
                f"{option}: a number of {len(literal):,} characters (at most "
                f"{MAX_NUMBER_DIGITS}; a weight's size is at most {MAX_WEIGHT:g})"
            )
        return literal

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise InputError(f"{option}: {key!r} is given twice (name each component once)")
            seen[key] = value
        return seen

    if len(text) > MAX_WEIGHTS_CHARS:
        raise InputError(
            f"{option}: {len(text):,} characters of JSON (at most {MAX_WEIGHTS_CHARS:,})"
        )
    try:
        raw = json.loads(
            text,
            parse_constant=no_constants,
            parse_int=lambda literal: int(short(literal)),
            parse_float=lambda literal: float(short(literal)),
            object_pairs_hook=unique_keys,
        )
    except json.JSONDecodeError as error:
        raise InputError(f"{option}: not JSON ({error.msg} at char {error.pos})") from None
    except RecursionError:
        raise InputError(f"{option}: not JSON (nested too deep)") from None
    if not isinstance(raw, dict):
        raise InputError(f"{option}: expected a JSON object of component -> weight")
    try:
        return kind(raw)
    except WeightError as error:
        raise InputError(one_line(f"{option}: {error}")) from None


def check_out_dir(path: Path, option: str = "--out") -> None:
    """Create `path` (and parents) or raise InputError naming `option` and why."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{option} {path}: cannot create it ({error.strerror or error})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: not writable")


def debug_enabled() -> bool:
    return os.environ.get("KVARENA_DEBUG", "") not in ("", "0")


class SafeGroup(HelpGroup):
    """The top-level handler: no traceback unless `--debug` / KVARENA_DEBUG=1 (and the
    help screens of `help`)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        # A BrokenPipeError is the reader going away (`kvarena ... | head`), not a bug: typer's
        # `main` silences the streams and exits 1, as `git log | head` ends quietly.
        except (typer.Exit, typer.Abort, TyperException, BrokenPipeError):
            raise
        except (InputError, FileReadError) as error:
            typer.echo(f"error: {scrub(one_line(str(error), 400))}", err=True)
            raise typer.Exit(2) from None
        except OutputError as error:
            typer.echo(f"error: {scrub(one_line(str(error), 400))}", err=True)
            raise typer.Exit(1) from None
        except Exception as error:
            if ctx.params.get("debug") or debug_enabled():
                raise
            if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG:
                # a path no check saw (one read from a file, a name built from an option)
                where = os.fsdecode(error.filename or "")[:60]
                typer.echo(f"error: {scrub(one_line(f'{where}...: name too long'))}", err=True)
                raise typer.Exit(2) from None
            message = scrub(one_line(f"{type(error).__name__}: {error}", 300))
            typer.echo(
                f"error: unexpected {message} (a bug; rerun with --debug for the traceback)",
                err=True,
            )
            raise typer.Exit(1) from None
