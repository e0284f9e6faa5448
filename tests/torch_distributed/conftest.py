"""Fixtures for tests/torch_distributed: each multi-process job or launcher run happens once per session."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

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
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


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


def run_launcher(tmp_path_factory, name: str, launcher_args: list[str], mode: str, outdir: Path | None = None,
                 **env) -> Run:
    outdir = outdir or tmp_path_factory.mktemp(name)
    cmd = [sys.executable, "-m", *launcher_args, str(HERE / "_torchrun_worker.py"), mode, str(outdir)]
    proc = _run_in_own_session(cmd, LAUNCH_TIMEOUT_S, env=_clean_env(**env), cwd=outdir)
    return Run(proc, outdir, mode)


@pytest.fixture(scope="session")
def clean_env():
    """Environment builder without distributed variables inherited from the caller."""
    return _clean_env


# Every job and launcher run of this folder, as (builder, prerequisite run). The designed hangs of
# the jobs (15 s init timeout, 3 s group timeouts, sleeps) leave the CPU idle for about half a minute,
# so the runs the collected tests need start together on first use, three at a time, and the
# launcher runs take their CPU time while the trio job waits. Each fixture returns its own run.
def _defaults_jobs(tmp_path_factory):
    return {job: run_job(tmp_path_factory, job, script="_jobs_defaults.py", outdir=outdir)
            for job, outdir in (("backend_none", tmp_path_factory.mktemp("backend_none")),
                                ("fsdp2_generate", tmp_path_factory.mktemp("fsdp2_generate")))}


RUNS = {
    "pair": (lambda f, out: run_job(f, "pair", outdir=out(), TORCH_DISTRIBUTED_DEBUG="INFO"), None),
    "trio": (lambda f, out, pair: run_job(f, "trio", outdir=pair.outdir), "pair"),
    "detail": (lambda f, out: run_job(f, "detail", outdir=out(), TORCH_DISTRIBUTED_DEBUG="DETAIL"), None),
    "restart_static": (lambda f, out: run_launcher(f, "restart", [
        "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1", "--monitor-interval", "0.1",
        "--rdzv-backend", "static", "--master-port", str(_free_port()), "--nnodes", "1"], "restart",
        outdir=out()), None),
    "restart_prefixed": (lambda f, out: run_launcher(f, "restart_prefixed", [
        "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1", "--monitor-interval", "0.1"],
        "restart_prefixed", outdir=out()), None),
    "launch_fail": (lambda f, out: run_launcher(f, "fail", ["torch.distributed.run", "--standalone"], "fail",
                                                outdir=out(), PET_NPROC_PER_NODE="2", OMP_NUM_THREADS="3"), None),
    "launch_legacy": (lambda f, out: run_launcher(f, "legacy", [
        "torch.distributed.launch", "--nproc-per-node", "2", "--master-port", str(_free_port())], "legacy",
        outdir=out()), None),
    "defaults_jobs": (lambda f, out: _defaults_jobs(f), None),
    "fsdp1_job": (lambda f, out: run_job(f, "fsdp1", script="_jobs_defaults.py", outdir=out()), None),
}


class _Runs:
    def __init__(self, tmp_path_factory, names):
        self.factory = tmp_path_factory
        self.pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="td-run")
        self.futures = {}
        for name in RUNS:                      # RUNS order: a prerequisite is submitted first
            if name in names:
                self.submit(name)

    def submit(self, name):
        if name not in self.futures:
            build, needs = RUNS[name]
            out = (lambda n=name: self.factory.mktemp(n))
            if needs:
                self.submit(needs)
                prereq = self.futures[needs]
                self.futures[name] = self.pool.submit(lambda: build(self.factory, out, prereq.result()))
            else:
                self.futures[name] = self.pool.submit(build, self.factory, out)
        return self.futures[name]

    def get(self, name):
        return self.submit(name).result()


@pytest.fixture(scope="session")
def _runs(request, tmp_path_factory):
    """Starts every run in RUNS that a collected test needs (directly or through trio)."""
    needed = set()
    for item in request.session.items:
        needed.update(n for n in getattr(item, "fixturenames", ()) if n in RUNS)
    runs = _Runs(tmp_path_factory, needed)
    yield runs
    runs.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def detail(_runs):
    """2 ranks under TORCH_DISTRIBUTED_DEBUG=DETAIL: op and shape mismatch, DDP construction."""
    return _runs.get("detail")


@pytest.fixture(scope="session")
def pair(_runs):
    """2 ranks: data loading, checkpoints, FSDP2 + DCP save, DDP (TORCH_DISTRIBUTED_DEBUG=INFO)."""
    return _runs.get("pair")


@pytest.fixture(scope="session")
def trio(_runs):
    """3 ranks: load the pair job's 2-rank DCP checkpoint (resharding), collectives, designed hangs."""
    return _runs.get("trio")


@pytest.fixture(scope="session")
def restart_static(_runs):
    """torchrun --max-restarts 1, static rendezvous; workers join through plain env://."""
    return _runs.get("restart_static")


@pytest.fixture(scope="session")
def restart_prefixed(_runs):
    """torchrun --max-restarts 1 without a port (single node); workers prefix the store per attempt."""
    return _runs.get("restart_prefixed")


@pytest.fixture(scope="session")
def launch_fail(_runs):
    """torchrun --standalone with PET_NPROC_PER_NODE=2 and OMP_NUM_THREADS=3; rank 1 exits with 7."""
    return _runs.get("launch_fail")


@pytest.fixture(scope="session")
def launch_legacy(_runs):
    """torch.distributed.launch --nproc-per-node 2 (the deprecated launcher)."""
    return _runs.get("launch_legacy")


@pytest.fixture(scope="session")
def defaults_jobs(_runs):
    """The two jobs of _jobs_defaults.py (backend=None, FSDP2 generate), each run once."""
    return _runs.get("defaults_jobs")


@pytest.fixture(scope="session")
def fsdp1_job(_runs):
    """The fsdp1 job of _jobs_defaults.py (FSDP1 generate cases, sync_module_states with tied weights)."""
    return _runs.get("fsdp1_job")
