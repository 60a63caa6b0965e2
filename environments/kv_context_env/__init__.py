"""kv-context-env: the conversation-context family as a verifiers taskset (seeds 000 + 001).

A second taskset id beside `kv-cache-env`: verifiers imports a taskset id as a module whose
`__all__` exports exactly one Taskset, so each family has its own module. The code lives in
`kv_cache_env.context`; this module only exports the taskset, its harness and env.
"""

from __future__ import annotations

from .taskset import KvContextEnv, KvContextHarness, KvContextTaskset

__all__ = ["KvContextEnv", "KvContextHarness", "KvContextTaskset"]
