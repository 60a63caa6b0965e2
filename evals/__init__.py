"""Evals: policies, the `kvarena` CLI and the results schema. All I/O lives here."""
