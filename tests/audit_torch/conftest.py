"""Fixtures for tests/audit_torch: the audit's 2-rank gloo job and its real torchrun runs, each run once.

Reuses the job harness of tests/torch_distributed/conftest.py (clean environment, own session,
kill the process group on timeout) by loading that file, without changing it.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_td_harness", HERE.parent / "torch_distributed" / "conftest.py")
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)


@pytest.fixture(scope="session")
def audit_job(tmp_path_factory):
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


@pytest.fixture(scope="session")
def torchrun_record(tmp_path_factory):
    """rank 0 prints an error first and keeps running; rank 1 raises under @record once rank 0 has printed."""
    return _torchrun(tmp_path_factory, "record")


@pytest.fixture(scope="session")
def torchrun_sigkill(tmp_path_factory):
    """rank 1 kills itself with SIGKILL; no @record."""
    return _torchrun(tmp_path_factory, "sigkill")


@pytest.fixture(scope="session")
def torchrun_harness():
    """(worker script folder, harness module) for tests that drive torchrun themselves (signals)."""
    return HERE, harness
