"""`kvarena cache-replay`: option parsing; the replay and its table are `replay_table`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def cache_replay_command(
    transcripts: Annotated[
        list[Path],
        typer.Argument(
            metavar="TRANSCRIPTS...",
            help="Transcript files or directories (a run directory of 'kvarena eval --model' "
            "or 'kvarena context-eval --model').",
        ),
    ],
    price_in: Annotated[
        float,
        typer.Option(min=0, metavar="PRICE", help="Price of uncached input, $ per million tokens."),
    ],
    price_cached: Annotated[
        float,
        typer.Option(
            min=0, metavar="PRICE", help="Price of input read from the cache, $ per M tokens."
        ),
    ],
    price_write: Annotated[
        float,
        typer.Option(
            min=0, metavar="PRICE", help="Price of input written to the cache, $ per M tokens."
        ),
    ],
    cache_min_tokens: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="TOKENS",
            help="Provider minimum for a cacheable prefix (cacheMinTokens). Default: that of "
            "--for-model, else 1024.",
        ),
    ] = None,
    for_model: Annotated[
        str | None,
        typer.Option(
            metavar="MODEL",
            help="Price for this provider model's minimum prefix (e.g. claude-opus-4-5).",
        ),
    ] = None,
    cache_buffer_multiplier: Annotated[
        float,
        typer.Option(
            min=1, metavar="X", help="Safety margin on the minimum (cacheBufferMultiplier)."
        ),
    ] = 1.5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Replay eval transcripts under five prompt-cache breakpoint strategies and compare costs:
    none, system (after the system prompt), rolling (on the last message), tiers (the stability
    tiers) and hybrid (tiers plus a rolling breakpoint; the hosted client's default)."""
    from ..common.console import status_line

    status_line("cache-replay: reading the transcripts")
    from ..common.edge import check_options, check_path
    from .minimums import min_cacheable_tokens
    from .replay_table import run_cache_replay

    limits = {"--price-in": price_in, "--price-cached": price_cached, "--price-write": price_write}
    limits |= {"--cache-min-tokens": cache_min_tokens}
    check_options(limits | {"--cache-buffer-multiplier": cache_buffer_multiplier})
    for transcript in transcripts:
        check_path(transcript, "TRANSCRIPTS")
    if cache_min_tokens is None:
        cache_min_tokens = min_cacheable_tokens(for_model)
    run_cache_replay(
        transcripts,
        price_in=price_in,
        price_cached=price_cached,
        price_write=price_write,
        cache_min_tokens=cache_min_tokens,
        cache_buffer_multiplier=cache_buffer_multiplier,
        as_json=as_json,
    )
