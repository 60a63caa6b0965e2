"""The command line's edge: every number and path a user hands `kvarena` is checked here before
anything runs, and anything that still escapes becomes one line, never a traceback.

- `check_options`: CLI numbers are finite and within `OPTION_LIMITS` (click's own ranges let
  `nan` and `inf` through: `nan < 1` is false). The error names the option.
- `parse_weights`: `--weights` is a JSON object of known components to finite numbers with
  magnitude at most `MAX_WEIGHT` (so a reward can always be written as JSON); it becomes the
  family's weights value (`rubrics.weights.RubricWeights`, whose constructor is the one check),
  which the run then passes unchanged to the rubric and the planners.
- `check_out_dir`: an output directory that is a file, or cannot be created or written, is
  refused before the run, naming the option.
- `SafeGroup`: the top-level handler. An unexpected exception prints `error: <type>: <message>`
  on one line and a pointer to `--debug` (or `KVARENA_DEBUG=1`), which shows the traceback.
  Exit statuses: 0 done; 1 an unexpected error, or output that cannot be written
  (`durable.OutputError`: a full disk, an I/O error); 2 bad input (`InputError`, or a file
  `bounded_read` refuses); 3 a run that finished with failed episodes
  (`EXIT_EPISODES_FAILED`); 130 Ctrl-C, 143 SIGTERM. A closed output pipe (`kvarena ... |
  head`) ends quietly with 1. Every message passes the secret scrubber.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
import typer.core
from typer.exceptions import TyperException

from kv_cache_env.bounded_read import FileReadError
from kv_cache_env.limits import MAX_EPISODE_STEPS
from kv_cache_env.llm.model_output import one_line

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
    "--price-cached": (0, 1e6),
    "--price-write": (0, 1e6),
}
"""Inclusive ranges of the numeric options (documented in the README)."""


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

    try:
        raw = json.loads(text, parse_constant=no_constants)
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
            message = scrub(one_line(f"{type(error).__name__}: {error}", 300))
            typer.echo(
                f"error: unexpected {message} (a bug; rerun with --debug for the traceback)",
                err=True,
            )
            raise typer.Exit(1) from None
