"""The hostile harness's fast part (`scripts/hostile.py --fast`), one test per case: bad input
refused at the edge with its one-line error, Gymnasium arguments refused with ValueError. Each
case must end `clean` (or `skipped` where its environment refuses it); the slow part (bombs,
full disks, slow servers, kills) runs from the script only."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _harness():
    sys.path.insert(0, str(ROOT / "scripts"))  # the case modules beside it (`hostile_cases`)
    spec = importlib.util.spec_from_file_location("hostile", ROOT / "scripts" / "hostile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("hostile", module)
    spec.loader.exec_module(module)
    return module


HARNESS = _harness()
FAST = [one for one in HARNESS.CASES if one.fast]


def test_the_fast_part_covers_every_surface_of_bad_input():
    surfaces = {one.surface for one in FAST}
    assert {"numbers and names", "paths", "API keys", "Gymnasium", "trace files"} <= surfaces
    assert len(FAST) >= 60
    assert len({(one.surface, one.name) for one in HARNESS.CASES}) == len(HARNESS.CASES)


@pytest.mark.parametrize("one", FAST, ids=[f"{one.surface}: {one.name}" for one in FAST])
def test_fast_hostile_case(tmp_path, one):
    outcome = HARNESS.run_case(one, tmp_path)
    assert outcome.verdict in ("clean", "skipped"), f"{outcome.verdict}: {outcome.detail}"
