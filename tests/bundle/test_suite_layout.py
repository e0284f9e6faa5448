"""The test suite runs the same whatever subset of folders pytest is given.

Several folders have a conftest.py; a test module that imports `conftest` by name gets whichever
folder's conftest comes first on sys.path, which depends on the folders pytest was asked to run
(tests/validator_ds broke when run together with tests/launch or tests/integration). Shared helpers
live in uniquely named modules (ds_support.py, _repro.py, integ_common.py, ...).
"""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_module_imports_conftest_by_name():
    offenders = [str(p.relative_to(TESTS)) for p in sorted(TESTS.rglob("*.py"))
                 if re.search(r"^\s*(from conftest import|import conftest\b)", p.read_text(encoding="utf-8"), re.M)]
    assert not offenders, offenders
