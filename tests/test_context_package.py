"""Where the context family lives: `kv_context_env` (generator, sim, readers, llm, taskset).

Its modules import cleanly, the lexicon ships beside the generator, and both verifiers taskset
ids load. (That the family's parts import only downwards is `tests/test_layout.py`'s layer
order.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python(script: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.long_running
def test_the_family_and_its_evals_import_without_a_deprecation() -> None:
    # a fresh interpreter where any DeprecationWarning is an error: every module of the family,
    # its evaluation layer and the rubric imports
    done = _python(
        """
        import importlib, pkgutil, sys
        import kv_context_env, evals.context
        names = [
            module.name
            for package in (kv_context_env, evals.context)
            for module in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        ]
        optional = {"torch", "transformers", "sklearn"}
        for name in [*names, "rubrics.context", "evals.servers.policy_server"]:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as error:
                if (error.name or "").split(".")[0] not in optional:
                    raise
        print(len(names))
        """,
        "-W",
        "error::DeprecationWarning",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) >= 20


def test_the_lexicon_ships_beside_the_generator() -> None:
    from importlib import resources

    data = resources.files("kv_context_env.generator").joinpath("data/lexicon.json")
    assert data.is_file()
    assert "kv_context_env/generator/data/lexicon.json" in str(data).replace("\\", "/")


@pytest.mark.parametrize(
    ("taskset_id", "options", "first_id"),
    [
        ("kv-cache-env", {"scenario": "easy"}, "kv-cache-easy-0"),
        ("kv-context-env", {"level": "easy"}, "kv-context-easy-0"),
    ],
)
def test_both_verifiers_taskset_ids_load(taskset_id, options, first_id) -> None:
    from verifiers.v1.utils.loaders import load_taskset, resolve_env_config

    config = resolve_env_config({"taskset": {"id": taskset_id, "num_tasks": 2, **options}})
    assert config.agent.runtime.type == "subprocess"
    tasks = list(load_taskset(config.taskset))
    assert [task.data.id for task in tasks] == [first_id, first_id[:-1] + "1"]
    assert all(task.data.system_prompt and task.data.prompt for task in tasks)
