"""The public serving traces shipped inside the package; how a `--trace` argument becomes a file.

Owns: the built-in trace names (`mooncake-conversation`, `azure-conv-2023`), their gzip-compressed
copies beside this file (licences and attribution in `README.md` here), `resolve_trace` (a built-in
name or a path -> the file to read) and `open_trace_text` (gzip read transparently). Parsing stays
in `kv_cache_env.traces`.

A built-in name wins over a file of the same name in the working directory; write `./name` to
replay such a file.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

DATA_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class BuiltinTrace:
    name: str
    """What `--trace` accepts."""
    file: str
    """The compressed copy in this package directory."""
    source: str
    """Where the data comes from (repository, path, commit)."""
    licence: str


BUILTIN_TRACES: dict[str, BuiltinTrace] = {
    t.name: t
    for t in (
        BuiltinTrace(
            name="mooncake-conversation",
            file="mooncake_conversation_trace.jsonl.gz",
            source="kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl @ 3b5a594",
            licence="Apache-2.0",
        ),
        BuiltinTrace(
            name="azure-conv-2023",
            file="azure_llm_2023_conv.csv.gz",
            source="Azure/AzurePublicDataset data/AzureLLMInferenceTrace_conv.csv @ b469a11",
            licence="CC-BY-4.0 (Patel et al., Splitwise, ISCA 2024)",
        ),
    )
}


def resolve_trace(name_or_path: str | Path) -> Path:
    """The file behind a `--trace` argument: a built-in name's packaged copy, else the path."""
    builtin = BUILTIN_TRACES.get(str(name_or_path))
    return DATA_DIR / builtin.file if builtin else Path(name_or_path)


def trace_format(path: str | Path) -> str:
    """The trace's format suffix (`.jsonl` or `.csv`, ignoring a trailing `.gz`)."""
    path = Path(path)
    return Path(path.stem).suffix if path.suffix == ".gz" else path.suffix


def open_trace_text(path: str | Path) -> TextIO:
    """Open a trace for reading as UTF-8 text, decompressing `.gz` files on the fly."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")
