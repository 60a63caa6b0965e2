"""The hostile harness's cases, one module per surface (`scripts/hostile.py` runs them). Importing
a module registers its cases in `harness.CASES`, in import order."""

from __future__ import annotations
