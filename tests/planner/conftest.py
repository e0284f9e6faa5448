"""Fixtures for the plan_backend.py tests. The planner runs as a subprocess (as agents run it);
its module _planner.py is imported in-process only for the pure arithmetic."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))          # _planner_helpers, _tiny_decoder

from _planner_helpers import SCRIPTS  # noqa: E402


@pytest.fixture(scope="session")
def planner_module():
    spec = importlib.util.spec_from_file_location("_planner", SCRIPTS / "_planner.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
