"""Shared test configuration.

Under CI (the CI environment variable is set) a skipped test is turned into a
failure: the bundle's facts are only proven when every oracle package is
installed, so a skip would hide a missing install step in `.ci/run`.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI (a skip hides a missing install): {reason}"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"shared corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable
