"""The chat-model client both families use, below both: it knows chat messages and tool calls,
never a simulator.

- `reply`: a model's reply and token usage, the chat function's type, the assistant message a
  reply leaves in the conversation, a finished conversation (`Transcript`);
- `model_output`: what the model wrote (wire-format tool calls, raw arguments) -> checked calls;
- `provider_responses`: what the provider sent (a raw HTTP 200 body) -> a reply, or an error;
- `openai_chat`: the chat function over the official `openai` client.
"""
