"""Fixtures for tests/audit_torch: the audit's 2-rank gloo job and its real torchrun runs, each run once.

Reuses the job harness of tests/torch_distributed/conftest.py (clean environment, own session,
kill the process group on timeout) by loading that file, without changing it.
"""
from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_td_harness", HERE.parent / "torch_distributed" / "conftest.py")
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)


def _audit_job(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("audit")
    proc = harness._run_in_own_session([sys.executable, str(HERE / "_jobs_audit.py"), "audit", str(outdir)],
                                       harness.JOB_TIMEOUT_S, env=harness._clean_env())
    return harness.Run(proc, outdir, "audit")


def _torchrun(tmp_path_factory, mode):
    outdir = tmp_path_factory.mktemp(f"torchrun_{mode}")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(HERE / "_torchrun_audit_worker.py"), mode]
    proc = harness._run_in_own_session(cmd, harness.LAUNCH_TIMEOUT_S, env=harness._clean_env(), cwd=outdir)
    return harness.Run(proc, outdir, mode)


# The audit job waits out 3 s group timeouts and 5 s sleeps with the CPU idle; the two torchrun runs
# start beside it on first use (only the runs the collected tests need), each fixture returns its own.
RUNS = {"audit_job": _audit_job,
        "torchrun_record": lambda f: _torchrun(f, "record"),
        "torchrun_sigkill": lambda f: _torchrun(f, "sigkill")}


@pytest.fixture(scope="session")
def _audit_runs(request, tmp_path_factory):
    needed = {n for item in request.session.items for n in getattr(item, "fixturenames", ()) if n in RUNS}
    tmp_path_factory.getbasetemp()      # created here: two pool threads creating it at once race (FileExistsError)
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="audit-run")
    futures = {name: pool.submit(build, tmp_path_factory) for name, build in RUNS.items() if name in needed}

    def get(name):
        if name not in futures:
            futures[name] = pool.submit(RUNS[name], tmp_path_factory)
        return futures[name].result()
    yield get
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def audit_job(_audit_runs):
    """_jobs_audit.py on 2 gloo ranks: process groups, DDP construction and gradients, ..."""
    return _audit_runs("audit_job")


@pytest.fixture(scope="session")
def torchrun_record(_audit_runs):
    """rank 0 prints an error first and keeps running; rank 1 raises under @record once rank 0 has printed."""
    return _audit_runs("torchrun_record")


@pytest.fixture(scope="session")
def torchrun_sigkill(_audit_runs):
    """rank 1 kills itself with SIGKILL; no @record."""
    return _audit_runs("torchrun_sigkill")


@pytest.fixture(scope="session")
def torchrun_harness():
    """(worker script folder, harness module) for tests that drive torchrun themselves (signals)."""
    return HERE, harness
