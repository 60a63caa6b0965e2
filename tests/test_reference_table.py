"""The shipped reference table: equal to the reference computed now (two entries recomputed
here; `kvarena validate` compares every entry its run computes), used by `eval` only for
exactly the episodes it holds and only when it was made by this code, and invisible in
`results.jsonl` (byte-identical with and without it).

The mechanism is tested on a small table built here from the current code (so these tests
hold whatever the state of the shipped one); the shipped table is tested as it is: when it is
current two of its entries must equal episodes played now, and when it is stale it must not be
used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.job_store import code_text
from evals.common.results import dumps
from evals.serving import reference_table
from evals.serving.jobs import EpisodeJob, reference_for_scoring, reference_from_table, run_job
from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.sim import SUITE, SUITE_VERSION
from rubrics import DEFAULT_WEIGHTS, Weights

# scripts/test spreads the suite over xdist workers; one worker takes this whole module, so the
# module's small table is computed once.
pytestmark = pytest.mark.xdist_group("reference-table")

WEIGHTS = Weights({"failure_penalty": 1.0, "latency_penalty": 0.5})
HELD = [("noop", "easy", 0), ("noop", "easy", 1), ("bound", "easy", 0), ("bound", "easy", 1)]


@pytest.fixture(scope="module")
def small_table(tmp_path_factory) -> reference_table.ReferenceTable:
    path = tmp_path_factory.mktemp("table") / "reference.jsonl.gz"
    entries = [(a, s, seed, reference_table.play_entry(a, s, seed)) for a, s, seed in HELD]
    assert reference_table.write(path, entries) == 4
    table = reference_table.load(path)
    assert table is not None and table.current
    return table


@pytest.fixture
def use_small_table(small_table, monkeypatch):
    monkeypatch.setattr(reference_table, "shipped", lambda: small_table)
    return small_table


def test_a_result_from_the_table_equals_the_played_one_byte_for_byte(use_small_table):
    # noop's record is the same under any weights (re-scored under the run's); the bound's
    # only under the default weights, which its table records searched under
    jobs = [
        EpisodeJob(a, EpisodeSpec(s, seed), WEIGHTS if a == "noop" else DEFAULT_WEIGHTS)
        for a, s, seed in HELD
    ]
    answered, left = reference_from_table(jobs)
    assert left == []
    assert [dumps(r) for r in answered] == [dumps(run_job(job)) for job in jobs]


def test_under_other_weights_the_bound_is_played_and_never_taken_from_the_table(
    use_small_table,
):
    noop, bound = (EpisodeJob(a, EpisodeSpec("easy", 0), WEIGHTS) for a in ("noop", "bound"))
    answered, left = reference_from_table([noop, bound])
    assert [r["agent"] for r in answered] == ["noop"] and left == [bound]
    assert not use_small_table.covers("bound", bound.episode, WEIGHTS)
    assert use_small_table.covers("bound", bound.episode, DEFAULT_WEIGHTS)
    # normalizing a run that lacks the reference: the bound is filled in under the default
    # weights only; under others the scenario is left unnormalized (no false 1.0)
    default_run = [run_job(EpisodeJob("lru", EpisodeSpec("easy", 0)))]
    filled, sources = reference_for_scoring(default_run, DEFAULT_WEIGHTS)
    assert sorted(r["agent"] for r in filled) == ["bound", "noop"] and "easy" in sources
    custom_run = [run_job(EpisodeJob("lru", EpisodeSpec("easy", 0), WEIGHTS))]
    assert reference_for_scoring(custom_run, WEIGHTS) == ([], {})
    # with the bound played under the weights, noop alone comes from the table
    played = [*custom_run, run_job(bound)]
    filled, sources = reference_for_scoring(played, WEIGHTS)
    assert [r["agent"] for r in filled] == ["noop"] and filled[0]["weights"] == dict(WEIGHTS)


def test_only_the_exact_episodes_it_holds_are_answered(use_small_table):
    held = EpisodeJob("bound", EpisodeSpec("easy", 1))
    other = [
        EpisodeJob("bound", EpisodeSpec("easy", 1, steps=8)),  # another number of turns
        EpisodeJob("bound", EpisodeSpec("easy", 2)),  # a seed it does not hold
        EpisodeJob("noop", EpisodeSpec("easy", 1, block_size=32)),
        EpisodeJob("noop", EpisodeSpec("easy", 1, trace="mooncake-conversation")),
        EpisodeJob("lru", EpisodeSpec("easy", 1)),  # not a reference agent
    ]
    answered, left = reference_from_table([held, *other])
    assert [(r["agent"], r["scenario"], r["seed"]) for r in answered] == [("bound", "easy", 1)]
    assert left == other


def test_a_table_made_by_other_code_is_not_used(use_small_table, monkeypatch):
    monkeypatch.setattr(reference_table, "raw_digest", lambda: "1" * 16)
    assert use_small_table.current  # a reworded comment: the code tokens still match
    monkeypatch.setattr(reference_table, "source_digest", lambda: "0" * 16)
    assert not use_small_table.current
    job = EpisodeJob("noop", EpisodeSpec("easy", 0))
    assert reference_from_table([job]) == ([], [job])
    assert "regenerate it" in reference_table.status()


def test_eval_results_are_byte_identical_with_and_without_the_table(
    use_small_table, tmp_path, monkeypatch
):
    args = ["eval", "-p", "noop,lru,bound", "-s", "easy", "-n", "2", "--workers", "1"]
    runner = CliRunner()
    shipped = runner.invoke(app, [*args, "-o", str(tmp_path / "shipped")])
    assert shipped.exit_code == 0, shipped.output
    assert "reference: shipped table (4 episodes of noop and bound)" in shipped.output
    monkeypatch.setattr(reference_table, "shipped", lambda: None)
    computed = runner.invoke(app, [*args, "-o", str(tmp_path / "computed")])
    assert computed.exit_code == 0, computed.output
    assert "reference: computed" in computed.output
    a = (tmp_path / "shipped" / "results.jsonl").read_bytes()
    assert a == (tmp_path / "computed" / "results.jsonl").read_bytes()
    assert len(a.splitlines()) == 6
    info = json.loads((tmp_path / "shipped" / "run.json").read_text())
    assert info["source_digest"] == reference_table.source_digest()


def test_the_digest_ignores_comments_and_docstrings_but_not_code(tmp_path: Path):
    def code(text: str) -> str:
        path = tmp_path / "m.py"
        path.write_text(text)
        return code_text(path)

    base = code('"""Doc."""\n\ndef f(x):\n    """What f does."""\n    return x + 1\n')
    reworded = code(
        '"""Other."""\n# a comment\n\ndef f(x):  # note\n    """Else."""\n\n    return x + 1\n'
    )
    changed = code('"""Doc."""\n\ndef f(x):\n    """What f does."""\n    return x + 2\n')
    assert base == reworded
    assert base != changed
    files = [str(p.relative_to(reference_table.ROOT)) for p in reference_table.source_files()]
    for expected in (
        "environments/kv_cache_env/sim/scheduler.py",
        "environments/kv_cache_env/sim/kv_manager.py",
        "environments/kv_cache_env/sim/host_link.py",
        "rubrics/serving.py",
        "environments/kv_cache_env/policies/bound.py",
        "environments/kv_cache_env/policies/learned_weights.json",
        "evals/serving/runner.py",
    ):
        assert expected in files


def test_the_files_left_out_of_the_digest_run_in_no_record_the_table_holds():
    """`NOT_SOURCES` (the expert's modules) are matched by `SOURCES` but no `noop` or `bound`
    record depends on them: no pool member comes from them, and no covered policy file imports
    them except the registry, which registers the expert but keeps it out of the pool."""
    import ast
    import inspect

    from kv_cache_env.policies import NOT_IN_POOL, bound_pool, create

    left_out = {reference_table.ROOT / name for name in reference_table.NOT_SOURCES}
    assert all(path.exists() for path in left_out)
    assert not left_out & set(reference_table.source_files())
    stems = {path.stem for path in left_out}
    for make in bound_pool():
        assert Path(inspect.getfile(type(make()))).resolve() not in left_out
    assert {"expert", "bound"} <= NOT_IN_POOL
    assert Path(inspect.getfile(type(create("bound")))).resolve() not in left_out
    for path in reference_table.source_files():
        if path.suffix != ".py" or path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                named = {(node.module or "").rsplit(".", 1)[-1]} | {a.name for a in node.names}
                assert not named & stems, f"{path.name} imports {named & stems}"
            elif isinstance(node, ast.Import):
                assert not {a.name.rsplit(".", 1)[-1] for a in node.names} & stems


def test_the_shipped_table():
    table = reference_table.load()
    if table is None:
        # none shipped (yet): eval computes the reference and says how to build the table
        assert reference_table.REGENERATE in reference_table.status()
        return
    if not table.current:
        # stale (made by other code or for another suite): never used, and it says how to fix it
        job = EpisodeJob("bound", EpisodeSpec("easy", 0))
        assert not table.covers("bound", job.episode, DEFAULT_WEIGHTS)
        assert reference_table.REGENERATE in reference_table.status()
        return
    # seeds 0..N-1 of every suite scenario for both agents (N = 100 when complete; at least the
    # main job's 10)
    count = max(seed for _, _, seed in table.records) + 1
    expected = {(a, s, seed) for a in ("noop", "bound") for s in SUITE for seed in range(count)}
    assert set(table.records) == expected and count >= 10
    assert table.suite_version == SUITE_VERSION
    for agent, scenario, seed in (("bound", "easy", 7), ("noop", "hard", 4)):
        played = reference_table.play_entry(agent, scenario, seed)
        stored = table.records[agent, scenario, seed]
        assert json.dumps(played, sort_keys=True) == json.dumps(stored, sort_keys=True)


def _rewrite(path: Path, header_changes: dict, record_change: tuple | None = None) -> None:
    import gzip

    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    header = json.loads(lines[0]) | header_changes
    rows = [json.loads(line) for line in lines[1:]]
    if record_change is not None:
        index, key, value = record_change
        rows[index]["record"][key] = value
    body = [json.dumps(header, sort_keys=True)] + [
        json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows
    ]
    path.write_bytes(gzip.compress(("\n".join(body) + "\n").encode(), mtime=0))


def test_restamp_keeps_the_records_and_refuses_when_one_differs(small_table, tmp_path):
    """`scripts/reference_table.py --restamp`: a table made by other code whose replayed records
    all equal it is restamped for this code (records untouched); one that differs is refused."""
    import subprocess
    import sys

    script = Path(__file__).parents[1] / "scripts" / "reference_table.py"
    path = tmp_path / "reference.jsonl.gz"
    entries = [(a, s, seed, r) for (a, s, seed), r in small_table.records.items()]
    reference_table.write(path, entries, seeds=range(2))
    _rewrite(path, {"digest": "0" * 16, "raw_digest": "0" * 16})  # as if made by other code
    assert not reference_table.load(path).current
    run = [sys.executable, str(script), "--out", str(path), "--restamp", "2", "-j", "1"]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    restamped = reference_table.load(path)
    assert restamped.current and restamped.records == small_table.records
    stale = {"digest": "0" * 16, "raw_digest": "0" * 16}
    _rewrite(path, stale, record_change=(0, "invalid_calls", 99))
    before = path.read_bytes()
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "differ" in done.stdout and path.read_bytes() == before


def test_the_report_fills_in_the_bound_only_for_runs_under_the_default_weights(
    use_small_table, tmp_path
):
    from evals.report.build import shipped_reference

    runner = CliRunner()
    args = ["eval", "-p", "lru", "-s", "easy", "-n", "2", "--workers", "1"]
    filled = {}
    for name, extra in (("default", []), ("custom", ["--weights", '{"latency_penalty": 0.5}'])):
        done = runner.invoke(app, [*args, *extra, "-o", str(tmp_path / name)])
        assert done.exit_code == 0, done.output
        lines = (tmp_path / name / "results.jsonl").read_text().splitlines()
        results = [json.loads(line) for line in lines]
        filled[name] = shipped_reference([tmp_path / name], results)
    assert sorted((r["agent"], r["seed"]) for r in filled["default"]) == [
        ("bound", 0),
        ("bound", 1),
        ("noop", 0),
        ("noop", 1),
    ]
    assert [(r["agent"], r["seed"]) for r in filled["custom"]] == [("noop", 0), ("noop", 1)]
    assert filled["custom"][0]["weights"]["latency_penalty"] == 0.5


def test_the_table_reads_each_record_as_written_and_refuses_other_lines(small_table, tmp_path):
    """`load` keys the lines without parsing their records (parsed when read): every record
    equals the line's own, and a line not in `write`'s form makes the table unreadable."""
    import gzip

    path = tmp_path / "reference.jsonl.gz"
    entries = [(a, s, seed, small_table.records[a, s, seed]) for a, s, seed in HELD]
    reference_table.write(path, entries)
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    parsed = {
        (e["agent"], e["scenario"], e["seed"]): e["record"] for e in map(json.loads, lines[1:])
    }
    table = reference_table.load(path)
    assert table is not None and list(table.records) == list(parsed) == HELD
    assert all(table.records[key] == parsed[key] for key in HELD)
    path.write_bytes(gzip.compress(("\n".join([*lines, '{"agent":"noop"}']) + "\n").encode()))
    assert reference_table.load(path) is None


def test_the_digest_read_from_a_current_table_is_the_computed_one(monkeypatch):
    """`source_digest` takes the shipped table's digest where its raw digest is this code's."""
    table = reference_table.shipped()
    if table is None or table.raw != reference_table.raw_digest():
        pytest.skip("the shipped table is not this code's")
    computed = reference_table.source_digest
    monkeypatch.setattr(reference_table, "shipped", lambda: None)
    computed.cache_clear()
    try:
        assert computed() == table.digest
    finally:
        computed.cache_clear()
