"""Command-line options more than one family's commands take, with one help text each."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

Constrain = Annotated[
    bool,
    typer.Option(
        help="local: models: replies to the tools are tool calls by constrained decoding "
        "(--no-constrain: free text, as llama.cpp's chatml-function-calling gives it)."
    ),
]
Episodes = Annotated[int, typer.Option("--episodes", "-n", min=1)]
Out = Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")]
Workers = Annotated[int, typer.Option("--workers", "-j", min=1)]
CPUS = os.cpu_count() or 1
"""`--workers`' default: every core."""
