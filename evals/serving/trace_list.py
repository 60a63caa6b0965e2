"""`kvarena traces`: one table row per built-in trace, from the packaged file itself (loaded and
counted, never a hard-coded figure)."""

from __future__ import annotations

from kv_cache_env.traces import load_trace
from kv_cache_env.traces.trace_data import BUILTIN_TRACES


def builtin_trace_rows() -> list[tuple[str, str, str, str, str, str]]:
    """(name, requests, duration, prefix-block size, source, licence) per built-in trace."""
    rows = []
    for name, info in BUILTIN_TRACES.items():
        trace = load_trace(name)
        blocks = f"{trace.block_tokens} tokens" if trace.block_tokens else "none"
        rows.append(
            (
                name,
                f"{len(trace.requests):,}",
                f"{trace.duration_s:,.0f} s",
                blocks,
                info.source,
                info.licence,
            )
        )
    return rows
