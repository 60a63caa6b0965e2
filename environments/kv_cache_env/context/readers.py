"""Deprecated: `Reader` and `extractive_reader` are in `kv_context_env.readers.extractive`,
`ChatReader` in `kv_context_env.llm.chat_reader` (the package's import warns)."""

from __future__ import annotations

from kv_context_env.llm.chat_reader import ChatReader
from kv_context_env.readers.extractive import Reader, extractive_reader

__all__ = ["ChatReader", "Reader", "extractive_reader"]
