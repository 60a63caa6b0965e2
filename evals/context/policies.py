"""Deprecated: the context family's baseline policies are `kv_context_env.policies.baselines`
(the other policies, the reference and the attacks are beside it in `kv_context_env.policies`).
Importing this module warns (`DeprecationWarning`) and re-exports the baselines."""

from __future__ import annotations

import warnings

from kv_context_env.policies.baselines import (
    CONTEXT_POLICIES,
    SINK_BLOCKS,
    ContextPolicy,
    get_context_policy,
    noop,
    oracle,
    sink_recent,
    sliding_window,
    trt_lru,
    window_recall,
)

warnings.warn(
    "evals.context.policies is deprecated: use kv_context_env.policies.baselines",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "CONTEXT_POLICIES",
    "SINK_BLOCKS",
    "ContextPolicy",
    "get_context_policy",
    "noop",
    "oracle",
    "sink_recent",
    "sliding_window",
    "trt_lru",
    "window_recall",
]
