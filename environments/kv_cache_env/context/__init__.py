"""The conversation-context family: which blocks of one long chat stay in the
KV-cache, what is archived when they go, and whether a reader can still answer.

Modules: `types` (shared vocabulary), `tokenizer`, `conversation` (the deterministic generator
and answer key), `plan` (subjects, facts, asks, updates and signals), `lexicon` (the vocabulary,
package data in `data/lexicon.json`), `valuegen` (values), `wording` (how facts, questions and
filler are said), `signal_text` (how signals of need are composed), `load` (the live load and
its per-episode floor), `cache` (the block cache and its
prioritized-LRU fallback), `tracker` (removed-block events → messages), `archive` (SQLite turn
store with FTS5 recall), readers (`extractive`, `hf_reader`), `values` (the answer value
check), `scoring` (ROUGE-L, a metric).
"""

CONTEXT_SUITE_VERSION = "3"
"""Version of the family's episodes and scoring, written into every result (`suite_version`):
scores of two versions are not comparable. 2.1: recall priced by the latency of what it brings
back, archive ranked by the query alone. 3: open statements from the lexicon (subjects,
properties and values from open pools, said in user, assistant, tool and reasoning turns;
questions in paraphrase, asked again, after updates), a live load larger than the budget,
signals of need; no memory-saving term, OOM weight 0.05."""
