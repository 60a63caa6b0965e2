"""Old import paths of moved modules: each still imports, warns once (`DeprecationWarning`,
pointed at the importing line) and hands out the moved module itself, so classes, registries
and side effects (the Gymnasium ids) are the new module's; nothing in the project uses them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evals.common import OLD_PATHS as COMMON_OLD
from evals.serving import OLD_PATHS as SERVING_OLD
from kv_cache_env.moved import KV_CACHE_ENV_MOVED

ROOT = Path(__file__).resolve().parents[1]
MOVED = {**KV_CACHE_ENV_MOVED, **SERVING_OLD, **COMMON_OLD}
ALLOWED = {
    ROOT / "environments/kv_cache_env/moved.py",
    ROOT / "evals/serving/__init__.py",
    ROOT / "evals/common/__init__.py",
    ROOT / "evals/serving/speed_probe.py",  # also measures trees from before the moves
    ROOT / "docs/layout.md",  # says the old paths still import
    Path(__file__).resolve(),
}


def _python(script: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_no_source_names_an_old_path() -> None:
    dotted = re.compile(r"\b(" + "|".join(re.escape(old) for old in MOVED) + r")\b(?![\w])")
    slashed = re.compile(
        r"\b(" + "|".join(re.escape(old.replace(".", "/")) for old in MOVED) + r")(\.py|/)"
    )
    tops = ("environments", "evals", "rubrics", "scripts", "tests", "docs")
    sources = [p for top in tops for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".md"}]
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}"
        for path in [*sources, ROOT / "README.md", ROOT / "pyproject.toml"]
        if path not in ALLOWED
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if dotted.search(line.replace("environments/", "")) or slashed.search(line)
    ]
    assert offenders == []


def test_no_module_imports_an_old_path_by_its_parent() -> None:
    # `from evals.common import local_tool_calls` names no old dotted path, yet imports one
    import ast

    tops = ("environments", "evals", "scripts", "tests")
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for top in tops
        for path in (ROOT / top).rglob("*.py")
        if path not in ALLOWED
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and any(f"{node.module}.{alias.name}" in MOVED for alias in node.names)
    ]
    assert offenders == []


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_is_the_moved_module(old: str) -> None:
    new = MOVED[old]
    done = _python(
        f"""
        import importlib, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            moved = importlib.import_module({old!r})
        new = importlib.import_module({new!r})
        assert moved is new, (moved, new)
        assert new.__spec__.name == {new!r}, new.__spec__
        deprecations = [w for w in caught if w.category is DeprecationWarning]
        assert len(deprecations) == 1, [str(w.message) for w in caught]
        assert {new!r} in str(deprecations[0].message)
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_warning_points_at_the_importing_line_and_can_be_an_error() -> None:
    script = "import kv_cache_env.tools\n"
    done = _python(script, "-W", "always::DeprecationWarning")
    assert "<string>:1: DeprecationWarning: kv_cache_env.tools moved" in done.stderr
    failed = _python(script, "-W", "error::DeprecationWarning")
    assert failed.returncode != 0 and "DeprecationWarning" in failed.stderr


def test_the_old_gymnasium_import_registers_the_ids_once() -> None:
    pytest.importorskip("gymnasium")
    done = _python(
        """
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        import gymnasium
        import kv_cache_env.gym
        import kv_cache_env.rl.gym
        assert kv_cache_env.gym is kv_cache_env.rl.gym
        env = gymnasium.make("kvcache/Serving-v0", scenario="easy")
        obs, info = env.reset(seed=0)
        print(sorted(k for k in gymnasium.registry if k.startswith("kvcache/")))
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "['kvcache/Serving-v0', 'kvcache/ServingTurns-v0']" in done.stdout


def test_a_submodule_of_a_moved_package_is_not_loaded_twice() -> None:
    done = _python(
        """
        import sys, warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        from evals.serving.policies.bound import BoundPolicy
        import kv_cache_env.policies.bound as bound
        assert BoundPolicy is bound.BoundPolicy
        assert sys.modules["evals.serving.policies.bound"] is bound
        from evals.serving.policies import create
        assert type(create("bound")) is bound.BoundPolicy
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
