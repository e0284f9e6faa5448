"""Reproduce OS-level failures on CPU and check the catalog recognises the exact text.

Signals are delivered for real: a torchrun worker SIGKILLs / SIGSEGVs / SIGBUSes itself while
its peer waits in a gloo collective (what the OOM killer, a native crash or an exhausted
/dev/shm do), DataLoader workers die by SIGBUS and SIGKILL, the shell reports a killed child,
and one interpreter hits the open-files limit, a taken port and a full device (/dev/full).
NCCL and CUDA messages cannot be produced on a CPU-only machine; their entries cite sources.
"""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest




import _repro as R  # noqa: E402  (tests/failure_triage is on sys.path: conftest.py)

_DIE = """
import ctypes, datetime, os, signal, time, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
dist.barrier()
if dist.get_rank() == 1:
    {how}
dist.all_reduce(torch.ones(2))
"""
DEATHS = {
    "sigkill": "os.kill(os.getpid(), signal.SIGKILL)",
    "sigsegv": "ctypes.string_at(0)",
    "sigbus": "os.kill(os.getpid(), signal.SIGBUS)",
}
DEATH_PARAMS = [
    pytest.param("sigkill", marks=pytest.mark.reproduces("os-sigkill-oom-killer", "torch-gloo-peer-connection-lost"), id="sigkill"),
    pytest.param("sigsegv", marks=pytest.mark.reproduces("os-segfault"), id="sigsegv"),
    pytest.param("sigbus", marks=pytest.mark.reproduces("os-sigbus-shared-memory"), id="sigbus"),
]

OS_CASES = R.CASE_PRELUDE + r'''
import os, resource, signal, socket
import torch
from torch.utils.data import DataLoader, Dataset

class DiesInWorker(Dataset):
    def __init__(self, sig):
        self.sig = sig
    def __len__(self):
        return 4
    def __getitem__(self, i):
        os.kill(os.getpid(), self.sig)
        return i

case("dataloader_sigbus", lambda: list(DataLoader(DiesInWorker(signal.SIGBUS), num_workers=1)))
case("dataloader_sigkill", lambda: list(DataLoader(DiesInWorker(signal.SIGKILL), num_workers=1)))

def port_taken():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    t = socket.socket(); t.bind(("127.0.0.1", s.getsockname()[1]))
case("port_taken", port_taken)
def disk_full():
    with open("/dev/full", "w") as f:
        f.write("checkpoint bytes")
case("disk_full", disk_full)
case("torch_save_disk_full", lambda: torch.save({"w": torch.zeros(1000)}, "/dev/full"))
def fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    files = []
    try:
        for _ in range(200):
            files.append(open(os.devnull))
    finally:
        for f in files:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
case("fd_limit", fd_limit)
'''
OS_PARAMS = [
    pytest.param("dataloader_sigbus", marks=pytest.mark.reproduces("torch-dataloader-bus-error-shm", "torch-dataloader-worker-killed"), id="dataloader_sigbus"),
    pytest.param("dataloader_sigkill", marks=pytest.mark.reproduces("torch-dataloader-worker-killed"), id="dataloader_sigkill"),
    pytest.param("port_taken", marks=pytest.mark.reproduces("os-address-in-use"), id="port_taken"),
    pytest.param("disk_full", marks=pytest.mark.reproduces("os-no-space-left"), id="disk_full"),
    pytest.param("torch_save_disk_full", marks=pytest.mark.reproduces("torch-save-file-write-failed"), id="torch_save_disk_full"),
    pytest.param("fd_limit", marks=pytest.mark.reproduces("os-too-many-open-files"), id="fd_limit"),
]

SHELL = 'sh -c "kill -9 \\$\\$"; sh -c "kill -BUS \\$\\$"; sh -c "kill -SEGV \\$\\$"; true'


def _death(name: str) -> tuple[int, str]:
    how = DEATHS[name]
    return R.run_torchrun(_DIE.format(how=how), nproc=2, timeout=300, extra_args=["--monitor-interval=1"])


def _shell() -> tuple[int, str]:
    proc = subprocess.run(["bash", "-c", SHELL], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def runs():
    with ThreadPoolExecutor(max_workers=3) as pool:
        deaths = {name: pool.submit(_death, name) for name in DEATHS}
        cases = pool.submit(R.run_python, OS_CASES, 240)
        shell = pool.submit(_shell)
        return {"deaths": {n: f.result() for n, f in deaths.items()},
                "cases": R.split_cases(cases.result()[1]), "shell": shell.result()}


def _ids(request) -> tuple[str, ...]:
    """The catalog ids a test provokes: the arguments of its `reproduces` mark (one source of truth)."""
    return request.node.get_closest_marker("reproduces").args


@pytest.mark.parametrize("name", DEATH_PARAMS)
def test_worker_killed_by_signal(runs, name, request):
    ids = _ids(request)
    rc, out = runs["deaths"][name]
    assert rc != 0, out[-3000:]
    for entry_id in ids:
        R.assert_reproduced(out, entry_id)


@pytest.mark.parametrize("name", OS_PARAMS)
def test_os_case(runs, name, request):
    ids = _ids(request)
    text = runs["cases"].get(name)
    assert text is not None, f"case {name} did not run; cases seen: {sorted(runs['cases'])}"
    assert "NOERROR" not in text.splitlines(), text[-2000:]
    for entry_id in ids:
        R.assert_reproduced(text, entry_id)


@pytest.mark.reproduces("os-shell-killed", "os-sigbus-shared-memory", "os-segfault")
def test_shell_reports_signalled_child(runs, request):
    _, out = runs["shell"]
    for entry_id in _ids(request):
        R.assert_reproduced(out, entry_id)
