"""The model boundary of the serving family: everything between a chat model and the simulator
(the chat-model client itself, which both families share, is `model_client`).

- `prompt`: the system prompt and the per-turn user message the model reads;
- `tools`: the tools' JSON schemas and the dispatcher from one tool call to a simulator action;
- `valid_calls`: which calls the simulator accepts on an observation (for constrained decoding);
- `agent_loop`: one episode played by a chat model, one reply per simulator step.
"""
