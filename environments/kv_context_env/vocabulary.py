"""The shared vocabulary of the conversation-context family (the TensorRT-LLM and masking designs):
messages of one long chat, the planted questions that test what the cache still holds, and the
events the block cache emits. Plain frozen data; every module of `kv_context_env` speaks it.

Coordinates are absolute (the masking design): token 0 is the first token of the system message,
every later message's tokens follow without gaps, and block `k` covers tokens `[k*B, k*B + B - 1]`
for the block size `B` (16 by default). Nothing is ever renumbered: an evicted block keeps its
index, and a recalled turn is appended as new tokens after the current end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BLOCK_SIZE = 16
"""Tokens per block (the masking design's `BLOCK_SIZE`); configurable per episode."""

SYSTEM_PRIORITY = 100
"""TensorRT-LLM retention priority of the system message's blocks (the TensorRT-LLM design)."""
DEFAULT_PRIORITY = 35
"""Retention priority of every other block (the TensorRT-LLM design's `decodeRetentionPriority`)."""

Role = Literal["system", "user", "assistant", "tool"]
Kind = Literal[
    "system",  # the system prompt (always message 0)
    "chat",  # ordinary user or assistant text
    "fact",  # a user message that plants a fact a later question asks about
    "question",  # a user message asking about a planted fact (the reader answers it)
    "tool_output",  # a tool result (may carry a planted fact)
    "reasoning",  # an assistant reasoning span
    "chitchat",  # filler small talk
    "recalled",  # an archived turn brought back by `recall` (never archived again)
]


@dataclass(frozen=True, slots=True)
class Message:
    index: int
    """Position in the conversation (0 = system). Recalled turns get fresh indices."""
    role: Role
    kind: Kind
    text: str
    n_tokens: int
    """Tokens under the project tokenizer (`context.tokenizer`); at least 1."""
    facts: tuple[str, ...] = ()
    """Keys ("owner|attribute") of the facts this message states: generator metadata, like
    `kind`, never shown to the agent and never used by the archive."""


@dataclass(frozen=True, slots=True)
class FactSpan:
    """Where one answer-bearing statement sits: characters `[start, end)` of a message's
    text (the whole statement, owner, attribute and value)."""

    message_index: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a fact in the conversation: generator metadata (the ground-truth
    statement list), never shown to an agent."""

    span: FactSpan
    key: str
    """"<subject>|<property>": the fact it states (one key per fact)."""
    value: str
    value_class: str
    index: int
    """0 for the first value, then 1, 2, ... for each update."""


@dataclass(frozen=True, slots=True)
class SignalSpan:
    """One signal of need in the conversation: where it sits, its cue class (need, again,
    recur, close), the fact it is about, and its normalized form (subject mention, time, names
    and joined sentences masked: "Heads up: I'll need {X} {W}, fingers crossed.")."""

    span: FactSpan
    cue: str
    key: str
    form: str


@dataclass(frozen=True, slots=True)
class Question:
    message_index: int
    """The `question` message that asks it."""
    fact_index: int
    """The message that planted the answer (the oracle keeps its blocks)."""
    text: str
    answer: str
    """The answer key sentence: ROUGE-L reference (a metric)."""
    level: str
    """How the fact is asked: `soon` (the turn after it was said), `later` (days after),
    `again` (a later ask of the same fact) or `updated` (after its value changed)."""
    values: tuple[str, ...] = ()
    """The key value the answer must name."""
    candidates: tuple[str, ...] = ()
    """Every value of the asked fact's class said anywhere in the conversation (other facts',
    stale ones, filler's): naming any other than `values` is wrong."""
    facts: tuple[FactSpan, ...] = ()
    """The answer-bearing statements (current values only): what the oracle keeps."""
    key: str = ""
    """The fact asked ("<subject>|<property>", as in `Conversation.facts`)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    seed: int
    level: str
    """Difficulty level of the whole episode: easy | medium | hard."""
    messages: tuple[Message, ...]
    questions: tuple[Question, ...]
    statements: tuple[FactSpan, ...] = ()
    """Every fact statement in the chat (asked, stale, never asked)."""
    facts: tuple[Statement, ...] = ()
    """The same statements with their fact key and value: the ground-truth statement list
    (what perfect extraction would find; generator metadata, never shown)."""
    signals: tuple[SignalSpan, ...] = ()
    """Every signal of need as said, with its normalized form (generator metadata, never
    shown): what the phrasing-novelty figure counts."""


@dataclass(frozen=True, slots=True)
class BlocksRemoved:
    """A KV 'blocks removed' event (TensorRT-LLM's `KVCacheRemovedData`): which blocks left
    the cache, in one eviction. `cause` says who evicted: the agent's tool, or the engine's
    own prioritized-LRU fallback when active blocks exceed `MAX_BLOCKS` (an OOM event)."""

    step: int
    blocks: tuple[int, ...]
    """Absolute block indices, ascending."""
    cause: Literal["agent", "engine"]


@dataclass(frozen=True, slots=True)
class ArchivedTurn:
    """One complete user→assistant turn in the archive (the TensorRT-LLM design's RAG store)."""

    user_index: int
    assistant_index: int
    user_text: str
    assistant_text: str
    tool_text: str = ""
    """The turn's tool outputs, joined by blank lines (archived with the turn)."""
    reasoning_text: str = ""
    """The assistant's reasoning spans in the turn, joined by blank lines (archived with it)."""
