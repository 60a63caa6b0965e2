"""The context family's built-in policies: pure functions of a live `ContextEpisode` (or, for
the text agent, of the observation text), with no I/O.

- `baselines`: `noop`, `trt-lru`, `sliding-window`, `sink-recent`, `window-recall`, the
  clairvoyant `oracle`, and their registry (`get_context_policy`).
- `keeping`: what the policies share (where a sentence sits in the cache now, keep-within-budget).
- `signal_reader`: the signal-reading reference (reads only what arrives).
- `extraction` (a template parser of the generator's forms), `template_signals` (an earlier
  generator's phrase-list reader) and `probe` (a learned "will this be asked?" probe): the
  attacks `kvarena validate` plays against the reference.
- `text_agent`: the keyless text agent behind the policy server's context model.
"""
