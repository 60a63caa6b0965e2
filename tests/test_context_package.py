"""Where the context family lives: `kv_context_env` (generator, sim, readers, llm, taskset).

The old import path `kv_cache_env.context` still works, warns (`DeprecationWarning`) and hands
out the moved modules themselves; nothing in the project uses it any more. Both verifiers
taskset ids load. (That the family's parts import only downwards is `tests/test_layout.py`'s
layer order.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OLD_PATHS = (
    "kv_cache_env.context",
    "kv_cache_env/context",
    *(
        f"{root}{sep}{name}"
        for root, sep in (("evals.context", "."), ("evals/context", "/"), ("..context", "."))
        for name in ("policies", "text_agent")
    ),
)
SHIMS = {
    ROOT / "environments/kv_cache_env/context/__init__.py",
    ROOT / "environments/kv_cache_env/context/readers.py",
    ROOT / "evals/context/policies.py",
    ROOT / "evals/context/text_agent.py",
}
"""The deprecated modules themselves: the only sources allowed to name the old paths."""


def _python(script: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def _sources() -> list[Path]:
    tops = ("environments", "evals", "rubrics", "scripts", "tests", "docs")
    files = [p for top in tops for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".md"}]
    return [*files, ROOT / "README.md", ROOT / "pyproject.toml"]


def test_no_source_outside_the_shims_names_the_old_path() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _sources()
        if path not in SHIMS and path != Path(__file__).resolve()
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if any(old in line for old in OLD_PATHS)
        and not line.startswith("| `environments/kv_cache_env/context/`")  # the layout tables
    ]
    assert offenders == []


@pytest.mark.long_running
def test_the_family_and_its_evals_import_without_the_old_path() -> None:
    # a fresh interpreter where any DeprecationWarning is an error: importing every module of
    # the family, its evaluation layer and the rubric touches no shim
    done = _python(
        """
        import importlib, pkgutil, sys
        import kv_context_env, evals.context
        shims = {"evals.context.policies", "evals.context.text_agent"}
        names = [
            module.name
            for package in (kv_context_env, evals.context)
            for module in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
            if module.name not in shims
        ]
        optional = {"torch", "transformers", "sklearn"}
        for name in [*names, "rubrics.context", "evals.servers.policy_server"]:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as error:
                if (error.name or "").split(".")[0] not in optional:
                    raise
        old = [n for n in sys.modules if n.startswith("kv_cache_env.context") or n in shims]
        assert old == [], old
        print(len(names))
        """,
        "-W",
        "error::DeprecationWarning",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) >= 20


def test_the_old_path_warns_and_hands_out_the_moved_modules() -> None:
    warned = _python("import kv_cache_env.context", "-W", "error::DeprecationWarning")
    assert warned.returncode != 0
    assert "DeprecationWarning: kv_cache_env.context is deprecated" in warned.stderr
    done = _python(
        """
        import importlib
        import kv_cache_env.context as old
        for name, target in old.MOVED.items():
            moved = importlib.import_module(target)
            assert importlib.import_module(f"kv_cache_env.context.{name}") is moved, name
            assert getattr(old, name) is moved, name
        import kv_cache_env.context.plan
        from kv_cache_env.context.episode import ContextEpisode
        from kv_cache_env.context.readers import ChatReader, Reader, extractive_reader
        from kv_context_env.llm.chat_reader import ChatReader as chat
        from kv_context_env.readers.extractive import extractive_reader as extractive
        from kv_context_env.sim.episode import ContextEpisode as episode
        assert (ChatReader, extractive_reader, ContextEpisode) == (chat, extractive, episode)
        from kv_context_env import CONTEXT_SUITE_VERSION
        assert old.CONTEXT_SUITE_VERSION == CONTEXT_SUITE_VERSION
        print(len(old.MOVED))
        """,
        "-W",
        "ignore::DeprecationWarning",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) == 20  # every module the family had, `readers` aside


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


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        (
            "evals.context.policies",
            "kv_context_env.policies.baselines",
            ("CONTEXT_POLICIES", "get_context_policy", "oracle", "trt_lru"),
        ),
        (
            "evals.context.text_agent",
            "kv_context_env.policies.text_agent",
            ("context_text_calls", "context_text_answer", "parse_rows"),
        ),
    ],
)
def test_the_old_policy_modules_warn_and_re_export(old, new, names) -> None:
    warned = _python(f"import {old}", "-W", "error::DeprecationWarning")
    assert warned.returncode != 0
    assert f"DeprecationWarning: {old} is deprecated" in warned.stderr
    done = _python(
        f"""
        import importlib
        old, new = importlib.import_module({old!r}), importlib.import_module({new!r})
        assert all(getattr(old, name) is getattr(new, name) for name in {names!r})
        assert sorted(old.__all__) == sorted(set(old.__all__) & set(dir(new)))
        """,
        "-W",
        "ignore::DeprecationWarning",
    )
    assert done.returncode == 0, done.stderr[-2000:]
