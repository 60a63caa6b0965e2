"""What every family's evaluation shares: the results schema and its checks (`results`,
`result_check`), run directories with resume (`run_dir`), confidence intervals (`stats`), input
checks and error reporting (`edge`), the terminal (`console`), the options several commands
share (`options`), the OpenAI-compatible policy server that needs no key (`policy_server`) and
its fault injection (`faults`), the local GGUF model server (`local_model`,
`local_tool_calls`), and the `serve-policy` / `serve-model` commands (`commands`)."""
