"""Readers of the context family: who answers a planted question from what the cache still
holds. `extractive` is deterministic and keyless (the leaderboard's default); `hf_reader` is a
local Hugging Face model over the full history with evicted blocks masked, `gguf_import` makes
one from a GGUF file. The chat-model reader is in `kv_context_env.llm`.
"""
