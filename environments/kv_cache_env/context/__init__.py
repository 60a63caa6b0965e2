"""The conversation-context family (seeds 000 + 001): which blocks of one long chat stay in the
KV-cache, what is archived when they go, and whether a reader can still answer.

Modules: `types` (shared vocabulary), `tokenizer`, `conversation` (the deterministic generator
and answer key), `wording` (how facts and filler are said), `cache` (the block cache and its
prioritized-LRU fallback), `tracker` (removed-block events → messages), `archive` (SQLite turn
store with FTS5 recall), readers (`extractive`, `hf_reader`), `values` (the answer value
check), `scoring` (ROUGE-L, a metric).
"""
