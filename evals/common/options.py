"""Command-line options more than one family's commands take, with one help text each (the
model client's `--timeout` and `--max-retries`: `eval` and `context-eval` alike)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from .backends import ADDRESS_HELP, BACKEND_HELP

RUN_PANEL = "What to run"
MODEL_PANEL = "Model endpoint (with --model)"
OUTPUT_PANEL = "Output and execution"

Constrain = Annotated[
    bool,
    typer.Option(
        help="local: models: replies to the tools are tool calls by constrained decoding "
        "(--no-constrain: llama.cpp's own chat completion under the model's chat template).",
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
BackendKind = Annotated[
    str,
    typer.Option(
        "--backend",
        metavar="local|ray",
        help=BACKEND_HELP,
        rich_help_panel=OUTPUT_PANEL,
    ),
]
RayAddress = Annotated[
    str | None,
    typer.Option(
        "--address",
        metavar="ADDRESS",
        help=ADDRESS_HELP,
        rich_help_panel=OUTPUT_PANEL,
    ),
]
Timeout = Annotated[
    float,
    typer.Option(
        min=1,
        metavar="SECONDS",
        help="Seconds per model call: one deadline per attempt, the whole answer included.",
        rich_help_panel=MODEL_PANEL,
    ),
]
MaxRetries = Annotated[
    int,
    typer.Option(min=0, metavar="N", help="Retries per model call.", rich_help_panel=MODEL_PANEL),
]
Resume = Annotated[
    bool,
    typer.Option(
        help="Keep the ok episodes already in --out and run the rest.",
        rich_help_panel=OUTPUT_PANEL,
    ),
]
Force = Annotated[
    bool,
    typer.Option(
        help="Move results already in --out aside and start fresh.",
        rich_help_panel=OUTPUT_PANEL,
    ),
]
DEFAULT_TIMEOUT_S = 120.0
"""`--timeout`'s default."""
DEFAULT_MAX_RETRIES = 4
"""`--max-retries`' default."""
CPUS = os.cpu_count() or 1
"""`--workers`' default: every core."""
