"""Layering: environments import only `kv_cache_env`, `rubrics` and libraries, never `evals`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ENVIRONMENTS = Path(__file__).resolve().parents[1] / "environments"


@pytest.mark.long_running
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
        optional = {{"torch", "transformers", "gymnasium", "xllamacpp"}}
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


ROOT = ENVIRONMENTS.parent
EVALS = ROOT / "evals"
LONGEST_FUNCTION = 80
EXEMPT: set[tuple[str, str]] = set()
"""(path, function) pairs allowed past the limit, each with its reason (none now)."""


def _functions(path: Path) -> list[tuple[str, int]]:
    import ast

    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno
    ]


def test_no_function_under_evals_or_environments_is_over_80_lines() -> None:
    # the environments too, the simulator first: the engine's step stays a sequence of named
    # phases, and the longest functions are not where a newcomer starts reading
    sources = [*EVALS.rglob("*.py"), *ENVIRONMENTS.rglob("*.py")]
    too_long = [
        f"{path.relative_to(ROOT)}:{name} ({lines} lines)"
        for path in sorted(sources)
        for name, lines in _functions(path)
        if lines > LONGEST_FUNCTION and (str(path.relative_to(ROOT)), name) not in EXEMPT
    ]
    assert too_long == []


def test_the_cli_is_the_app_and_its_registration_only() -> None:
    import ast

    source = (EVALS / "cli.py").read_text()
    assert len(source.splitlines()) <= 150
    tree = ast.parse(source)
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert functions == ["_root", "main"]  # the app's callback (--debug) and the entry point
    registered = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Call)
        and isinstance(node.func.func, ast.Attribute)
        and node.func.func.attr == "command"
    ]
    # every command is a function of a family's `commands` module, registered by name
    assert len(registered) >= 10
    for call in registered:
        target = call.args[0]
        assert isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)


def _layout_rows() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [
        line.split("|")[1].strip().strip("`")
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def test_the_readme_layout_table_matches_the_tree() -> None:
    rows = _layout_rows()
    missing = [row for row in rows if not (ROOT / row).exists()]
    assert missing == [], f"README Layout names paths that do not exist: {missing}"
    packages = sorted(
        str(init.parent.relative_to(ROOT)) + "/"
        for top in ("evals", "rubrics", "environments")
        for init in (ROOT / top).rglob("__init__.py")
    )
    unlisted = [p for p in packages if p not in rows]
    assert unlisted == [], f"packages missing from the README's Layout table: {unlisted}"


def test_every_package_says_what_it_owns() -> None:
    import ast

    silent = [
        str(init.relative_to(ROOT))
        for top in ("evals", "rubrics", "environments")
        for init in (ROOT / top).rglob("__init__.py")
        if not ast.get_docstring(ast.parse(init.read_text()))
    ]
    assert silent == []


LAYERS: tuple[tuple[str, ...], ...] = (
    # the chat-model client both families use, below both
    ("model_client",),
    # the environments: shared helpers, then the simulator, up to the tasksets
    ("kv_cache_env.suggest", "kv_cache_env.limits", "kv_cache_env.bounded_read"),
    ("kv_cache_env.sim",),
    # the rubrics score what the simulators record: above each family's simulator, below the
    # policies that plan with the score and the tasksets that report it
    ("rubrics",),
    ("kv_cache_env.traces",),
    ("kv_cache_env.episodes",),
    ("kv_cache_env.llm", "kv_cache_env.rl"),
    ("kv_cache_env.policies",),
    ("kv_cache_env.taskset",),
    # the context family: the generator knows nothing of episodes, the episode nothing of
    # readers, the readers nothing of the model boundary or the policies, and those two nothing
    # of each other; only the taskset sees them all
    ("kv_context_env.vocabulary", "kv_context_env.tokenizer"),
    ("kv_context_env.generator",),
    ("kv_context_env.sim",),
    ("kv_context_env.readers",),
    ("rubrics.context",),
    ("kv_context_env.llm", "kv_context_env.policies"),
    ("kv_context_env.taskset",),
    # the evaluation layer, all I/O: what everything shares, then the families, then what
    # spans families, then the command line
    ("evals.common",),
    ("evals.prompt_cache",),
    ("evals.servers",),
    ("evals.serving", "evals.context"),
    ("evals.report", "evals.validation"),
    ("evals.cli",),
)
"""The layer order, lowest first. A module may import its own unit and any unit of a lower
layer, never a higher layer nor another unit of its own layer (the two families never import
each other). Package roots belong to no unit, except `rubrics`, whose
root is the serving rubric (`rubrics.context`, the context family's, is a unit of its own)."""

UNITS = {unit: layer for layer, units in enumerate(LAYERS) for unit in units}


def test_the_layout_page_draws_this_layer_order() -> None:
    page = (ROOT / "docs" / "layout.md").read_text()
    section = page.split("\n## The layer order\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    drawn = [
        (int(cells[1]), tuple(u.strip().strip("`") for u in cells[2].split(",")))
        for cells in rows[1:]  # the header row aside
    ]
    assert drawn == list(enumerate(LAYERS, start=1))


def _unit(module: str) -> str | None:
    matches = [u for u in UNITS if module == u or module.startswith(u + ".")]
    return max(matches, key=len) if matches else None


def _module_name(path: Path) -> str:
    base = ENVIRONMENTS if ENVIRONMENTS in path.parents else ROOT
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, function-local ones included; relative
    imports resolved; `from package import name` counts as `package.name`."""
    import ast

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


RUBRICS = ROOT / "rubrics"


def test_every_import_goes_down_the_layer_order() -> None:
    sources = [*ENVIRONMENTS.rglob("*.py"), *RUBRICS.rglob("*.py"), *EVALS.rglob("*.py")]
    upward = []
    for path in sorted(sources):
        module = _module_name(path)
        own = _unit(module)
        if own is None:
            continue
        for line, target in _imported(path, module):
            to = _unit(target)
            if to is not None and to != own and UNITS[to] >= UNITS[own]:
                upward.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {target}")
    assert upward == []


def test_the_layer_order_places_every_package_and_top_level_module() -> None:
    # a new package, or a new module at a package root, must be placed in the order, not left
    # outside the check
    roots = {
        "model_client": ENVIRONMENTS / "model_client",
        "kv_cache_env": ENVIRONMENTS / "kv_cache_env",
        "kv_context_env": ENVIRONMENTS / "kv_context_env",
        "rubrics": RUBRICS,
        "evals": EVALS,
    }
    modules = {
        _module_name(path)
        for root in roots.values()
        for path in [*root.rglob("__init__.py"), *root.glob("*.py")]
    }
    unplaced = sorted(m for m in modules - set(roots) if _unit(m) is None)
    assert unplaced == []


KNOWN_CYCLES: dict[frozenset[str], str] = {}
"""Import cycles still allowed, each with its reason; a cycle that is gone must leave this."""


def _import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (function-local and type-checking imports too:
    a cycle hidden in a function is still a cycle). `from package import name` is the submodule
    `package.name` where there is one, else the package itself."""
    paths = {
        _module_name(path): path
        for top in (ENVIRONMENTS, RUBRICS, EVALS)
        for path in top.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = set()
        for _, target in _imported(path, module):
            if target in paths:
                targets.add(target)
            elif target.rpartition(".")[0] in paths:
                targets.add(target.rpartition(".")[0])
        graph[module] = targets - {module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"} - {"e"}}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]


def test_no_package_has_an_import_cycle() -> None:
    graph = _import_graph()
    assert len(graph) > 150  # every module of the environments, the rubrics and evals
    cycles = _cycles(graph)
    assert [sorted(c) for c in cycles if c not in KNOWN_CYCLES] == []
    assert [sorted(c) for c in KNOWN_CYCLES if c not in cycles] == []  # a fixed one leaves
