"""tests/field_coverage: the probes' shared launcher (_torchrun.py) is importable by name, and the
probe runs of the collected modules start together, two at a time, when the first test here runs.

A probe's launcher (torchrun's agent), a one-rank probe and every start-up import leave a core idle;
started one module after another the runs summed up. Each module still gets exactly its own run."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session", autouse=True)
def _probe_runs(request, tmp_path_factory):
    import _torchrun
    runs = []
    for item in request.session.items:
        run = getattr(getattr(item, "module", None), "probe_run", None)
        if run is not None and Path(item.path).parent == HERE and run not in runs:
            runs.append(run)
    pool = _torchrun.prefetch(runs, tmp_path_factory)
    yield
    pool.shutdown(wait=True, cancel_futures=True)
