"""The evaluation layer: the `kvarena` CLI and everything with I/O, one folder per family.

- `cli` is the Typer app and its command registration only; each command's body lives with its
  family (`serving.command`, `context.command`, `prompt_cache.command`, ...).
- `serving/`: the serving family (built-in policies, episode runner, model evals, validate,
  bench);
- `context/`: the conversation-context family;
- `prompt_cache/`: provider prompt caching (seed 002);
- `common/`: what the families share (results schema, run directories, statistics, input
  checks, the policy server, the local model, fault injection);
- `report`: the leaderboard report over every family's results.

The environments (`kv_cache_env`, `kv_context_env`) never import this package.
"""
