"""One episode of the conversation-context family: a long chat arrives message by message into a
block cache of `max_blocks` blocks; before each step the agent may evict blocks or messages,
or recall archived turns; then the engine enforces the budget by itself (prioritized LRU,
every forced eviction an OOM event) and, when the new message is a planted question, the
reader answers from what is still visible.

Turn loop (the caller drives it, like `kv_cache_env.sim.Simulator`):

    episode = ContextEpisode(generate_conversation(seed, "medium"))
    while not episode.done:
        view = episode.observe()              # the new message and the cache's state
        episode.evict_message(5)              # any number of actions ...
        episode.enforce()                     # the engine keeps the budget (OOM if it must)
        question = episode.pending_question   # set when the new message asks something
        episode.step(answer=reader(episode.visible_pieces(), question.text) if question else None)
    record = episode.record()

The episode itself does no model I/O: the caller computes the reader's answer (extractive,
Hugging Face or a hosted model) from `visible_text()` / `visible_pieces()` and hands it to
`step`. The archive is a SQLite file (WAL) per episode; `close()` releases it.

Indices: messages get cache indices in arrival order (0 = system); a recalled turn is a new
message with the next index, so conversation message `i` has cache index
`cache_index[i]` (equal to `i` until the first recall).
"""

from __future__ import annotations

import shutil
import tempfile
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from kv_context_env.generator.conversation import LEVELS
from kv_context_env.tokenizer import count_tokens, tokenize
from kv_context_env.vocabulary import (
    BLOCK_SIZE,
    BlocksRemoved,
    Conversation,
    FactSpan,
    Message,
    Question,
)

from .archive import ArchiveWriteError, TurnArchive
from .cache import BlockCache
from .scoring import rouge_l
from .tracker import ContextTracker
from .values import VERDICT_SCORES, judge_answer, person_normalised

MessageState = Literal["resident", "partial", "evicted"]
RECALL_K = 1
"""Archived turns a `recall` brings back."""
MAX_RECALL_QUERY_CHARS = 2000
"""Longest `recall` query: a longer one is an invalid action (counted, nothing searched, the
episode goes on). A search's time grows with the query's words (~16 ms a 1,000-character query
over a hard episode's archive); the longest sentence of a generated conversation is ~400
characters and its longest message ~1,450, so every query a baseline builds fits."""
RECALL_SEARCH_S = 0.1
"""Fixed latency of one archive search, found or not: an access outside the GPU's KV-cache
(the original design: "each CPU access adds 0.1-0.3 latency"; the low end, as the serving
simulator's `swap_overhead_s`)."""
RECALL_PREFILL_TOKENS_PER_S = 4096
"""Rate at which recalled tokens are prefilled back into the cache: a 70B-class model on one
node (the serving suite's `slow-prefill` scenario, vLLM's chunked-prefill token budget)."""


RECALLED_HEAD = "[recalled turn from message"
"""How a recalled copy opens: `[recalled turn from message N]`."""


def recall_latency_s(tokens: int) -> float:
    """Latency one recall adds before the next answer: the search, then a prefill of the
    `tokens` it brought back (`RECALL_SEARCH_S + tokens / RECALL_PREFILL_TOKENS_PER_S`)."""
    return RECALL_SEARCH_S + tokens / RECALL_PREFILL_TOKENS_PER_S


@dataclass(frozen=True, slots=True)
class MessageView:
    index: int
    role: str
    kind: str
    first_block: int
    last_block: int
    state: MessageState
    n_tokens: int
    text: str


@dataclass(frozen=True, slots=True)
class ContextObservation:
    turn: int
    """0-based; one turn per arriving message after the system prompt."""
    turns: int
    max_blocks: int
    active_blocks: int
    new_message: int
    """Cache index of the message that just arrived."""
    messages: tuple[MessageView, ...]
    archived_turns: int
    tail_block: int


@dataclass(frozen=True, slots=True)
class QuestionResult:
    message_index: int
    level: str
    question: str
    answer: str
    reference: str
    rouge_l: float
    """ROUGE-L F of the answer against the key, first/second person normalised (a metric)."""
    fact_visible: bool
    """Whether every token of each answer-bearing statement was visible when asked (in its
    message, or in a resident recalled copy)."""
    value_correct: bool
    """Whether the verdict is `correct`."""
    verdict: str = "abstain"
    """`correct`, `abstain` or `wrong` (`values.judge_answer`)."""
    score: float = 0.0
    """The answer term of this question (`values.VERDICT_SCORES`)."""


@dataclass(frozen=True, slots=True)
class ContextRecord:
    """What the context rubric scores; plain data (JSON-ready through `as_dict`)."""

    level: str
    seed: int
    max_blocks: int
    turns: int
    questions: tuple[QuestionResult, ...]
    active_blocks: tuple[int, ...]
    """Active blocks at the end of each turn (after the engine's enforcement)."""
    oom_events: int
    oom_blocks: int
    agent_evicted_blocks: int
    recalls: int
    recalled_turns: int
    recalled_tokens: int
    invalid_actions: int
    archived_turns: int
    recall_latency_s: float = 0.0
    """Summed `recall_latency_s` of every recall (searches that found nothing included)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "level": self.level,
            "seed": self.seed,
            "max_blocks": self.max_blocks,
            "turns": self.turns,
            "questions": [
                {
                    "message_index": q.message_index,
                    "level": q.level,
                    "question": q.question,
                    "answer": q.answer,
                    "reference": q.reference,
                    "rouge_l": q.rouge_l,
                    "fact_visible": q.fact_visible,
                    "value_correct": q.value_correct,
                    "verdict": q.verdict,
                    "score": q.score,
                }
                for q in self.questions
            ],
            "active_blocks": list(self.active_blocks),
            "oom_events": self.oom_events,
            "oom_blocks": self.oom_blocks,
            "agent_evicted_blocks": self.agent_evicted_blocks,
            "recalls": self.recalls,
            "recalled_turns": self.recalled_turns,
            "recalled_tokens": self.recalled_tokens,
            "invalid_actions": self.invalid_actions,
            "archived_turns": self.archived_turns,
            "recall_latency_s": self.recall_latency_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ContextRecord:
        """The inverse of `as_dict` (for re-scoring stored records)."""
        raw = dict(data)
        questions = tuple(QuestionResult(**q) for q in raw.pop("questions"))  # type: ignore[arg-type,union-attr]
        active = tuple(raw.pop("active_blocks"))  # type: ignore[arg-type]
        return cls(questions=questions, active_blocks=active, **raw)  # type: ignore[arg-type]


def answer_has_value(answer: str, reference: str) -> bool:
    """Whether `answer` names the value of the answer key `reference` ("... is VALUE") as
    whole words, ignoring case, surrounding punctuation and a leading article ("a double
    espresso" matches "double espresso"; "5120" does not match "512")."""
    from .values import names_value

    return names_value(answer, reference.rpartition(" is ")[2])


class ActionError(ValueError):
    """An agent action that cannot be carried out (reported to the agent, counted, no effect)."""


@dataclass
class _Counters:
    oom_events: int = 0
    oom_blocks: int = 0
    agent_evicted_blocks: int = 0
    recalls: int = 0
    recalled_turns: int = 0
    recalled_tokens: int = 0
    recall_latency_s: float = 0.0
    invalid_actions: int = 0
    active_blocks: list[int] = field(default_factory=list)
    questions: list[QuestionResult] = field(default_factory=list)


class ContextEpisode:
    """See the module docstring. `max_blocks` defaults to the level's budget; `archive_dir`
    keeps the SQLite archive there (default: a temporary directory removed by `close`)."""

    def __init__(
        self,
        conversation: Conversation,
        *,
        max_blocks: int | None = None,
        block_size: int = BLOCK_SIZE,
        archive_dir: str | Path | None = None,
    ) -> None:
        self.conversation = conversation
        self.max_blocks = max_blocks or LEVELS[conversation.level].max_blocks
        self.block_size = block_size
        key = f"{conversation.level}-{conversation.seed}"
        self._tmp: str | None = None
        try:  # a full or failing disk: ArchiveWriteError, as the archive's own writes say it
            if archive_dir is None:
                self._tmp = tempfile.mkdtemp(prefix="kvctx-")
            folder = Path(archive_dir) if archive_dir is not None else Path(str(self._tmp))
            folder.mkdir(parents=True, exist_ok=True)
            self.archive_path = folder / f"archive-{key}.sqlite"
            for stale in (self.archive_path, *folder.glob(f"{self.archive_path.name}-*")):
                stale.unlink(missing_ok=True)  # a new episode starts with an empty archive
            self.archive = TurnArchive(self.archive_path, key)
        except OSError as error:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
            if isinstance(error, ArchiveWriteError):
                raise
            where = error.filename or archive_dir or tempfile.gettempdir()
            raise ArchiveWriteError(error.errno, error.strerror, str(where)) from None
        self.cache = BlockCache(self.max_blocks, block_size)
        self.tracker = ContextTracker(self.archive, block_size)
        self.cache_index: dict[int, int] = {}
        """Conversation message index -> cache index."""
        self._questions = {q.message_index: q for q in conversation.questions}
        self._next = 0
        self._step = 0
        self._copies: list[int] = []
        """Cache indices of every recalled copy, ascending."""
        self._recalled: dict[int, int] = {}
        """Archived turn (user index) → cache index of its latest recalled copy."""
        self._offsets: dict[int, list[int]] = {}
        self._runs: dict[int, list[tuple[int, int, int]]] = {}
        self._enforced = False
        self._n = _Counters()
        self._arrive()  # the system message
        self._arrive()  # the first turn's message

    # ------------------------------------------------------------------------------ state

    @property
    def done(self) -> bool:
        return self._step >= self.turns

    @property
    def turns(self) -> int:
        return len(self.conversation.messages) - 1

    @property
    def turn(self) -> int:
        return self._step

    @property
    def current_message(self) -> Message:
        """The conversation message that arrived this turn."""
        return self.conversation.messages[self._next - 1]

    @property
    def pending_question(self) -> Question | None:
        """The planted question the new message asks (the reader answers it in `step`)."""
        return self._questions.get(self._next - 1) if not self.done else None

    @property
    def recalled_copies(self) -> tuple[int, ...]:
        """Cache indices of the recalled copies so far (resident or not), ascending."""
        return tuple(self._copies)

    def token_offset(self, index: int, char: int) -> int:
        """The token (absolute coordinates) holding character `char` of cache message
        `index`."""
        if index not in self._offsets:
            ends, total = [], 0
            for piece in tokenize(self.cache.message(index).text):
                total += len(piece)
                ends.append(total)
            self._offsets[index] = ends
        start, _ = self.cache.message_span(index)
        return start + bisect_right(self._offsets[index], char)

    def span_blocks(self, fact: FactSpan) -> range:
        """Blocks holding the statement `fact` (of an arrived message)."""
        index = self.cache_index[fact.message_index]
        first = self.token_offset(index, fact.start)
        last = self.token_offset(index, max(fact.start, fact.end - 1))
        return range(first // self.block_size, last // self.block_size + 1)

    def observe(self) -> ContextObservation:
        views = []
        for index in range(self.cache.n_messages):
            message = self.cache.message(index)
            blocks = self.cache.blocks_of(index)
            visible = self.cache.visible_tokens(index)
            state: MessageState = (
                "resident"
                if visible == message.n_tokens
                else ("partial" if visible > 0 else "evicted")
            )
            views.append(
                MessageView(
                    index,
                    message.role,
                    message.kind,
                    blocks.start,
                    blocks.stop - 1,
                    state,
                    message.n_tokens,
                    message.text,
                )
            )
        return ContextObservation(
            turn=self._step,
            turns=self.turns,
            max_blocks=self.max_blocks,
            active_blocks=self.cache.active_blocks,
            new_message=self.cache.n_messages - 1,
            messages=tuple(views),
            archived_turns=len(self.tracker.archivals),
            tail_block=self.cache.tail_block if self.cache.tail_block is not None else -1,
        )

    # ---------------------------------------------------------------------------- actions

    def evict_blocks(self, blocks: list[int]) -> str:
        self._check_actionable()
        try:
            event = self.cache.evict_blocks(blocks, self._step)
        except ValueError as error:
            self._n.invalid_actions += 1
            raise ActionError(str(error)) from None
        return self._agent_event(event)

    def evict_message(self, index: int) -> str:
        self._check_actionable()
        try:
            event = self.cache.evict_message(index, self._step)
        except ValueError as error:
            self._n.invalid_actions += 1
            raise ActionError(str(error)) from None
        if event is None:
            self._n.invalid_actions += 1
            raise ActionError(f"message {index} has no evictable block left")
        return self._agent_event(event)

    def recall(self, query: str, k: int = RECALL_K) -> str:
        """Bring the best archived turns for `query` back as new blocks (ranked by the query
        alone). Each copy opens with `[recalled turn from message N]`, N the cache index of the
        turn's user message, so a reader can place it in time. The recall's latency
        (`recall_latency_s` of the tokens it brought back) is added to the record."""
        self._check_actionable()
        if len(query) > MAX_RECALL_QUERY_CHARS:
            self._n.invalid_actions += 1
            raise ActionError(
                f"a recall query of {len(query):,} characters; at most "
                f"{MAX_RECALL_QUERY_CHARS:,} (a few words of what to find)"
            )
        self._n.recalls += 1
        live = {u for u, i in self._recalled.items() if self.cache.fully_resident(i)}
        found = [t for t in self.archive.recall(query, k + len(live)) if t.user_index not in live][
            :k
        ]
        tokens = 0
        lines = []
        for turn in found:
            self._recalled[turn.user_index] = self.cache.n_messages
            self._copies.append(self.cache.n_messages)
            head = f"{RECALLED_HEAD} {turn.user_index}]"
            reasoning = f"\nReasoning: {turn.reasoning_text}" if turn.reasoning_text else ""
            tool = f"\nTool: {turn.tool_text}" if turn.tool_text else ""
            text = (
                f"{head} User: {turn.user_text}{reasoning}{tool}\nAssistant: {turn.assistant_text}"
            )
            message = Message(
                index=self.cache.n_messages,
                role="user",
                kind="recalled",
                text=text,
                n_tokens=count_tokens(text),
            )
            self._append(message)
            self._n.recalled_turns += 1
            self._n.recalled_tokens += message.n_tokens
            tokens += message.n_tokens
            lines.append(f"message {message.index} ({message.n_tokens} tokens)")
        self._n.recall_latency_s += recall_latency_s(tokens)
        if not found:
            return "recall: no archived turn matches"
        return "recalled " + ", ".join(lines)

    def count_invalid(self) -> None:
        """An action rejected before it reached the episode (bad tool arguments)."""
        self._n.invalid_actions += 1

    def _agent_event(self, event: BlocksRemoved | None) -> str:
        if event is None:
            return "nothing evicted"
        self.tracker.on_removed(event)
        self._n.agent_evicted_blocks += len(event.blocks)
        return f"evicted {len(event.blocks)} block(s); {self.cache.active_blocks} active"

    def _check_open(self) -> None:
        if self.done:
            raise ActionError("the episode is over")

    def _check_actionable(self) -> None:
        self._check_open()
        if self._enforced:
            raise ActionError("the engine already ran this turn; act before enforce()")

    # ------------------------------------------------------------------------------- step

    def enforce(self) -> BlocksRemoved | None:
        """End the agent's actions for this turn: every block is read (LRU clock), then the
        engine evicts by prioritized LRU while more than `max_blocks` are active (an OOM
        event). Call it before the reader reads a pending question; idempotent per turn."""
        self._check_open()
        if self._enforced:
            return None
        self._enforced = True
        self.cache.touch_all(self._step)
        event = self.cache.enforce_limit(self._step)
        if event is not None:
            self.tracker.on_removed(event)
            self._n.oom_events += 1
            self._n.oom_blocks += len(event.blocks)
        return event

    def step(self, answer: str | None = None) -> None:
        """End the turn: `enforce()` (if not done yet), score the reader's `answer` to a
        pending question, then the next message arrives. A question's answer must have been
        read after `enforce()`, so `step(answer)` without it raises."""
        self._check_open()
        question = self.pending_question
        if question is not None:
            if answer is None:
                raise ValueError("the new message is a question: step() needs the reader's answer")
            if not self._enforced:
                raise ValueError("call enforce() before the reader reads the question")
        self.enforce()
        if question is not None and answer is not None:
            values = question.values or (question.answer.rpartition(" is ")[2],)
            verdict = judge_answer(answer, values, question.candidates)
            self._n.questions.append(
                QuestionResult(
                    message_index=question.message_index,
                    level=question.level,
                    question=question.text,
                    answer=answer,
                    reference=question.answer,
                    rouge_l=rouge_l(person_normalised(answer), person_normalised(question.answer)),
                    fact_visible=self.facts_visible(question),
                    value_correct=verdict == "correct",
                    verdict=verdict,
                    score=VERDICT_SCORES[verdict],
                )
            )
        self._n.active_blocks.append(self.cache.active_blocks)
        self._step += 1
        self._enforced = False
        if self.done:
            self.tracker.flush(self._step)
        else:
            self._arrive()

    def facts_visible(self, question: Question) -> bool:
        facts = question.facts or (FactSpan(question.fact_index, 0, 10**9),)
        for fact in facts:
            index = self.cache_index[fact.message_index]
            text = self.cache.message(index).text
            fact = FactSpan(fact.message_index, fact.start, min(fact.end, len(text)))
            first = self.token_offset(index, fact.start)
            last = self.token_offset(index, max(fact.start, fact.end - 1))
            if all(self.cache.is_active(t // self.block_size) for t in range(first, last + 1)):
                continue
            statement = text[fact.start : fact.end]
            if not any(
                self.cache.fully_resident(i)
                and self.cache.message(i).kind == "recalled"
                and statement in self.cache.message(i).text
                for i in self._recalled.values()
            ):
                return False
        return True

    def _arrive(self) -> None:
        message = self.conversation.messages[self._next]
        index = self.cache.n_messages
        self.cache_index[message.index] = index
        self._append(replace(message, index=index))
        self._next += 1

    def _append(self, message: Message) -> None:
        self.cache.append(message, self._step)
        self.tracker.on_appended(message)

    # ---------------------------------------------------------------------------- readers

    def visible_pieces(self) -> list[tuple[str, bool]]:
        """The whole history as (text piece, visible) in order: the pieces of the project
        tokenizer, visible iff their block is active (what the block-masked reader takes).
        Each message opens with a head `role #index: ` (its cache index: readers can tell which
        message came first), visible iff the message's first block is."""
        pieces: list[tuple[str, bool]] = []
        for index in range(self.cache.n_messages):
            message = self.cache.message(index)
            start, _ = self.cache.message_span(index)
            prefix = f"{message.role} #{index}: "
            prefix = prefix if index == 0 else f"\n{prefix}"
            head_visible = self.cache.is_active(start // self.block_size)
            pieces.append((prefix, head_visible))
            for offset, piece in enumerate(tokenize(message.text)):
                pieces.append((piece, self.cache.is_active((start + offset) // self.block_size)))
        return pieces

    def _block_runs(self, index: int) -> list[tuple[int, int, int]]:
        """(block, first char, end char) of cache message `index`, one run per block it
        touches, in order (cached: a message never changes)."""
        runs = self._runs.get(index)
        if runs is None:
            self.token_offset(index, 0)  # fills the token ends
            first, _ = self.cache.message_span(index)
            runs, previous = [], 0
            for offset, end in enumerate(self._offsets[index]):
                block = (first + offset) // self.block_size
                if runs and runs[-1][0] == block:
                    runs[-1] = (block, runs[-1][1], end)
                else:
                    runs.append((block, previous, end))
                previous = end
            self._runs[index] = runs
        return runs

    def visible_text(self) -> str:
        """The visible context as text, evicted spans removed (marked `[…]` once per gap):
        what a text reader (extractive or hosted model) reads. The same text as joining
        `visible_pieces`, built block by block."""
        active = self.cache.active_flags()
        out: list[str] = []
        gap = False
        for index in range(self.cache.n_messages):
            message = self.cache.message(index)
            runs = self._block_runs(index)
            prefix = f"{message.role} #{index}: " if index == 0 else f"\n{message.role} #{index}: "
            pieces = [(prefix, runs[0][0])] + [(message.text[a:b], block) for block, a, b in runs]
            for piece, block in pieces:
                if active[block]:
                    out.append(piece)
                    gap = False
                elif not gap:
                    out.append(" […] ")
                    gap = True
        return "".join(out)

    # ----------------------------------------------------------------------------- record

    def record(self) -> ContextRecord:
        return ContextRecord(
            level=self.conversation.level,
            seed=self.conversation.seed,
            max_blocks=self.max_blocks,
            turns=self._step,
            questions=tuple(self._n.questions),
            active_blocks=tuple(self._n.active_blocks),
            oom_events=self._n.oom_events,
            oom_blocks=self._n.oom_blocks,
            agent_evicted_blocks=self._n.agent_evicted_blocks,
            recalls=self._n.recalls,
            recalled_turns=self._n.recalled_turns,
            recalled_tokens=self._n.recalled_tokens,
            recall_latency_s=self._n.recall_latency_s,
            invalid_actions=self._n.invalid_actions,
            archived_turns=len(self.tracker.archivals),
        )

    def close(self) -> None:
        self.archive.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> ContextEpisode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
