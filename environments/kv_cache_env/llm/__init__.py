"""The model boundary: everything between a chat model and the simulator.

- `prompt`: the system prompt and the per-turn user message the model reads;
- `tools`: the tools' JSON schemas and the dispatcher from one tool call to a simulator action;
- `valid_calls`: which calls the simulator accepts on an observation (for constrained decoding);
- `model_output`: what the model wrote (wire-format tool calls, raw arguments) -> checked calls;
- `provider_responses`: what the provider sent (a raw HTTP 200 body) -> a reply, or an error;
- `openai_chat`: the chat function over the official `openai` client;
- `agent_loop`: one episode played by a chat model, one reply per simulator step.
"""
