"""Failure-triage tests: the `reproduces` marker and shared fixtures."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
CATALOG = REPO / "sub-skills" / "failure-triage" / "catalog"
# the test modules import the shared helpers (_repro.py) by name; appended, so no other folder's
# conftest is shadowed
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "reproduces(*ids): the test triggers these catalog failures for real and checks the catalog "
        "maps the captured text to them",
    )


def load_triage():
    """The triage_log.py module, imported from its path (it is a script, not a package)."""
    name = "triage_log_under_test"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def triage():
    return load_triage()


@pytest.fixture(scope="session")
def catalog(triage):
    return triage.load_catalog(CATALOG)
