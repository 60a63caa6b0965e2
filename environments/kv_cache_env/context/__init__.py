"""Deprecated import path of the conversation-context family, which now lives in
`kv_context_env` (`generator/`, `sim/`, `readers/`, `llm/`). Importing it warns
(`DeprecationWarning`) and makes every old submodule name (`kv_cache_env.context.plan`, ...)
the moved module itself, so old imports keep working until they are updated.
"""

from __future__ import annotations

import importlib
import sys
import warnings

from kv_context_env import CONTEXT_SUITE_VERSION

warnings.warn(
    "kv_cache_env.context is deprecated: the context family moved to kv_context_env "
    "(kv_context_env.generator, .sim, .readers, .llm)",
    DeprecationWarning,
    stacklevel=2,
)

MOVED: dict[str, str] = {
    "types": "kv_context_env.vocabulary",
    "tokenizer": "kv_context_env.tokenizer",
    **{
        name: f"kv_context_env.generator.{name}"
        for name in (
            "conversation",
            "levels",
            "lexicon",
            "load",
            "plan",
            "signal_text",
            "valuegen",
            "wording",
        )
    },
    **{
        name: f"kv_context_env.sim.{name}"
        for name in ("archive", "cache", "episode", "scoring", "tracker", "values")
    },
    **{
        name: f"kv_context_env.readers.{name}"
        for name in ("extractive", "gguf_import", "hf_reader")
    },
    "agent": "kv_context_env.llm.agent",
}
"""Old submodule name → the module it is now (`readers` is a module of its own here: its
names were split between `readers.extractive` and `llm.chat_reader`)."""

for _name, _target in MOVED.items():
    _module = importlib.import_module(_target)
    sys.modules[f"{__name__}.{_name}"] = _module
    globals()[_name] = _module

__all__ = ["CONTEXT_SUITE_VERSION", *MOVED]
