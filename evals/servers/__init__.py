"""The keyless servers: a built-in policy behind an OpenAI-compatible (and Anthropic-shaped)
HTTP endpoint (`policy_server`, with fault injection from `faults`), a local GGUF model served by
llama.cpp (`local_model` starts the `local_engine` process) with constrained tool calls
(`local_tool_calls`), the bounded HTTP front all use (`http_guard`), and their commands
(`serve-policy`, `serve-model`). A family's eval starts them to stand in for a hosted model;
they know no family's results."""
