"""Deprecated: the keyless text agent of the context family is
`kv_context_env.policies.text_agent`. Importing this module warns (`DeprecationWarning`) and
re-exports it."""

from __future__ import annotations

import warnings

from kv_context_env.policies.text_agent import (
    RECALL_MARGIN_BLOCKS,
    Row,
    context_text_answer,
    context_text_calls,
    parse_rows,
)

warnings.warn(
    "evals.context.text_agent is deprecated: use kv_context_env.policies.text_agent",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["RECALL_MARGIN_BLOCKS", "Row", "context_text_answer", "context_text_calls", "parse_rows"]
