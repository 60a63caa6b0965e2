"""The KV-cache serving simulator: pure, deterministic, step-clocked.

Nothing in this package does I/O, reads the wall clock or knows about rubrics, policies,
verifiers or the CLI (`vector.py` starts worker processes and talks to them over pipes, nothing
else).
"""

from .actions import (
    ACTIONS,
    Action,
    ActionResult,
    ActionTable,
    AgentTool,
    CpuRoom,
    Refusal,
    compress,
    evict,
    make_action,
    noop,
    swap,
)
from .catalogue import CATALOGUE, ToolProfile
from .events import BlockEvent
from .observation import Candidate, EntryView, Observation, QueueView
from .record import EpisodeRecord, EvictionRecord, ResidentRecord
from .scenario import (
    SCENARIO_ALIASES,
    SCENARIOS,
    SUITE,
    SUITE_VERSION,
    TIERS,
    RequestProfile,
    Scenario,
    canonical_scenario_name,
    get_scenario,
)
from .scheduler import Eviction, Scheduler, StepStats
from .simulator import (
    EpisodeDraws,
    Reference,
    Simulator,
    TurnResult,
    draw_episode,
    run_reference,
)
from .text import approx_tokens, parse, render
from .vector import VectorSimulator, VectorStep
from .vocabulary import (
    EVICTION_VALUE,
    RETENTION_PRIORITY,
    BlockType,
    PauseKind,
    Phase,
    Quantization,
    Status,
)
from .workload import FollowUp, Request, Schedule, schedule_from_requests, synthesize

__all__ = [
    "ACTIONS",
    "CATALOGUE",
    "EVICTION_VALUE",
    "RETENTION_PRIORITY",
    "SCENARIOS",
    "SCENARIO_ALIASES",
    "SUITE",
    "SUITE_VERSION",
    "TIERS",
    "Action",
    "ActionResult",
    "ActionTable",
    "AgentTool",
    "BlockEvent",
    "BlockType",
    "Candidate",
    "CpuRoom",
    "EntryView",
    "EpisodeDraws",
    "EpisodeRecord",
    "Eviction",
    "EvictionRecord",
    "FollowUp",
    "Observation",
    "PauseKind",
    "Phase",
    "Quantization",
    "QueueView",
    "Reference",
    "Refusal",
    "Request",
    "RequestProfile",
    "ResidentRecord",
    "Scenario",
    "Schedule",
    "Scheduler",
    "Simulator",
    "Status",
    "StepStats",
    "ToolProfile",
    "TurnResult",
    "VectorSimulator",
    "VectorStep",
    "approx_tokens",
    "canonical_scenario_name",
    "compress",
    "draw_episode",
    "evict",
    "get_scenario",
    "make_action",
    "noop",
    "parse",
    "render",
    "run_reference",
    "schedule_from_requests",
    "swap",
    "synthesize",
]
