"""One episode played by a chat model through tool calls: the loop shared by every LLM path
(the verifiers harness, hosted-model evals, the keyless policy server's clients).

One assistant reply is one step: all its tool calls are applied in order, their results are
returned as tool messages, the simulator advances one step, and the next observation is the
next user message. A reply with no tool call counts as noop; the episode never ends early.
The conversation sent to the model can be limited to the system prompt plus the last K turns
(`history_turns`); each observation is self-contained, so nothing is lost.
"""

from __future__ import annotations

from model_client.reply import ChatFn, Message, TokenUsage, Transcript, assistant_message

from ..sim import Simulator, StepStats
from .prompt import system_prompt, turn_message
from .tools import run_call, tool_schemas


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
