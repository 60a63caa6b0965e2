"""`kvarena traces`: the figures of each built-in trace, from the packaged file itself (loaded and
counted, never a hard-coded figure)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kv_cache_env.traces import load_trace
from kv_cache_env.traces.trace_data import BUILTIN_TRACES


def builtin_traces(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Per built-in trace (every one, or those of `names`): its name, requests, duration in
    seconds, prefix-block size in tokens (None: the trace has no prefix blocks), source and
    licence."""
    wanted = list(BUILTIN_TRACES) if names is None else list(names)
    found = []
    for name in wanted:
        info = BUILTIN_TRACES[name]
        trace = load_trace(name)
        found.append(
            {
                "name": name,
                "requests": len(trace.requests),
                "duration_s": round(trace.duration_s, 3),
                "block_tokens": trace.block_tokens or None,
                "source": info.source,
                "licence": info.licence,
            }
        )
    return found


def builtin_trace_rows(
    names: Iterable[str] | None = None,
) -> list[tuple[str, str, str, str, str, str]]:
    """(name, requests, duration, prefix-block size, source, licence) per built-in trace, as
    the table shows them."""
    return [
        (
            t["name"],
            f"{t['requests']:,}",
            f"{t['duration_s']:,.0f} s",
            f"{t['block_tokens']} tokens" if t["block_tokens"] else "none",
            t["source"],
            t["licence"],
        )
        for t in builtin_traces(names)
    ]
