"""Layering: environments import only `kv_cache_env`, `rubrics` and libraries, never `evals`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ENVIRONMENTS = Path(__file__).resolve().parents[1] / "environments"


def test_no_environment_module_imports_evals() -> None:
    # In a fresh interpreter with `evals` made unimportable, import every module under
    # environments/ (a lazy import inside a function would hide an upward import from a plain
    # import check, so the modules' own imports run here and `evals` cannot be found at all).
    script = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        sys.modules["evals"] = None
        root = {str(ENVIRONMENTS)!r}
        names = [m.name for m in pkgutil.walk_packages([root]) ]
        optional = {{"torch", "transformers", "gymnasium", "llama_cpp"}}
        for name in names:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as error:
                if (error.name or "").split(".")[0] not in optional:
                    raise
                print("optional", name, error.name)
        print("imported", len(names))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = int(done.stdout.split("imported")[-1])
    assert imported >= 40  # both environments, the simulator and the context family


def test_environment_sources_name_no_evals_import() -> None:
    offenders = [
        f"{path.relative_to(ENVIRONMENTS)}:{n}"
        for path in ENVIRONMENTS.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if line.lstrip().startswith(("from evals", "import evals"))
    ]
    assert offenders == []
