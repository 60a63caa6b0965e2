"""Turn the agent loop's OpenAI-format request plus a breakpoint plan into what an endpoint with
explicit prompt caching accepts: Anthropic's Messages API, or an OpenAI-compatible endpoint that
passes `cache_control` content parts through (OpenRouter and the like).

Breakpoints are part indices (`requests.part_positions`; 0 = the system prompt, and for
requests of string messages a part is a message); each one puts
`cache_control: {"type": "ephemeral"}` on the last content block of that part. A message whose
content is a list of text parts is sent as one text block per part.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from .requests import is_multipart, part_positions, part_text

Message = dict[str, Any]
EPHEMERAL = {"type": "ephemeral"}
EMPTY_REPLY = "(no text)"
"""Anthropic rejects empty or whitespace-only text blocks; such a text is sent as this."""


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _nonblank(text: str) -> str:
    """Anthropic rejects text blocks that are empty or only whitespace."""
    return text if text.strip() else EMPTY_REPLY


def _tool_input(arguments: str) -> dict[str, Any]:
    """Anthropic's tool_use input must be an object; malformed JSON is kept verbatim."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"_unparsed_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def anthropic_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function schemas -> Anthropic tool definitions."""
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        out.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters") or {"type": "object"},
            }
        )
    return out


def anthropic_request(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]], marks: Collection[int]
) -> dict[str, Any]:
    """`system`, `tools` and `messages` for `client.messages.create`. Consecutive tool results
    are sent as one user message (tool_result blocks first, as the API requires); every other
    message maps to one Anthropic message."""
    if not messages or messages[0].get("role") != "system":
        raise ValueError("the request must start with the system prompt")
    marked = _marked_parts(messages, marks)
    system_block: dict[str, Any] = {"type": "text", "text": _text(messages[0].get("content"))}
    if 0 in marked.get(0, ()):
        system_block["cache_control"] = dict(EPHEMERAL)
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages[1:], start=1):
        role = message.get("role")
        blocks: list[dict[str, Any]]
        if role == "user" and is_multipart(message):
            blocks = _text_parts(message, marked.get(index, set()))
            out.append({"role": "user", "content": blocks})
            continue
        if role == "tool":
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": message.get("tool_call_id") or "",
                    "content": _nonblank(_text(message.get("content"))),
                }
            ]
            target_role = "user"
        elif role == "assistant":
            text = _text(message.get("content"))
            blocks = [{"type": "text", "text": text}] if text.strip() else []
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id") or "",
                        "name": function.get("name", ""),
                        "input": _tool_input(function.get("arguments", "")),
                    }
                )
            if not blocks:
                blocks = [{"type": "text", "text": EMPTY_REPLY}]
            target_role = "assistant"
        elif role == "user":
            blocks = [{"type": "text", "text": _nonblank(_text(message.get("content")))}]
            target_role = "user"
        else:
            raise ValueError(f"message {index}: unsupported role {role!r}")
        if index in marked:
            blocks[-1]["cache_control"] = dict(EPHEMERAL)
        merge = (
            role == "tool"
            and out
            and out[-1]["role"] == "user"
            and all(b["type"] == "tool_result" for b in out[-1]["content"])
        )
        if merge:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": target_role, "content": blocks})
    return {"system": [system_block], "tools": anthropic_tools(tools), "messages": out}


def openai_cached_messages(messages: Sequence[Message], marks: Collection[int]) -> list[Message]:
    """OpenAI-format messages with `cache_control` on the text part of each marked message.
    Every message is sent the same way whether marked or not (content parts, blank text as
    `EMPTY_REPLY`), so moving a mark never changes the content of a cached prefix."""
    marked = _marked_parts(messages, marks)
    out: list[Message] = []
    for index, message in enumerate(messages):
        copy = dict(message)
        if is_multipart(message):
            copy["content"] = _text_parts(message, marked.get(index, set()))
        else:
            text = _nonblank(_text(message.get("content")))
            part: dict[str, Any] = {"type": "text", "text": text}
            if index in marked:
                part["cache_control"] = dict(EPHEMERAL)
            copy["content"] = [part]
        out.append(copy)
    return out


def _marked_parts(messages: Sequence[Message], marks: Collection[int]) -> dict[int, set[int]]:
    """Message index -> indices of its marked parts."""
    positions = part_positions(messages)
    out: dict[int, set[int]] = {}
    for mark in marks:
        if not 0 <= mark < len(positions):
            raise ValueError(f"breakpoint {mark} outside the request's {len(positions)} parts")
        message, part = positions[mark]
        out.setdefault(message, set()).add(part)
    return out


def _text_parts(message: Message, marked: Collection[int]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(message["content"]):
        block: dict[str, Any] = {"type": "text", "text": _nonblank(part_text(part))}
        if j in marked:
            block["cache_control"] = dict(EPHEMERAL)
        blocks.append(block)
    return blocks


def count_marks(request: dict[str, Any]) -> int:
    """Breakpoints in an Anthropic request body (system, tools and message blocks)."""
    count = 0
    for block in request.get("system") or []:
        count += isinstance(block, dict) and "cache_control" in block
    for tool in request.get("tools") or []:
        count += isinstance(tool, dict) and "cache_control" in tool
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b)
    return count
