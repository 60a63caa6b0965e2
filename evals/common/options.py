"""Command-line options more than one family's commands take, with one help text each."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

RUN_PANEL = "What to run"
MODEL_PANEL = "Model endpoint (with --model)"
OUTPUT_PANEL = "Output and execution"

Constrain = Annotated[
    bool,
    typer.Option(
        help="local: models: replies to the tools are tool calls by constrained decoding "
        "(--no-constrain: free text, as llama.cpp's chatml-function-calling gives it).",
        rich_help_panel=MODEL_PANEL,
    ),
]
Episodes = Annotated[
    int,
    typer.Option(
        "--episodes",
        "-n",
        min=1,
        metavar="N",
        help="Episodes per scenario (per level for context-eval); episode i uses seed + i.",
        rich_help_panel=RUN_PANEL,
    ),
]
Out = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        metavar="DIR",
        help="Output directory (default: runs/<command>-<time>).",
        rich_help_panel=OUTPUT_PANEL,
    ),
]
Wide = Annotated[
    bool,
    typer.Option(
        help="Result tables with every column, however wide (by default the columns the "
        "terminal cannot hold are left out, and named).",
        rich_help_panel=OUTPUT_PANEL,
    ),
]
Workers = Annotated[
    int,
    typer.Option(
        "--workers",
        "-j",
        min=1,
        metavar="N",
        help="Worker processes for built-in policies (default: one per core).",
        rich_help_panel=OUTPUT_PANEL,
    ),
]
CPUS = os.cpu_count() or 1
"""`--workers`' default: every core."""
