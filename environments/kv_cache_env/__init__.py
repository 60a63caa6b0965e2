"""kv-cache-env: an environment in which an agent manages the KV-cache of a simulated LLM server.

`kv_cache_env.sim` is the simulator (pure). The verifiers taskset (`taskset.py`) is exported
lazily: importing verifiers takes seconds, and nothing else in the project needs it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KvCacheEnv", "KvCacheHarness", "KvCacheTaskset"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import taskset

        return getattr(taskset, name)
    raise AttributeError(f"module 'kv_cache_env' has no attribute {name!r}")
