"""The serving family's evaluation layer (`kvarena eval`, `validate --family serving`,
`bench`): the episode runner (`runner`, `jobs`),
hosted and local model episodes (`model_eval`), normalization against noop and the bound
(`normalize`), summary tables (`summary`), the benchmark's checks (`validate`), the trace
listing (`trace_list`), engine benchmarks (`bench`, `speed`, `speed_probe`) and the learned
policy's trainer (`learning`). The simulator is `kv_cache_env.sim`, the built-in policies and
the bound `kv_cache_env.policies` (their old path here, `evals.serving.policies`, still imports,
with a `DeprecationWarning`), the rubric `rubrics`."""

from kv_cache_env.moved import keep_old_paths

OLD_PATHS = {
    "evals.serving.policies": "kv_cache_env.policies",
    "evals.serving.rule_grid": "kv_cache_env.policies.rule_grid",
}
"""The modules that moved to the serving environment: pure policy code."""

keep_old_paths(OLD_PATHS)
