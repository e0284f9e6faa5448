"""Autograd collectives, DDP's ignore list and autocast in DataParallel's threads (torch 2.13.0 CPU).

The 2-rank gloo jobs live in _autograd_ddp_ignore_jobs.py (mp.spawn, FileStore); the
DataParallel test runs torch's own parallel_apply in threads on CPU with the accelerator
lookups stubbed (parallel_apply asserts an accelerator exists; the autocast hand-off between
threads, which is what is tested, does not depend on the device).
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path
from unittest import mock

import pytest
import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - shared with the sibling job's test


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_autograd_ddp_ignore_jobs.py", tmp_path_factory.mktemp("autograd_ddp_ignore"))


def test_import_torch_distributed_does_not_import_its_nn_subpackage():
    code = ("import torch, torch.distributed as dist; a = hasattr(dist, 'nn'); "
            "import torch.distributed.nn; print(a, hasattr(dist, 'nn'), hasattr(dist.nn, 'all_reduce'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "True", "True"]


def test_dist_nn_all_reduce_is_out_of_place_differentiable_and_deprecated(job):
    for rank, r in enumerate(job):
        a = r["autograd"]["ok"]
        assert a["nn_result"] == [3.0]                     # 1 + 2
        assert a["nn_input_after"] == [rank + 1.0]         # input untouched
        assert a["bare_call_t_after"] == [rank + 1.0]      # bare call: reduced value discarded
        assert a["nn_grad"] == [3.0]                       # backward all-reduces the gradient
        assert any(w.startswith("FutureWarning: torch.distributed.nn.functional.all_reduce is deprecated, "
                                "use torch.distributed._functional_collectives.all_reduce") for w in a["nn_warning"])


def test_plain_all_reduce_is_in_place_and_backward_treats_it_as_identity(job):
    for rank, r in enumerate(job):
        a = r["autograd"]["ok"]
        assert a["plain_z"] == [3.0]                       # in place
        assert a["plain_grad"] == [rank + 1.0]             # local gradient only
        assert any("c10d::allreduce_: an autograd kernel was not registered" in w for w in a["plain_warning"])


def test_functional_collectives_all_reduce_is_out_of_place_and_differentiable(job):
    for rank, r in enumerate(job):
        a = r["autograd"]["ok"]
        assert a["funcol_result"] == [3.0] and a["funcol_input_after"] == [rank + 1.0]
        assert a["funcol_backward"] == {"ok": [3.0]}
        assert a["funcol_warning"] == []


def test_ddp_params_and_buffers_to_ignore_read_at_construction(job):
    for r in job:
        assert "Expected to have finished reduction in the prior iteration" in r["ddp_plain"]["error"]["msg"]
        assert r["ddp_ignore_before"]["ok"]["steps"] == 3
        assert r["ddp_helper_before"]["ok"]["steps"] == 3
        assert r["ddp_freeze_before"]["ok"]["steps"] == 3
        # set after DDP(...) is built: too late, the same error
        assert "Expected to have finished reduction" in r["ddp_ignore_after"]["error"]["msg"]
    # ignored parameters are not broadcast at construction (ranks keep their own values);
    # frozen ones still are (rank 0's value everywhere)
    assert job[0]["ddp_ignore_before"]["ok"]["orig_w0"] != job[1]["ddp_ignore_before"]["ok"]["orig_w0"]
    assert job[0]["ddp_freeze_before"]["ok"]["orig_w0"] == job[1]["ddp_freeze_before"]["ok"]["orig_w0"]
    assert job[0]["ddp_ignore_before"]["ok"]["used_w0"] == job[1]["ddp_ignore_before"]["ok"]["used_w0"]


class _Probe(nn.Module):
    def forward(self, x):
        return {"enabled": torch.is_autocast_enabled("cpu"), "dtype": torch.get_autocast_dtype("cpu"),
                "thread": threading.current_thread().name, "mm": (x @ x).dtype}


class _Stream:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _parallel_apply_on_cpu(outer, n=2):
    pa = sys.modules["torch.nn.parallel.parallel_apply"]
    real = torch.is_autocast_enabled
    x = torch.ones(2, 2)
    with mock.patch.object(torch.accelerator, "is_available", lambda: True), \
         mock.patch.object(torch.accelerator, "current_accelerator", lambda: torch.device("cpu")), \
         mock.patch.object(torch.accelerator, "current_stream", lambda d=None: _Stream()), \
         mock.patch.object(torch.accelerator, "device_index", lambda d: contextlib.nullcontext()), \
         mock.patch.object(pa, "_get_device_index", lambda x, optional=False: 0), \
         mock.patch.object(pa.torch, "is_autocast_enabled", lambda *a: real(*a) if a else real("cpu")):
        with outer:
            return pa.parallel_apply([_Probe() for _ in range(n)], [(x,)] * n, devices=[0] * n)


def test_parallel_apply_reenters_autocast_enabled_but_not_its_dtype():
    import torch.nn.parallel.parallel_apply  # noqa: F401  (module, not the function)
    off = _parallel_apply_on_cpu(contextlib.nullcontext())
    assert [o["enabled"] for o in off] == [False, False] and off[0]["mm"] == torch.float32
    fp16 = _parallel_apply_on_cpu(torch.autocast("cpu", dtype=torch.float16))
    assert all(o["thread"] != threading.current_thread().name for o in fp16)   # replicas run in threads
    assert [o["enabled"] for o in fp16] == [True, True]
    # the outer dtype is not carried: each thread gets the device's default (CPU: bfloat16)
    assert [o["mm"] for o in fp16] == [torch.bfloat16, torch.bfloat16]
    # one replica (a one-chunk batch) runs in the calling thread: the outer dtype holds
    one = _parallel_apply_on_cpu(torch.autocast("cpu", dtype=torch.float16), n=1)
    assert one[0]["thread"] == threading.current_thread().name
    assert one[0]["enabled"] is True and one[0]["mm"] == torch.float16


def test_autocast_state_and_dtype_are_per_thread_cuda_default_float16():
    seen = {}
    torch.set_autocast_dtype("cuda", torch.bfloat16)
    try:
        t = threading.Thread(target=lambda: seen.update(dtype=torch.get_autocast_dtype("cuda")))
        t.start()
        t.join()
    finally:
        torch.set_autocast_dtype("cuda", torch.float16)
    assert seen["dtype"] == torch.float16
    with torch.autocast("cpu"):
        assert torch.is_autocast_enabled() is False        # no argument reads the CUDA flag only
        assert torch.is_autocast_enabled("cpu") is True


_DDP_ONLY = """
import datetime, faulthandler, os, sys, torch, torch.distributed as dist, torch.nn as nn
faulthandler.enable()
rank = int(sys.argv[1])
store = dist.FileStore(sys.argv[2], 2)
dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=20))
print("level", dist.get_debug_level(), flush=True)
from torch.nn.parallel import DistributedDataParallel as DDP
DDP(nn.Linear(2, 2))
print("constructed", flush=True)
os._exit(0)
"""


@pytest.mark.parametrize("level", ["DETAIL", "INFO"])
def test_fresh_ddp_construction_under_debug_level(tmp_path, level, clean_env):
    """ddp.md / catalog: DETAIL's SIGSEGV needs nothing but DDP construction in a fresh gloo job."""
    env = clean_env(TORCH_DISTRIBUTED_DEBUG=level)
    store = str(tmp_path / "store")
    procs = [subprocess.Popen([sys.executable, "-c", _DDP_ONLY, str(r), store], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert f"level DebugLevel.{level}" in out, out
        if level == "DETAIL":
            assert p.returncode == -11 and "constructed" not in out, out      # SIGSEGV
            assert "_ddp_init_helper" in out, out                              # faulthandler stack
        else:
            assert p.returncode == 0 and "constructed" in out, out
