"""The simulator's state has one writer per field: no policy, evaluation, learning or model-client
code writes the engine's or a sequence's state (sampled worlds go through `Simulator.rewrite`,
which recomputes what the engine derived), nor any object's private attribute."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from kv_cache_env.sim.host_link import HostLink
from kv_cache_env.sim.kv_manager import KVCacheManager
from kv_cache_env.sim.scheduler import Scheduler
from kv_cache_env.sim.sequence import Sequence

ROOT = Path(__file__).resolve().parents[1]
READERS = (
    ROOT / "environments/kv_cache_env/policies",
    ROOT / "environments/kv_cache_env/rl",
    ROOT / "environments/kv_cache_env/llm",
    ROOT / "environments/model_client",
    ROOT / "evals",
)
"""Code that reads the simulator and must never write it."""
ENGINE_STATE = frozenset(
    {
        *(f.name for f in dataclasses.fields(Sequence)),
        *(n for cls in (Scheduler, KVCacheManager, HostLink) for n in cls.SHARED_FIELDS),
        *(n for cls in (Scheduler, KVCacheManager, HostLink) for n in cls.OWN_FIELDS),
    }
)


def _writes(path: Path) -> list[tuple[int, str, str]]:
    """(line, base expression, attribute) of every attribute assignment not made on `self`."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store):
                    base = ast.unparse(part.value)
                    if base not in ("self", "cls"):
                        out.append((node.lineno, base, part.attr))
    return out


def _sources() -> list[Path]:
    return sorted(p for folder in READERS for p in folder.rglob("*.py"))


def test_the_scan_sees_the_code_it_guards():
    names = {p.name for p in _sources()}
    assert {"worlds.py", "expert.py", "bound.py", "runner.py", "features.py", "reply.py"} <= names
    assert {"status", "gpu_blocks", "pool", "queue", "cpu_used", "_next_return"} <= ENGINE_STATE


def test_no_reader_writes_engine_or_sequence_state():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {base}.{attr}"
        for path in _sources()
        for line, base, attr in _writes(path)
        if attr in ENGINE_STATE
    ]
    assert not found, "written outside the simulator:\n" + "\n".join(found)


def test_no_reader_writes_a_private_attribute():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {base}.{attr}"
        for path in _sources()
        for line, base, attr in _writes(path)
        if attr.startswith("_") and not attr.startswith("__")
    ]
    assert not found, "private attributes written from outside their object:\n" + "\n".join(found)
