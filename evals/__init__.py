"""The evaluation layer: the `kvarena` CLI and everything with I/O, one folder per family.

- `cli` is the Typer app and its command registration only; each command's body lives with its
  family (`serving.command`, `context.command`, `prompt_cache.command`, ...).
- `serving/`: the serving family (built-in policies, episode runner, model evals, validate,
  bench);
- `context/`: the conversation-context family;
- `prompt_cache/`: provider prompt caching (the tier design);
- `common/`: what the families share (results schema, run directories, statistics, input
  checks, the policy server, the local model, fault injection);
- `report`: the leaderboard report over every family's results.

The environments (`kv_cache_env`, `kv_context_env`) never import this package.

One setting for every process of this layer, made here because it must come before anything
imports numpy: OpenBLAS runs one thread per core, and they spin (here 65 ms of CPU at numpy's
import and more after, a tenth of a whole Mooncake replay's CPU) although nothing in this layer
does linear algebra worth a thread, and `-j` already runs a process per core. A value the user
set wins.
"""

import os

USER_BLAS_THREADS = os.environ.get("OPENBLAS_NUM_THREADS")
"""The user's own setting (None: unset), for `bench` to hand its probes the user's environment."""
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
