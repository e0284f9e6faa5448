"""Fixtures for tests/torch_distributed: each multi-process job or launcher run happens once per session."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
JOB_TIMEOUT_S = 300          # a busy 2-core machine is slow; this only catches a real hang
LAUNCH_TIMEOUT_S = 150


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_DISTRIBUTED", "TORCH_CPP", "MASTER_", "PET_", "TORCHELASTIC", "GLOO_", "NCCL_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")}
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, outdir: Path, prefix: str):
        self.rc = proc.returncode
        self.log = proc.stdout + proc.stderr
        self.outdir = outdir
        self.files = {p.name: json.loads(p.read_text()) for p in sorted(outdir.glob(f"{prefix}*.json"))}

    def rank(self, r: int, job: str) -> dict:
        return self.files.get(f"{job}.rank{r}.json", {})


def run_job(tmp_path_factory, job: str, outdir: Path | None = None, script: str = "_jobs.py", **env) -> Run:
    outdir = outdir or tmp_path_factory.mktemp(job)
    proc = _run_in_own_session([sys.executable, str(HERE / script), job, str(outdir)], JOB_TIMEOUT_S,
                               env=_clean_env(**env))
    return Run(proc, outdir, job)


def _run_in_own_session(cmd, timeout, **kw) -> subprocess.CompletedProcess:
    """Run cmd in a new session; on timeout kill the whole process group (launcher and its workers)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{cmd[2:4]} hung past {timeout}s: {err[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_launcher(tmp_path_factory, name: str, launcher_args: list[str], mode: str, **env) -> Run:
    outdir = tmp_path_factory.mktemp(name)
    cmd = [sys.executable, "-m", *launcher_args, str(HERE / "_torchrun_worker.py"), mode, str(outdir)]
    proc = _run_in_own_session(cmd, LAUNCH_TIMEOUT_S, env=_clean_env(**env), cwd=outdir)
    return Run(proc, outdir, mode)


@pytest.fixture(scope="session")
def clean_env():
    """Environment builder without distributed variables inherited from the caller."""
    return _clean_env


@pytest.fixture(scope="session")
def detail(tmp_path_factory):
    return run_job(tmp_path_factory, "detail", TORCH_DISTRIBUTED_DEBUG="DETAIL")


@pytest.fixture(scope="session")
def pair(tmp_path_factory):
    """2 ranks: data loading, checkpoints, FSDP2 + DCP save, DDP (TORCH_DISTRIBUTED_DEBUG=INFO)."""
    return run_job(tmp_path_factory, "pair", TORCH_DISTRIBUTED_DEBUG="INFO")


@pytest.fixture(scope="session")
def trio(tmp_path_factory, pair):
    """3 ranks: load the pair job's 2-rank DCP checkpoint (resharding), collectives, designed hangs."""
    return run_job(tmp_path_factory, "trio", outdir=pair.outdir)


@pytest.fixture(scope="session")
def restart_static(tmp_path_factory):
    """torchrun --max-restarts 1, static rendezvous; workers join through plain env://."""
    return run_launcher(tmp_path_factory, "restart", [
        "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1", "--monitor-interval", "0.1",
        "--rdzv-backend", "static", "--master-port", str(_free_port()), "--nnodes", "1"], "restart")


@pytest.fixture(scope="session")
def restart_prefixed(tmp_path_factory):
    """torchrun --max-restarts 1 without a port (single node); workers prefix the store per attempt."""
    return run_launcher(tmp_path_factory, "restart_prefixed", [
        "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1", "--monitor-interval", "0.1"],
        "restart_prefixed")


@pytest.fixture(scope="session")
def launch_fail(tmp_path_factory):
    """torchrun --standalone with PET_NPROC_PER_NODE=2 and OMP_NUM_THREADS=3; rank 1 exits with 7."""
    return run_launcher(tmp_path_factory, "fail", ["torch.distributed.run", "--standalone"], "fail",
                        PET_NPROC_PER_NODE="2", OMP_NUM_THREADS="3")


@pytest.fixture(scope="session")
def launch_legacy(tmp_path_factory):
    return run_launcher(tmp_path_factory, "legacy", [
        "torch.distributed.launch", "--nproc-per-node", "2", "--master-port", str(_free_port())], "legacy")


@pytest.fixture(scope="session")
def defaults_jobs(tmp_path_factory):
    """The two jobs of _jobs_defaults.py (backend=None, FSDP2 generate), each run once."""
    return {job: run_job(tmp_path_factory, job, script="_jobs_defaults.py")
            for job in ("backend_none", "fsdp2_generate")}
