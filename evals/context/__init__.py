"""The conversation-context family's evaluation layer (seeds 000 + 001): which blocks of one
long chat stay cached. `commands` parses `kvarena context-eval`'s options and `eval_run` runs
it; `run` plays one episode with a baseline or an LLM agent and a reader, `policies` holds the
baselines, `oneliners` the simplest rules tried against the benchmark, `text_agent` the keyless
text agent the policy server speaks, `validate` the family's checks for `kvarena validate`. The
simulator, readers and agent loop live in `kv_cache_env.context`, the rubric in
`rubrics.context`.
"""
