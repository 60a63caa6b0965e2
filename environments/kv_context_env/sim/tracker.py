"""The TensorRT-LLM design's context manager: which messages the KV cache still holds, and what is
archived when blocks leave it.

The tracker hears two things: `on_appended(message)` for each message in conversation order,
and `on_removed(event)` for each `BlocksRemoved` event of the block cache. It keeps the TensorRT-LLM
design's cumulative token positions (`message_token_positions_`) and a deque of the messages in
context. It maps each event to exactly the messages it covers through absolute block coordinates
(block `k` = tokens `[k*B, k*B + B - 1]`). The TensorRT-LLM design instead counts tokens from the
oldest message, which is exact only for oldest-first eviction. A message leaves the deque when any
of its tokens is evicted: the TensorRT-LLM design removes messages 1..X even when X is only partly
covered. So after every event the deque is exactly `BlockCache.resident_messages()`.

Turns (the pairing rule): a user message (role "user", kind not "recalled") is answered by the
first later assistant message that is not a reasoning span or a recalled turn, unless another
such user message arrives first. In that case it is superseded and never answered. Tool output,
reasoning and recalled messages in between do not break a turn. The rule makes turns one-to-one:
each assistant answers at most one user. It also means only the latest user can be waiting for
an answer. That matters for the single orphan slot below: a second orphan overwrites the first
only when the first was superseded and so could never complete. The overwrite is counted and
logged, but no completable turn is lost.

Archival phases, run in this order on every event. E is the set of messages that leave the
deque in this event.
1. Orphan: if the open user question's assistant has arrived, archive the turn and clear the
   slot. The TensorRT-LLM design does this only when the assistant is in E. Here the assistant may
   also still be resident, which is phase 3's rule applied to an orphan. `flush` does the same at
   episode end, when no further event may come.
2. Both evicted: user and assistant in E.
3. Boundary: user in E, assistant still resident.
4. Open question: a user in E whose assistant has not arrived yet becomes the open user
   question (one slot; an occupied slot is overwritten, as in the TensorRT-LLM design). A superseded
   user can never be answered, so it is dropped, not stored.
Generalised (an agent can evict any block, not only the oldest): an assistant in E whose user
is still resident is archived now too. Otherwise the turn would be lost when the user goes
later, since the assistant would no longer be there to pair with.

Tool outputs and reasoning: a tool message or a reasoning span that arrives while a turn waits
for its answer belongs to that turn and is archived with it (`ArchivedTurn.tool_text`,
`ArchivedTurn.reasoning_text`), so a fact read from a file or worked out in the reasoning can be
recalled. It is an extra column of the turn row; the phases above are unchanged (a tool
message leaving the cache archives nothing by itself).

Guarantee: after every event, and after `flush`, the archived turns are exactly the complete
turns with at least one message out of context, each archived once. Recalled messages are
never archived.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from typing import Literal, Protocol

from kv_context_env.vocabulary import BLOCK_SIZE, ArchivedTurn, BlocksRemoved, Message

log = logging.getLogger(__name__)

Phase = Literal["orphan", "both_evicted", "boundary", "assistant_evicted"]
"""Why a turn was archived: phases 1, 2, 3 of the TensorRT-LLM design, and the generalised assistant
case."""


class TurnSink(Protocol):
    """Where archived turns go (`TurnArchive` is one). Returns False if already stored."""

    def archive(self, turn: ArchivedTurn, step: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class Archival:
    """One turn the tracker archived."""

    turn: ArchivedTurn
    step: int
    """Step of the event (or `flush`) that archived it."""
    phase: Phase


def is_turn_user(message: Message) -> bool:
    """A message that opens a turn: a user message that is not a recalled one."""
    return message.role == "user" and message.kind != "recalled"


def is_turn_answer(message: Message) -> bool:
    """A message that can answer a turn: an assistant reply (chat or small talk), not a
    reasoning span or a recalled turn (the same rule as `conversation.turns`)."""
    return message.role == "assistant" and message.kind not in ("reasoning", "recalled")


class ContextTracker:
    """Messages in context and their archival (see the module docstring for the contracts)."""

    def __init__(self, archive: TurnSink | None = None, block_size: int = BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1, got {block_size}")
        self.block_size = block_size
        self.sink = archive
        """Receives each archived turn; None keeps them only in `archivals`."""
        self.message_token_positions_: list[int] = []
        """Tokens before each message (the TensorRT-LLM design's name): message i starts at this
        token."""
        self._messages: list[Message] = []
        self._n_tokens = 0
        self._context: deque[int] = deque()
        """Indices of the messages the cache fully holds, ascending."""
        self._gone: set[int] = set()
        """Messages with at least one evicted token (left the deque; never come back)."""
        self._removed_blocks: set[int] = set()
        self._answer: dict[int, int] = {}
        """User index → the assistant index that answered it."""
        self._question: dict[int, int] = {}
        """Assistant index → the user index it answered."""
        self._awaiting: int | None = None
        """The latest turn user with no answer yet: the only one that can still be answered."""
        self.open_user_question: Message | None = None
        """The TensorRT-LLM design's `open_user_question_`: an evicted user still waiting for its
        answer."""
        self.orphan_overwrites = 0
        """Times phase 4 overwrote an occupied open-question slot."""
        self.archivals: list[Archival] = []
        """Every turn archived, in archival order."""
        self._archived_users: set[int] = set()
        self._inner: dict[int, list[int]] = {}
        """User index → the tool messages and reasoning spans of its turn, in order."""
        self._turn_of: dict[int, int] = {}
        """Message index → the user index of the turn it belongs to."""

    # ------------------------------------------------------------------------- arrivals

    def on_appended(self, message: Message) -> None:
        """A message joined the conversation (and the cache) after all earlier ones."""
        if message.index != len(self._messages):
            raise ValueError(
                f"message index {message.index} is out of order: expected {len(self._messages)}"
            )
        if message.n_tokens < 1:
            raise ValueError(f"message {message.index} has {message.n_tokens} tokens (need >= 1)")
        self.message_token_positions_.append(self._n_tokens)
        self._n_tokens += message.n_tokens
        self._messages.append(message)
        self._context.append(message.index)
        if is_turn_user(message):
            if self._awaiting is not None:
                log.debug("user message %d superseded, never answered", self._awaiting)
            self._awaiting = message.index
            self._turn_of[message.index] = message.index
        elif self._awaiting is not None and message.kind != "recalled":
            self._turn_of[message.index] = self._awaiting
            if message.role == "tool" or message.kind == "reasoning":
                self._inner.setdefault(self._awaiting, []).append(message.index)
        if is_turn_answer(message) and self._awaiting is not None:
            self._answer[self._awaiting] = message.index
            self._question[message.index] = self._awaiting
            self._awaiting = None

    # ------------------------------------------------------------------------ evictions

    def on_removed(self, event: BlocksRemoved) -> list[Message]:
        """Blocks left the cache: remove the messages they cover from the context, run the
        archival phases, and return the messages removed by this event (ascending; a message
        already partly evicted earlier is not removed twice). Blocks must be fully written
        and not removed before; otherwise ValueError."""
        b = self.block_size
        for k in event.blocks:
            if k < 0 or (k + 1) * b > self._n_tokens:
                raise ValueError(
                    f"block {k} is not a fully written block (tokens so far: {self._n_tokens})"
                )
            if k in self._removed_blocks:
                raise ValueError(f"block {k} was already removed")
        self._removed_blocks.update(event.blocks)
        covered: set[int] = set()
        positions = self.message_token_positions_
        for k in event.blocks:
            i = bisect_right(positions, k * b) - 1
            while i < len(positions) and positions[i] < (k + 1) * b:
                covered.add(i)
                i += 1
        removed = sorted(covered - self._gone)
        self._gone.update(removed)
        self._context = deque(i for i in self._context if i not in covered)
        log.debug(
            "KV cache eviction (%s): %d blocks removed, messages %s out of context",
            event.cause,
            len(event.blocks),
            removed,
        )
        self._archive_phases(set(removed), event.step)
        return [self._messages[i] for i in removed]

    def flush(self, step: int) -> list[ArchivedTurn]:
        """Episode end: archive the open user question if its assistant has arrived since
        (phase 1 without waiting for another event). Returns what was archived."""
        before = len(self.archivals)
        self._phase_orphan(step)
        return [a.turn for a in self.archivals[before:]]

    def _archive_phases(self, evicted: set[int], step: int) -> None:
        self._phase_orphan(step)
        for u in sorted(evicted):
            if not is_turn_user(self._messages[u]):
                continue
            a = self._answer.get(u)
            if a is None:
                self._phase_open_question(u)
            elif u in self._archived_users:
                continue  # archived when its assistant left earlier (generalised case)
            elif a in evicted:
                self._archive(u, a, step, "both_evicted")
            else:
                assert a not in self._gone, f"turn {u}->{a}: assistant gone but not archived"
                self._archive(u, a, step, "boundary")
        for a in sorted(evicted):
            u = self._question.get(a)
            if u is None or u in evicted:
                continue
            if u in self._gone:
                # Its user left earlier: archived then (phase 3) or just now (phase 1).
                assert u in self._archived_users, f"turn {u}->{a}: user gone but not archived"
                continue
            self._archive(u, a, step, "assistant_evicted")

    def _phase_orphan(self, step: int) -> None:
        q = self.open_user_question
        if q is not None and q.index in self._answer:
            log.debug("found assistant response for orphaned user question %d", q.index)
            self.open_user_question = None
            self._archive(q.index, self._answer[q.index], step, "orphan")

    def _phase_open_question(self, u: int) -> None:
        if u != self._awaiting:
            log.debug("user message %d was superseded and is never answered: dropped", u)
            return
        if self.open_user_question is not None:
            self.orphan_overwrites += 1
            log.info(
                "open user question %d overwritten by %d (it was superseded; never answered)",
                self.open_user_question.index,
                u,
            )
        log.debug("user message %d has no assistant response yet, storing as orphaned", u)
        self.open_user_question = self._messages[u]

    def _archive(self, u: int, a: int, step: int, phase: Phase) -> None:
        assert u not in self._archived_users, f"turn {u}->{a} archived twice ({phase})"
        self._archived_users.add(u)
        user, assistant = self._messages[u], self._messages[a]
        inner = [self._messages[i] for i in self._inner.get(u, ())]
        turn = ArchivedTurn(
            user_index=u,
            assistant_index=a,
            user_text=user.text,
            assistant_text=assistant.text,
            tool_text="\n\n".join(m.text for m in inner if m.role == "tool"),
            reasoning_text="\n\n".join(m.text for m in inner if m.kind == "reasoning"),
        )
        self.archivals.append(Archival(turn=turn, step=step, phase=phase))
        if self.sink is not None:
            self.sink.archive(turn, step)
        log.debug("found complete turn %d->%d, archiving to RAG (%s)", u, a, phase)

    # -------------------------------------------------------------------------- queries

    @property
    def context(self) -> list[Message]:
        """The messages the cache fully holds, in conversation order (the TensorRT-LLM design's
        deque)."""
        return [self._messages[i] for i in self._context]

    def context_indices(self) -> list[int]:
        """Indices of `context`, ascending (equals `BlockCache.resident_messages()`)."""
        return list(self._context)

    @property
    def archived(self) -> list[ArchivedTurn]:
        """Every turn archived so far, in archival order."""
        return [a.turn for a in self.archivals]

    def turn_of(self, index: int) -> int | None:
        """The user index of the turn message `index` belongs to (None: the system message, a
        recalled message, or a message before any user)."""
        return self._turn_of.get(index)

    def answer_of(self, user_index: int) -> int | None:
        """The assistant message that answered `user_index`, if it has arrived."""
        return self._answer.get(user_index)
