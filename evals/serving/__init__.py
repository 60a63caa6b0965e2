"""The serving family's evaluation layer (`kvarena eval`, `validate --family serving`,
`bench`): the episode runner (`runner`, `jobs`),
hosted and local model episodes (`model_eval`), normalization against noop and the bound
(`normalize`), summary tables (`summary`), the benchmark's checks (`validate`), the trace
listing (`trace_list`), engine benchmarks (`bench`, `speed`, `speed_probe`) and the learned
policy's trainer (`learning`). The simulator is `kv_cache_env.sim`, the built-in policies and
the bound `kv_cache_env.policies`, the rubric `rubrics`."""
