"""One episode played by a chat model through tool calls: the loop shared by every LLM path
(the verifiers harness, hosted-model evals, the keyless policy server's clients).

One assistant reply is one step: all its tool calls are applied in order, their results are
returned as tool messages, the simulator advances one step, and the next observation is the
next user message. A reply with no tool call counts as noop; the episode never ends early.
The conversation sent to the model can be limited to the system prompt plus the last K turns
(`history_turns`); each observation is self-contained, so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..sim import Simulator, StepStats
from .model_output import ToolCall, clean_text
from .prompt import system_prompt, turn_message
from .tools import run_call, tool_schemas

Message = dict[str, Any]


@dataclass(slots=True)
class TokenUsage:
    input_tokens: int = 0
    """All prompt tokens, cached or not (OpenAI's `prompt_tokens`)."""
    cached_input_tokens: int = 0
    """Prompt tokens read from the provider's cache."""
    output_tokens: int = 0
    cache_write_input_tokens: int = 0
    """Prompt tokens written to the provider's cache (billed at the write price)."""

    def add(self, other: TokenUsage) -> None:
        self.input_tokens += other.input_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.output_tokens += other.output_tokens
        self.cache_write_input_tokens += other.cache_write_input_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_input_tokens": self.cache_write_input_tokens,
        }


@dataclass(frozen=True, slots=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: TokenUsage = field(default_factory=TokenUsage)


ChatFn = Callable[[list[Message], list[dict[str, Any]]], Awaitable[ModelReply]]
"""Send `messages` with `tools` to the model; return its reply."""


def assistant_message(reply: ModelReply, turn: int) -> tuple[Message, list[ToolCall]]:
    """The assistant message to keep in the conversation for `reply`, and its tool calls with
    ids filled in (`call_{turn}_{i}` where the model gave none or repeated one)."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for i, call in enumerate(reply.tool_calls):
        call_id = call.id if call.id and call.id not in seen else f"call_{turn}_{i}"
        seen.add(call_id)
        calls.append(ToolCall(call_id, call.name, call.arguments, call.problem, call.invalid_count))
    message: Message = {"role": "assistant", "content": clean_text(reply.content or "")}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    return message, calls


@dataclass
class Transcript:
    messages: list[Message]
    """The whole conversation: system prompt, then every turn's user/assistant/tool messages."""
    usage: TokenUsage
    turns: int


async def play_episode(
    sim: Simulator, chat: ChatFn, *, history_turns: int | None = None, hints: bool = True
) -> Transcript:
    """Play `sim` to its end with the model behind `chat`."""
    system: Message = {"role": "system", "content": system_prompt(sim.scenario)}
    turns: list[list[Message]] = []
    usage = TokenUsage()
    last_step: StepStats | None = None
    while not sim.done:
        user: Message = {
            "role": "user",
            "content": turn_message(sim.observe(hints=hints), last_step),
        }
        window = turns if history_turns is None else turns[max(0, len(turns) - history_turns) :]
        messages = [system, *(m for turn in window for m in turn), user]
        reply = await chat(messages, tool_schemas())
        usage.add(reply.usage)
        assistant, calls = assistant_message(reply, sim.turn)
        results = [
            {
                "role": "tool",
                "tool_call_id": call.id,
                "content": run_call(sim, call).message,
            }
            for call in calls
        ]
        last_step = sim.step()  # a reply without a tool call counts as noop
        turns.append([user, assistant, *results])
    return Transcript([system, *(m for turn in turns for m in turn)], usage, len(turns))
