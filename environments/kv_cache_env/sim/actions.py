"""The agent's actions, declared once: the table every reader of "what can an agent do" uses.

An `AgentTool` declares one tool: its name, whether it targets a sequence, when it is valid on one
(four flags, read by one rule, `AgentTool.refusal`), the episode-record counter of its valid calls,
the description a model's tool schema carries, its entry in the system prompt, and what the
simulator does (`carry_out`). `ACTIONS` holds them in order: `evict`, `compress`, `swap`,
`noop`. `Simulator.apply` (the authority) validates with `AgentTool.refusal` and carries out with
`AgentTool.carry_out`; the tool schemas and the valid-call grammar (`llm/`), the system prompt, the
Gymnasium spaces, mask and features (`rl/`), the rule grid, validate's ablations, the summary
and the report read the same table, so a tool added here reaches all of them
(docs: "Adding a tool").

The validity rule reads a sequence as the observation shows it — an `EntryView`, or the engine's
`Sequence`, which exposes the same four fields (`swapped`, `moving`, `quantization`,
`private_blocks`) — and the server's free CPU blocks (`cpu_room` of an `Observation` or of the
`Scheduler`). Only sequences listed in the observation (running, paused on the GPU, offloaded)
can be targeted at all.

Actions are plain values. An invalid action is an outcome (a one-line error naming what is
valid, counted), never an exception. Policies and the LLM's tools build actions through
`make_action`, so both go through one path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from .vocabulary import Quantization, Status

if TYPE_CHECKING:
    from .scheduler import Scheduler
    from .sequence import Sequence

ActionKind = str
"""A tool's name in `ACTIONS` ("evict", "compress", "swap", "noop", or a registered one)."""


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    seq_id: str | None = None
    """Target sequence; None for a tool without a target (noop)."""

    def __str__(self) -> str:
        return f"{self.kind}({self.seq_id or ''})"


@dataclass(frozen=True, slots=True)
class ActionResult:
    ok: bool
    message: str
    """What happened, or for an invalid action, what was wrong and what is valid."""
    freed_blocks: int = 0
    """GPU blocks made available by the action."""

    def __str__(self) -> str:
        return self.message


class Refusal(StrEnum):
    """Why a tool cannot act on a listed sequence now (`AgentTool.refusal`)."""

    LOADING = "loading"
    """Its KV is still loading back over the host link."""
    OFFLOADED = "offloaded"
    """Its KV is offloaded to CPU."""
    LOWEST_LEVEL = "lowest level"
    """Its KV is at the lowest precision (int4): no level left to go down."""
    NO_CPU_ROOM = "no cpu room"
    """Its private blocks do not fit in the free CPU blocks."""


class Target(Protocol):
    """What the validity rule reads of a sequence: an `EntryView` or a `Sequence`."""

    @property
    def swapped(self) -> bool: ...
    @property
    def moving(self) -> int: ...
    @property
    def quantization(self) -> Quantization: ...
    @property
    def private_blocks(self) -> int: ...


class Server(Protocol):
    """What the validity rule reads of the server: an `Observation` or the `Scheduler`."""

    @property
    def cpu_room(self) -> int: ...


class CpuRoom:
    """A `Server` whose free CPU blocks a policy counts down as it plans this turn's offloads
    (so that a later offload of the same turn is checked against what the earlier ones left)."""

    __slots__ = ("cpu_room",)

    def __init__(self, cpu_room: int) -> None:
        self.cpu_room = cpu_room


CarryOut = Callable[["Scheduler", "Sequence | None"], ActionResult]
"""What the simulator does for a valid call (the sequence is None for a tool without target)."""


@dataclass(frozen=True, slots=True)
class AgentTool:
    """One tool of the agent: the facts every part of the project reads from `ACTIONS`."""

    name: str
    description: str
    """The tool schema's description (what a model's API request carries)."""
    guide: str
    """Its entry in the system prompt's tool list, after "- name(seq_id): " (`{ladder}` and
    `{quality}` are filled in for the scenario)."""
    carry_out: CarryOut
    targets: bool = True
    """It takes a `seq_id` (a sequence listed in the observation); False: no argument."""
    on_offloaded: bool = False
    """It acts on a sequence whose KV is offloaded to CPU."""
    on_loading: bool = False
    """It acts on a sequence whose KV is still loading back over the host link."""
    needs_level: bool = False
    """It needs a lower precision left (one level per call: fp16 -> int8 -> int4)."""
    needs_cpu_room: bool = False
    """It needs the sequence's private blocks to fit in the free CPU blocks."""
    discards: bool = False
    """It throws the sequence's KV away (the sequence recomputes it): a call that frees no
    block only loses work."""

    @property
    def counter(self) -> str:
        """The episode record's field (and metric) counting its valid calls."""
        return f"{self.name}_calls"

    def refusal(self, entry: Target, server: Server) -> Refusal | None:
        """Why this tool cannot act on `entry` (a listed sequence) now; None when it can. The
        one validity rule: the simulator, the mask, the valid calls and the rules all ask it."""
        # (each flag before the fields it needs: `evict`, on every apply, reads none of them)
        if not self.on_loading and entry.moving and not entry.swapped:
            return Refusal.LOADING
        if not self.on_offloaded and entry.swapped:
            return Refusal.OFFLOADED
        if self.needs_level and entry.quantization.next_level is None:
            return Refusal.LOWEST_LEVEL
        if self.needs_cpu_room and entry.private_blocks > server.cpu_room:
            return Refusal.NO_CPU_ROOM
        return None

    def valid_on(self, entry: Target, server: Server) -> bool:
        return self.refusal(entry, server) is None


class ActionTable:
    """The tools in order (the order tool schemas, the prompt and the Gymnasium action spaces
    list them). `register` adds one; `remove` takes one out again (experiments and tests)."""

    def __init__(self, tools: tuple[AgentTool, ...] = ()) -> None:
        self._tools: dict[str, AgentTool] = {}
        self._targeted: tuple[AgentTool, ...] = ()
        for tool in tools:
            self.register(tool)

    def register(self, tool: AgentTool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        if not tool.name.isidentifier():
            raise ValueError(f"tool name {tool.name!r} is not an identifier")
        self._tools[tool.name] = tool
        self._targeted = tuple(t for t in self._tools.values() if t.targets)

    def remove(self, name: str) -> AgentTool:
        tool = self._tools.pop(name)
        self._targeted = tuple(t for t in self._tools.values() if t.targets)
        return tool

    def get(self, name: str) -> AgentTool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> AgentTool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[AgentTool]:
        return iter(tuple(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    @property
    def targeted(self) -> tuple[AgentTool, ...]:
        """The tools that take a sequence, in order (the Gymnasium spaces' tool axis)."""
        return self._targeted


# --- what the simulator does for each built-in tool -----------------------------------------
def _evict(engine: Scheduler, seq: Sequence | None) -> ActionResult:
    assert seq is not None
    paused = seq.status is not Status.RUNNING
    freed = engine.evict(seq)
    later = "recomputes when its next call arrives" if paused else "it will recompute"
    return ActionResult(True, f"evict {seq.seq_id}: freed {freed} GPU blocks; {later}", freed)


def _compress(engine: Scheduler, seq: Sequence | None) -> ActionResult:
    assert seq is not None
    level = seq.quantization_level
    freed = engine.compress(seq)
    return ActionResult(
        True, f"compress {seq.seq_id}: {level} -> {seq.quantization_level}, freed {freed}", freed
    )


def _swap(engine: Scheduler, seq: Sequence | None) -> ActionResult:
    assert seq is not None
    sid = seq.seq_id
    paused = seq.status is not Status.RUNNING
    blocks = seq.gpu_blocks
    freed = engine.swap_out(seq)
    where = "stays paused on CPU" if paused else "waits at the queue front to load it back"
    if seq.outbound:
        return ActionResult(
            True,
            f"swap {sid}: {blocks} blocks queued on the host link (backlog "
            f"{engine.host.backlog}); its GPU blocks are freed as they move; it {where}",
            freed,
        )
    return ActionResult(True, f"swap {sid}: {freed} GPU blocks freed; it {where}", freed)


_NOTHING = ActionResult(True, "noop: nothing changed")


def _noop(engine: Scheduler, seq: Sequence | None) -> ActionResult:
    return _NOTHING


ACTIONS = ActionTable(
    (
        AgentTool(
            "evict",
            description=(
                "Preempt a sequence (GPU-resident or swapped): free all its blocks now; shared "
                "prefix blocks only lose a reference. It goes back to the front of the waiting "
                "queue, cannot return this step, must recompute its whole context when "
                "readmitted, and fails if it then waits more than the wait limit."
            ),
            guide=(
                "discard its KV. A running sequence goes to the queue front and recomputes its "
                "whole context; a paused session recomputes its whole context when it returns "
                "(through the queue, and the prefill budget). Discarding system, high-priority "
                "context or nearly finished high-priority generation is penalised."
            ),
            carry_out=_evict,
            on_offloaded=True,
            on_loading=True,
            discards=True,
        ),
        AgentTool(
            "compress",
            description=(
                "Quantize a GPU-resident sequence's private KV one level (fp16 -> int8 -> int4; "
                "one level per call, call twice for int4). Each level halves its private blocks. "
                "Tokens it generates afterwards count less toward throughput (int8 ~2%, int4 ~10% "
                "loss; reasoning and system sequences lose more, ephemeral less). Compressing "
                "int4 is an error."
            ),
            guide=(
                "quantize one level ({ladder}), halving its private blocks. Tokens it then "
                "generates count less toward throughput: {quality}."
            ),
            carry_out=_compress,
            needs_level=True,
        ),
        AgentTool(
            "swap",
            description=(
                "Move a GPU-resident sequence's private blocks to CPU. It stops generating until "
                "it is swapped back in automatically (not this step) when blocks allow; while "
                "any sequence is swapped out, no new request is admitted. Each swap-in adds "
                "latency."
            ),
            guide=(
                "offload its private blocks to CPU (cpu capacity shown). A paused session stays "
                "paused on CPU and loads its KV back when it returns (it then queues for GPU "
                "blocks); a running one leaves the GPU for the queue front and loads back when "
                "readmitted. Loads add latency. Where the host link is limited (header: link "
                "blocks/step and its backlog), offloads and loads share it first come first "
                "served: an offload frees its GPU blocks only as the link moves them, and a "
                "returning session computes only once its whole KV is loaded back."
            ),
            carry_out=_swap,
            needs_cpu_room=True,
        ),
        AgentTool(
            "noop",
            description="Do nothing this turn.",
            guide="nothing.",
            carry_out=_noop,
            targets=False,
        ),
    )
)
"""The agent's tools (module doc)."""


def evict(seq_id: str) -> Action:
    return Action("evict", seq_id)


def compress(seq_id: str) -> Action:
    return Action("compress", seq_id)


def swap(seq_id: str) -> Action:
    return Action("swap", seq_id)


def noop() -> Action:
    return Action("noop")


def make_action(kind: str, seq_id: object = None) -> Action | str:
    """Build an action from loosely typed input (tool arguments, parsed text). Returns the
    action, or an error message when `kind` or `seq_id` is malformed."""
    tool = ACTIONS.get(kind)
    if tool is None:
        return f"unknown action {kind!r}; valid actions: {', '.join(ACTIONS.names)}"
    if not tool.targets:
        return Action(kind)
    if not isinstance(seq_id, str) or not seq_id.strip():
        return f'{kind} needs a seq_id string (e.g. {kind}(seq_id="r12")), got {seq_id!r}'
    return Action(kind, seq_id.strip())
