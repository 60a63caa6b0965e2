"""The table of `kvarena cache-replay`: prices recorded transcripts under the five breakpoint
strategies and prints one table (or JSON). The command's options are `commands`."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from ..common.columns import Column, fit_table
from .provider import Prices
from .replay import TranscriptError, find_transcripts, load_transcript, replay
from .strategies import DESCRIPTIONS
from .tiers import TierConfig

console = Console()


def run_cache_replay(
    transcripts: list[Path],
    *,
    price_in: float,
    price_cached: float,
    price_write: float,
    cache_min_tokens: int = 1024,
    cache_buffer_multiplier: float = 1.5,
    as_json: bool = False,
) -> None:
    """Load, replay and print; exits 2 on transcripts that cannot be read."""
    try:
        loaded = [load_transcript(path) for path in find_transcripts(transcripts)]
    except TranscriptError as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    prices = Prices(price_in, price_cached, price_write)
    config = TierConfig(cache_min_tokens, cache_buffer_multiplier)
    rows = replay(loaded, prices, config=config)
    baseline = rows[0].cost
    if as_json:
        payload = {
            "transcripts": len(loaded),
            "prices": {"input": price_in, "cached": price_cached, "write": price_write},
            "cache_min_tokens": cache_min_tokens,
            "strategies": [
                {
                    **row.as_dict(),
                    "cost_vs_none": round(row.cost / baseline, 4) if baseline else None,
                }
                for row in rows
            ],
        }
        print(json.dumps(payload, indent=2))
        return
    columns = [
        Column("strategy", justify="left"),
        Column("input tokens", drop=4),
        Column("cached", drop=2),
        Column("written", drop=3),
        Column("breakpoints/req", drop=6),
        Column("honoured/req", drop=5),
        Column("cost $"),
        Column("vs none"),
    ]
    cells = [
        [
            DESCRIPTIONS[row.strategy],
            f"{row.input_tokens:,}",
            f"{row.cached_fraction:.1%}",
            f"{row.written / max(1, row.input_tokens):.1%}",
            f"{row.breakpoints / max(1, row.requests):.2f}",
            f"{row.honoured / max(1, row.requests):.2f}",
            f"{row.cost:.4f}",
            f"{row.cost / baseline:.3f}" if baseline else "-",
        ]
        for row in rows
    ]
    title = (
        f"cache replay: {len(loaded)} transcripts, {rows[0].requests} requests "
        f"(${price_in}/${price_cached}/${price_write} per M in/cached/write)"
    )
    fit_table(columns, cells, title=title).print()
