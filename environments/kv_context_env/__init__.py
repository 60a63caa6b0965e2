"""kv-context-env: the conversation-context family (which blocks of one long chat stay in the
KV-cache, what is archived when they go, and whether a reader can still answer), with its
verifiers taskset.

- `vocabulary` (the shared data types) and `tokenizer` (what a token is) sit at the top: every
  layer speaks them.
- `generator/`: the deterministic long-conversation generator and its answer key.
- `sim/`: one episode: the block cache, the tracker, the SQLite archive, the answer check.
- `readers/`: who answers a question from what stays cached (extractive, Hugging Face).
- `llm/`: the chat-model boundary: the tool-calling agent loop and the chat-model reader.
- `taskset.py`: the `kv-context-env` verifiers taskset.

A second taskset id beside `kv-cache-env`: verifiers imports a taskset id as a module whose
`__all__` exports exactly one Taskset, so each family has its own module. The taskset is
exported lazily: importing verifiers takes seconds, and nothing below it needs it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KvContextEnv", "KvContextHarness", "KvContextTaskset"]

CONTEXT_SUITE_VERSION = "4"
"""Version of the family's episodes and scoring, written into every result (`suite_version`):
scores of two versions are not comparable. 2.1: recall priced by the latency of what it brings
back, archive ranked by the query alone. 3: open statements from the lexicon (subjects,
properties and values from open pools, said in user, assistant, tool and reasoning turns;
questions in paraphrase, asked again, after updates), a live load larger than the budget,
signals of need; no memory-saving term, OOM weight 0.05. 4: no structural tells — days of
varying length whose parts are said, not counted; `soon` asks a few turns on; first signals
before or after their statement, for needs and asides alike; closures of subjects whose asks
are over; values that change with no ask to come; a repeated ask's "again" sentence and small
talk on either side of the question."""


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import taskset

        return getattr(taskset, name)
    raise AttributeError(f"module 'kv_context_env' has no attribute {name!r}")
