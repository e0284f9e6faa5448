"""Fixtures for the plan_backend.py tests. The planner runs as a subprocess (as agents run it);
its package backend_planner is imported in-process only for the pure arithmetic and the CLI's main()."""
from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))          # _planner_helpers, _tiny_decoder

from _planner_helpers import SCRIPTS  # noqa: E402


@pytest.fixture(scope="session")
def planner():
    """The backend_planner package's modules by short name: planner.cli.main, planner.memory.OPTIMIZERS, ..."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    names = ("common", "shapes", "memory", "strategies", "emit", "report", "cli")
    return types.SimpleNamespace(**{n: importlib.import_module(f"backend_planner.{n}") for n in names})
