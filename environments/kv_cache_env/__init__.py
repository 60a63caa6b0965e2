"""kv-cache-env: an environment in which an agent manages the KV-cache of a simulated LLM server.

- `sim/`: the simulator (pure, deterministic);
- `policies/`: the built-in policies, pure functions of an observation (and the planners);
- `llm/`: the model boundary (prompt, tools, valid calls, the agent loop; the chat-model client
  itself is `model_client`);
- `rl/`: observation features, the Gymnasium env and its vector env;
- `traces/`: the public traces and their replay as simulator schedules;
- `taskset.py`, `episodes.py`: the verifiers taskset and what identifies one episode.

The taskset is exported lazily: importing verifiers takes seconds, and nothing else in the
project needs it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KvCacheEnv", "KvCacheHarness", "KvCacheTaskset"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import taskset

        return getattr(taskset, name)
    raise AttributeError(f"module 'kv_cache_env' has no attribute {name!r}")
