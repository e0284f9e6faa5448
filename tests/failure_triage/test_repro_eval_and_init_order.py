"""Three failures that come from doing things in the wrong order or mode, reproduced on CPU
(2 ranks under a real torchrun, gloo, DS_ACCELERATOR=cpu; deepspeed 0.19.8, torch 2.13.0):

- ZeRO-3: an evaluation pass under torch.inference_mode(), then a training forward ->
  "Inference tensors cannot be saved for backward" (torch.no_grad() and ZeRO-2 do not fail);
- torch.distributed initialised by the script but deepspeed.init_distributed() never called ->
  deepspeed.comm's "DeepSpeed backend not set" assertion (collectives: AttributeError on None);
- DistributedDataParallel built around a CPU module on a group with no CPU backend ->
  "No backend type associated with device type cpu", raised by DDP.__init__'s first collective.

Each rank prints one JSON line `RESULT <rank> {...}`; the tests read rank 0's and rank 1's.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import _repro as R  # noqa: E402  (tests/failure_triage is on sys.path: conftest.py)

REPO = Path(__file__).resolve().parents[2]

_NO_SHM_OP = r'''
import os, sys, json, traceback
os.environ["DS_ACCELERATOR"] = "cpu"
import deepspeed.comm.torch
sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None   # skip the CPU shm op JIT build
'''

_RESULT = r'''
RES = {}
def case(name, fn):
    try:
        RES[name] = {"ok": True, "value": fn()}
    except BaseException as ex:
        RES[name] = {"ok": False, "error": f"{type(ex).__name__}: {ex}",
                     "frames": [f.name for f in traceback.extract_tb(ex.__traceback__)]}
        os.write(1, f"{type(ex).__name__}: {ex}\n".encode())
def done():
    sys.stdout.flush()   # one write() below PIPE_BUF: the 2 ranks share the pipe, lines must not interleave
    line = ("RESULT " + os.environ["RANK"] + " " + json.dumps(RES, default=str) + "\n").encode()
    assert len(line) < 4096, len(line)
    os.write(1, line)
    # every collective has finished on both ranks here; skip interpreter teardown, where a gloo
    # process group can abort the process ("terminate called ...") after the result is written
    os._exit(0)
'''

ZERO3_EVAL = _NO_SHM_OP + _RESULT + r'''
import torch, deepspeed

def run(left, stage, mode, threshold=0):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    zero = {"stage": stage}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = threshold
    cfg = {"train_batch_size": 2, "zero_optimization": zero, "zero_allow_untested_optimizer": True}
    e, *_ = deepspeed.initialize(model=m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1), config=cfg)
    x = torch.randn(1, 8)
    e.backward(e(x).sum()); e.step()                      # one training step
    e.eval()
    with (torch.inference_mode() if mode == "inference_mode" else torch.no_grad()):
        e(x)                                              # the evaluation pass
    e.train()
    left.update({"inference_params": [n for n, p in e.module.named_parameters() if p.data.is_inference()],
            "status": sorted({str(getattr(p, "ds_status", "-")) for p in e.module.parameters()}),
            "linear": torch.nn.functional.linear.__name__})
    loss = e(x).sum()                                     # next training forward
    e.backward(loss); e.step()
    return left

def case_left(name, *args):
    # keeps the state seen after the eval pass even when the training forward then fails
    out = {}
    case(name, lambda: run(out, *args))
    RES[name]["after_eval"] = out

case_left("zero3_inference_mode", 3, "inference_mode")
case_left("zero3_no_grad", 3, "no_grad")
case_left("zero3_inference_mode_persistent", 3, "inference_mode", 100000)  # the default threshold
case_left("zero2_inference_mode", 2, "inference_mode")
done()
'''

DS_COMM = _NO_SHM_OP + _RESULT + r'''
import torch, torch.distributed as tdist, deepspeed
import deepspeed.comm as dist
tdist.init_process_group("gloo")                           # the script's own initialisation
case("is_initialized_before", dist.is_initialized)
case("get_rank_before", dist.get_rank)
case("get_world_size_before", dist.get_world_size)
case("all_reduce_before", lambda: dist.all_reduce(torch.ones(1)))
case("barrier_before", lambda: dist.barrier())
case("checkpointing_configure_before", lambda: deepspeed.checkpointing.configure(None, partition_activations=False))
case("init_distributed", lambda: deepspeed.init_distributed(dist_backend="gloo"))
case("cdb", lambda: type(deepspeed.comm.comm.cdb).__name__)
case("same_default_group", lambda: deepspeed.comm.comm.cdb.get_world_group() is tdist.distributed_c10d._get_default_group())
def reduce_after():
    t = torch.ones(1)
    dist.all_reduce(t)
    return t.item()
case("all_reduce_after", reduce_after)
case("checkpointing_configure_after", lambda: deepspeed.checkpointing.configure(None, partition_activations=False))
done()
'''

DDP_CPU_MODULE = _RESULT.replace("RES = {}", "import os, sys, json, traceback\nRES = {}") + r'''
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group(backend=os.environ["PG_BACKEND"])
case("backend", dist.get_backend)
case("ddp_cpu_module", lambda: type(DDP(torch.nn.Linear(4, 4))).__name__)
case("all_reduce_cpu", lambda: dist.all_reduce(torch.ones(1)))
done()
'''


def _results(out: str) -> dict[int, dict]:
    got = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            _, rank, payload = line.split(" ", 2)
            got[int(rank)] = json.loads(payload)
    assert set(got) == {0, 1}, out[-3000:]
    return got


@pytest.fixture(scope="module")
def zero3_eval():
    rc, out = R.run_torchrun(ZERO3_EVAL, nproc=2, timeout=300)
    return rc, out, _results(out)


@pytest.fixture(scope="module")
def ds_comm():
    rc, out = R.run_torchrun(DS_COMM, nproc=2, timeout=240)
    return rc, out, _results(out)


@pytest.mark.reproduces("torch-inference-tensor-saved-for-backward")
def test_zero3_eval_under_inference_mode_breaks_the_next_training_forward(zero3_eval):
    _, out, res = zero3_eval
    for rank in (0, 1):
        r = res[rank]["zero3_inference_mode"]
        assert not r["ok"]
        assert r["error"].startswith("RuntimeError: Inference tensors cannot be saved for backward.")
        assert "zero3_linear_wrap" in r["frames"]           # deepspeed/runtime/zero/linear.py
        after = r["after_eval"]
        # the gathered (non-persistent) parameters outlived the eval pass as inference tensors
        assert after["linear"] == "zero3_linear_wrap"
        assert after["inference_params"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
        assert after["status"] == ["ZeroParamStatus.AVAILABLE"]
    R.assert_reproduced(out, "torch-inference-tensor-saved-for-backward")


def test_zero3_eval_under_no_grad_and_zero2_are_unaffected(zero3_eval):
    _, _, res = zero3_eval
    for rank in (0, 1):
        assert res[rank]["zero3_no_grad"]["ok"], res[rank]["zero3_no_grad"]
        assert res[rank]["zero3_no_grad"]["after_eval"]["inference_params"] == []
        assert res[rank]["zero2_inference_mode"]["ok"], res[rank]["zero2_inference_mode"]
        # parameters small enough to be persistent were gathered at initialize, outside inference mode
        assert res[rank]["zero3_inference_mode_persistent"]["ok"], res[rank]["zero3_inference_mode_persistent"]


@pytest.mark.reproduces("deepspeed-comm-backend-not-set")
def test_deepspeed_comm_before_init_distributed(ds_comm):
    rc, out, res = ds_comm
    msg = "AssertionError: DeepSpeed backend not set, please initialize it using init_process_group()"
    for rank in (0, 1):
        r = res[rank]
        assert r["is_initialized_before"] == {"ok": True, "value": False}
        for name in ("get_rank_before", "get_world_size_before", "checkpointing_configure_before"):
            assert r[name]["error"] == msg, (name, r[name])
        # collectives do not assert: they call a method on the missing backend object
        assert r["all_reduce_before"]["error"] == "AttributeError: 'NoneType' object has no attribute 'all_reduce'"
        assert r["barrier_before"]["error"] == "AttributeError: 'NoneType' object has no attribute 'barrier'"
    R.assert_reproduced(out, "deepspeed-comm-backend-not-set")


def test_init_distributed_wraps_the_existing_torch_group(ds_comm):
    _, _, res = ds_comm
    for rank in (0, 1):
        r = res[rank]
        assert r["init_distributed"]["ok"], r["init_distributed"]
        assert r["cdb"]["value"] == "TorchBackend"
        assert r["same_default_group"]["value"] is True
        assert r["all_reduce_after"]["value"] == 2.0
        assert r["checkpointing_configure_after"]["ok"], r["checkpointing_configure_after"]


@pytest.mark.reproduces("torch-no-backend-for-device")
def test_ddp_around_a_cpu_module_on_a_group_without_a_cpu_backend():
    rc, out = R.run_torchrun(DDP_CPU_MODULE, nproc=2, timeout=180, env=R.child_env(PG_BACKEND="cuda:gloo"))
    res = _results(out)
    for rank in (0, 1):
        r = res[rank]
        assert r["backend"]["value"] == "cuda:gloo"
        assert r["ddp_cpu_module"]["error"] == "RuntimeError: No backend type associated with device type cpu"
        # the first collective of DDP.__init__ is the parameter-shape check, before _sync_module_states
        assert r["ddp_cpu_module"]["frames"][-2:] == ["__init__", "_verify_param_shape_across_processes"]
        assert r["all_reduce_cpu"]["error"] == "RuntimeError: No backend type associated with device type cpu"
    R.assert_reproduced(out, "torch-no-backend-for-device")


def test_ddp_around_a_cpu_module_on_a_group_with_a_cpu_backend():
    rc, out = R.run_torchrun(DDP_CPU_MODULE, nproc=2, timeout=180, env=R.child_env(PG_BACKEND="cpu:gloo"))
    res = _results(out)
    for rank in (0, 1):
        assert res[rank]["ddp_cpu_module"] == {"ok": True, "value": "DistributedDataParallel"}
    assert rc == 0


@pytest.mark.parametrize("query,entry", [
    ("Inference tensors cannot be saved for backward", "torch-inference-tensor-saved-for-backward"),
    ("DeepSpeed backend not set, please initialize it using init_process_group()", "deepspeed-comm-backend-not-set"),
    ("'NoneType' object has no attribute 'all_reduce' deepspeed.comm", "deepspeed-comm-backend-not-set"),
    ("Tensors must be CUDA and dense", "torch-no-backend-for-device"),
])
def test_search_finds_the_entry_first(query, entry):
    out = subprocess.run([sys.executable, str(REPO / "sub-skills/failure-triage/scripts/triage_log.py"),
                          "--search", query], capture_output=True, text=True, timeout=60).stdout
    rows = [m.group(1) for m in re.finditer(r"^\s*\d+\.\d+\s+(\S+)\t", out, re.M)]
    assert rows and rows[0] == entry, out[:1500]
