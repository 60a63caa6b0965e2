"""The conversation-context family's evaluation layer (all I/O): `commands` parses
`kvarena context-eval`'s options and `eval_run` runs it; `run` plays one episode with a
baseline or an LLM agent and a reader; `sizing` measures the live load and novelty; `validate`
holds the family's checks for `kvarena validate`. The policies it plays (baselines, the
signal-reading reference, the attacks, the keyless text agent) live in
`kv_context_env.policies`; the generator, episode, readers and agent loop in `kv_context_env`;
the rubric in `rubrics.context`. (`policies` and `text_agent` here are deprecated re-exports.)
"""
