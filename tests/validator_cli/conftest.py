"""Fixtures for the validator CLI tests (issue 14 item 2): the CLI runs in-process."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


@pytest.fixture(scope="session")
def cli():
    import backend_validator.cli as c
    c._rules_loaded()
    return c


@pytest.fixture
def run(cli, monkeypatch):
    """run(argv, cwd=None) -> (rc, stdout, stderr), the CLI called in-process."""
    def _run(argv, cwd=None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        out, err = io.StringIO(), io.StringIO()
        rc = cli.main([str(a) for a in argv], stdout=out, stderr=err)
        return rc, out.getvalue(), err.getvalue()
    return _run
