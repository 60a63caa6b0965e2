"""The conversation-context family's evaluation layer: which blocks of one long chat stay
cached. `commands` parses `kvarena context-eval`'s options and `eval_run` runs it; `run` plays
one episode with a baseline or an LLM agent and a reader, `policies` holds the baselines,
`keeping` the mechanics policies share, `extraction` (template parser, ground-truth list),
`probe` (the learned probe), `signal_reader` (the reference) and `template_signals` (an
earlier generator's phrase-list reader, an attack) what `validate` plays,
`sizing` the live load and novelty, `text_agent` the keyless text agent the policy server
speaks, `validate` the family's checks for `kvarena validate`. The
simulator, readers and agent loop live in `kv_context_env`, the rubric in
`rubrics.context`.
"""
