"""The conversation-context family played by a chat model through tool calls: the tool schemas,
the observation text, and the turn loop shared by hosted-model evals and the verifiers taskset.

Each turn the model sees the cache (which messages are resident, partly evicted or gone, their
role, blocks and text; never the generator's `kind`, which would mark the facts) and the
message that just arrived; it may call `evict_blocks`, `evict_message`,
`recall` and `noop`, several per reply; then the episode steps. When the new message is a
planted question, the reader (by default the same model, in a separate tool-free call) answers
it from the visible context before the step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kv_context_env.sim.episode import ActionError, ContextEpisode, ContextObservation
from model_client.model_output import ToolCall, arguments_text, echo, one_line, parse_arguments
from model_client.reply import ChatFn, TokenUsage, Transcript, assistant_message

Message = dict[str, Any]
AsyncReader = Callable[[str, str], Awaitable[str]]
"""(visible context text, question) -> answer."""

PREVIEW_CHARS = 90
READER_SYSTEM = (
    "You answer questions about an earlier conversation. Use only the conversation shown; "
    "parts marked […] are no longer available. Answer in one short sentence."
)


def reader_messages(context: str, question: str) -> list[Message]:
    """The tool-free request a chat-model reader answers (reader (a))."""
    return [
        {"role": "system", "content": READER_SYSTEM},
        {"role": "user", "content": f"Conversation:\n{context}\n\nQuestion: {question}"},
    ]


CONTEXT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "evict_blocks",
            "description": "Evict KV blocks by absolute index (16 tokens each). Evicted blocks "
            "are gone for good; complete user/assistant turns they held are archived.",
            "parameters": {
                "type": "object",
                "properties": {
                    "blocks": {"type": "array", "items": {"type": "integer", "minimum": 0}}
                },
                "required": ["blocks"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "evict_message",
            "description": "Evict every block of one message (except the newest block).",
            "parameters": {
                "type": "object",
                "properties": {"index": {"type": "integer", "minimum": 0}},
                "required": ["index"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "recall",
            "description": "Search the archive of evicted turns and append the best match to "
            "the context as new blocks (costs memory and latency).",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "noop",
            "description": "Do nothing this turn.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
]
_SCHEMAS: dict[str, dict[str, Any]] = {
    tool["function"]["name"]: tool["function"]["parameters"] for tool in CONTEXT_TOOLS
}


def context_system_prompt(max_blocks: int) -> str:
    return (
        "You manage the KV-cache of one long conversation between a user and an assistant. "
        f"The cache holds at most {max_blocks} blocks of 16 tokens; each turn a new message "
        "arrives and takes new blocks. Before the engine runs you may evict blocks or whole "
        "messages, or recall archived turns. If more than the budget is still active after "
        "your calls, the engine evicts the oldest blocks itself (an out-of-memory event, "
        "penalised), keeping the system prompt longest. Later the user asks questions about "
        "facts mentioned earlier (codes, names, dates, ...); they are answered only from what "
        "is still cached. Personal details come up in passing anywhere (chat, tool output, "
        "reasoning), most are never asked about, and the budget cannot hold them all: keep "
        "the blocks that matter and evict the rest. Evicted complete turns (with their tool "
        "output) are archived and can be recalled by query. "
        "Reply with tool calls only."
    )


def render_context_blocks(obs: ContextObservation) -> list[str]:
    """The observation as content blocks, stable first: the legend, one block per listed
    message before the new one (a block changes only when its message is evicted, partly
    evicted or recalled), then one volatile block with the new message, the count of fully
    evicted messages and the per-turn header. Each block ends with a newline, so the blocks
    joined are the observation text. A provider prompt cache can then keep the stable blocks
    from one turn to the next (`evals.prompt_cache`)."""
    blocks = ["Messages (index role blocks state: text):\n"]
    volatile: list[str] = []
    for view in obs.messages:
        if view.state == "evicted":
            continue
        text = " ".join(view.text.split())
        if view.index != obs.new_message and len(text) > PREVIEW_CHARS:
            text = text[: PREVIEW_CHARS - 1] + "…"
        marker = " <- new" if view.index == obs.new_message else ""
        line = (
            f"#{view.index} {view.role} b{view.first_block}-{view.last_block} "
            f"{view.state}{marker}: {text}\n"
        )
        (volatile if view.index == obs.new_message else blocks).append(line)
    gone = sum(1 for v in obs.messages if v.state == "evicted")
    if gone:
        volatile.append(f"({gone} message(s) fully evicted, not shown)\n")
    volatile.append(
        f"Turn {obs.turn + 1}/{obs.turns}. Active blocks {obs.active_blocks}/{obs.max_blocks} "
        f"(newest block {obs.tail_block} cannot be evicted). Archived turns: "
        f"{obs.archived_turns}.\n"
    )
    blocks.append("".join(volatile))
    return blocks


def render_context(obs: ContextObservation) -> str:
    """The observation as one text (its content blocks joined)."""
    return "".join(render_context_blocks(obs))


def observation_message(obs: ContextObservation) -> Message:
    """The user message of one turn: the observation's content blocks as text parts."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": block} for block in render_context_blocks(obs)],
    }


def call_context_tool(episode: ContextEpisode, call: ToolCall) -> str:
    """Apply one tool call; every error comes back as one line of text, counts as an invalid
    action and changes nothing. Never raises on model input (see
    `model_client.model_output`)."""
    if call.problem is not None:
        for _ in range(call.invalid_count):
            episode.count_invalid()
        return one_line(f"error: {call.problem}")
    schema = _SCHEMAS.get(call.name) if isinstance(call.name, str) else None
    if schema is None:
        episode.count_invalid()
        return one_line(f"error: unknown tool {echo(call.name, 40)}; tools: {', '.join(_SCHEMAS)}")
    text = arguments_text(call.arguments)
    arguments = (
        parse_arguments(call.name, text, schema)
        if text is not None
        else f"{call.name}: arguments are not serialisable JSON"
    )
    if isinstance(arguments, str):
        episode.count_invalid()
        return one_line(f"error: {arguments}")
    try:
        if call.name == "evict_blocks":
            return episode.evict_blocks(arguments["blocks"])
        if call.name == "evict_message":
            return episode.evict_message(arguments["index"])
        if call.name == "recall":
            return episode.recall(arguments["query"])
        return "ok"
    except ActionError as error:  # already counted by the episode
        return one_line(f"error: {error}")


async def play_context_episode(
    episode: ContextEpisode,
    chat: ChatFn,
    reader: AsyncReader,
    *,
    history_turns: int | None = 0,
) -> Transcript:
    """Play `episode` to its end; `reader` answers the planted questions."""
    system: Message = {"role": "system", "content": context_system_prompt(episode.max_blocks)}
    turns: list[list[Message]] = []
    usage = TokenUsage()
    while not episode.done:
        user = observation_message(episode.observe())
        window = turns if history_turns is None else turns[max(0, len(turns) - history_turns) :]
        reply = await chat([system, *(m for t in window for m in t), user], CONTEXT_TOOLS)
        usage.add(reply.usage)
        assistant, calls = assistant_message(reply, episode.turn)
        results = [
            {"role": "tool", "tool_call_id": c.id, "content": call_context_tool(episode, c)}
            for c in calls
        ]
        episode.enforce()
        question = episode.pending_question
        answer = await reader(episode.visible_text(), question.text) if question else None
        episode.step(answer=answer)
        turns.append([user, assistant, *results])
    return Transcript([system, *(m for t in turns for m in t)], usage, len(turns))
