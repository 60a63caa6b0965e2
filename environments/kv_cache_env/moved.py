"""Old import paths of modules that moved, kept working with a `DeprecationWarning`.

A package that moved modules declares `{old dotted name: new dotted name}` and calls
`keep_old_paths` once, on its own import. A finder placed first on `sys.meta_path` then answers
only for those names (and their submodules): importing the old name warns once, imports the
new module and binds the old name to that same module object. So `kv_cache_env.gym` *is*
`kv_cache_env.rl.gym` (its classes, its registration side effects, run once), and a submodule
of a moved package never loads as a second copy under its old name.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Mapping
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

KV_CACHE_ENV_MOVED: dict[str, str] = {
    "kv_cache_env.agent": "kv_cache_env.llm.agent_loop",
    "kv_cache_env.replies": "model_client.model_output",
    "kv_cache_env.responses": "model_client.provider_responses",
    "kv_cache_env.openai_chat": "model_client.openai_chat",
    "kv_cache_env.prompt": "kv_cache_env.llm.prompt",
    "kv_cache_env.tools": "kv_cache_env.llm.tools",
    "kv_cache_env.valid_calls": "kv_cache_env.llm.valid_calls",
    "kv_cache_env.gym": "kv_cache_env.rl.gym",
    "kv_cache_env.gym_vector": "kv_cache_env.rl.gym_vector",
    "kv_cache_env.features": "kv_cache_env.rl.features",
    "kv_cache_env.trace_data": "kv_cache_env.traces.trace_data",
}
"""The serving environment's modules that moved into `llm/`, `rl/` and `traces/`."""


class MovedModuleFinder(MetaPathFinder, Loader):
    """Answers for old module names only; every other import goes on to the next finder."""

    def __init__(self, moved: Mapping[str, str]) -> None:
        self.moved = dict(moved)
        self._real_specs: dict[str, ModuleSpec | None] = {}  # old name -> the module's own spec

    def new_name(self, fullname: str) -> str | None:
        """The module's new name, for an old name or a submodule of an old package."""
        for old, new in self.moved.items():
            if fullname == old or fullname.startswith(old + "."):
                return new + fullname[len(old) :]
        return None

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        return ModuleSpec(fullname, self) if self.new_name(fullname) else None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = self.new_name(spec.name)
        assert new is not None
        if spec.name in self.moved:  # a submodule's own import already warned for its package
            warnings.warn(
                f"{spec.name} moved to {new}; import it from there",
                DeprecationWarning,
                stacklevel=2,  # the importer's line: `warnings` skips the import machinery's frames
            )
        module = importlib.import_module(new)
        self._real_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # between the two calls the import system set `module.__spec__` to the old name's spec
        # (named for the old name): give the module back its own
        module.__spec__ = self._real_specs.pop(module.__spec__.name)


def keep_old_paths(moved: Mapping[str, str]) -> None:
    """Install (once per map) the finder that keeps `moved`'s old names importable."""
    for finder in sys.meta_path:
        if isinstance(finder, MovedModuleFinder) and finder.moved == dict(moved):
            return
    sys.meta_path.insert(0, MovedModuleFinder(moved))
