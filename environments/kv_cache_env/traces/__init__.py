"""Serving traces: the public traces shipped as package data (`trace_data`), the readers that
turn a trace file into requests (`replay`: Mooncake JSONL, Azure CSV) and the replay of those
requests as a simulator schedule. The replay API is re-exported here."""

from __future__ import annotations

from .replay import (
    MOONCAKE_BLOCK_TOKENS,
    TRACE_SESSION_MAX_PAUSE_S,
    Trace,
    TraceError,
    TraceRequest,
    infinite_cache_hit_fraction,
    load_azure,
    load_mooncake,
    load_trace,
    trace_scenario,
    trace_schedule,
    trace_sessions,
)

__all__ = [
    "MOONCAKE_BLOCK_TOKENS",
    "TRACE_SESSION_MAX_PAUSE_S",
    "Trace",
    "TraceError",
    "TraceRequest",
    "infinite_cache_hit_fraction",
    "load_azure",
    "load_mooncake",
    "load_trace",
    "trace_scenario",
    "trace_schedule",
    "trace_sessions",
]
