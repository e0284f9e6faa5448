"""FSDP1 at world size 1 (NO_SHARD) and state-dict loads after a forward (torch 2.13.0, gloo, CPU).

Usage: python _fsdp1_noshard_local_load_job.py writeback|load WORLD OUTDIR   (each rank writes OUTDIR/<job>.rankN.json)
  writeback  FSDP(Embedding(5, 4).half(), use_orig_params=True), then Accelerate's FSDP1 upcast loop
             (flat_param.data = flat_param.data.to(float32)), then forward + backward (pytorch#151223).
             Runs as installed ("now") and with the one line of pytorch PR #154369 reverted in
             FlatParamHandle._writeback_orig_params ("old": the original parameter is passed unflattened,
             as in torch <= 2.8).
  load       model A (seed 0) and model B (seed 1), both Net (root owns `a`, child FSDP unit owns `b`);
             A's state dict under LOCAL / SHARDED / FULL; B runs a forward (or not), loads, runs a forward
             again; the output is compared with A's (loaded), B's own (stale) or neither (mixed).
Ranks meet through a FileStore in OUTDIR (no TCP port).
"""
from __future__ import annotations

import inspect
import os
import sys
import textwrap
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rank_main import run_rank  # noqa: E402 - shared rank entry of this folder's job scripts

NEW_LINE = "src = param if self.uses_sharded_strategy else param.view(-1)"
OLD_LINE = "src = param"
CPU = torch.device("cpu")   # FSDP1 refuses to run with no accelerator unless device_id names the CPU


def _old_writeback():
    """FlatParamHandle._writeback_orig_params with PR #154369's parameter line reverted (torch <= 2.8)."""
    from torch.distributed.fsdp import _flat_param as fp
    src = textwrap.dedent(inspect.getsource(fp.FlatParamHandle._writeback_orig_params))
    assert src.count(NEW_LINE) == 1, "the PR #154369 line moved: update the job"
    ns: dict = {}
    exec(compile(src.replace(NEW_LINE, OLD_LINE), fp.__file__, "exec"), vars(fp).copy(), ns)
    return ns["_writeback_orig_params"]


class Emb(nn.Module):
    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(5, 4)

    def forward(self, x):
        return self.e(x).sum()


def writeback_run(old: bool):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp._flat_param import FlatParamHandle
    saved = FlatParamHandle._writeback_orig_params
    if old:
        FlatParamHandle._writeback_orig_params = _old_writeback()
    try:
        torch.manual_seed(0)
        ref = Emb().half().e.weight.detach().float().clone()
        torch.manual_seed(0)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            model = FSDP(Emb().half(), use_orig_params=True, device_id=CPU)
        r = {"strategy": model.sharding_strategy.name,
             "switch_warning": any("switching to use `NO_SHARD`" in str(x.message) for x in w),
             "orig_param_shape_before": list(model.module.e.weight.shape)}
        # copied from accelerate/accelerator.py (FSDP1 upcast of low-precision params)
        for module in FSDP.fsdp_modules(model):
            if not module._has_params:
                continue
            param = module._flat_param
            if param.dtype != torch.float32 and param.device != torch.device("meta") and param.requires_grad:
                param.data = param.data.to(torch.float32)
                module._handle._orig_param_dtype = torch.float32
        x = torch.tensor([0, 1, 2, 3, 4])
        try:
            loss = model(x)
            loss.backward()
            r["result"] = "ok"
            r["orig_param_dtype_after"] = str(model.module.e.weight.dtype)
            if r["strategy"] == "NO_SHARD":   # the whole parameter is local: the writeback kept its values
                r["values_kept"] = torch.equal(model.module.e.weight.detach(), ref)
        except RuntimeError as e:
            r["result"] = " ".join(str(e).split())
        return r
    finally:
        FlatParamHandle._writeback_orig_params = saved


def job_writeback(rank, world):
    return {"now": writeback_run(False), "old": writeback_run(True)}


class Net(nn.Module):
    def __init__(self, wrap):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = wrap(nn.Linear(4, 2))

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _make(seed, strategy, orig=False):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    torch.manual_seed(seed)
    kw = dict(sharding_strategy=strategy, device_id=CPU, use_orig_params=orig)
    return FSDP(Net(lambda m: FSDP(m, **kw)), **kw)


def _run(model, x):
    """(model output, output of the root unit's own layer `a`)"""
    seen = []
    h = model.module.a.register_forward_hook(lambda m, i, o: seen.append(o.detach().clone()))
    with torch.no_grad():
        out = model(x).detach().clone()
    h.remove()
    return out, seen[0]


def _classify(out, loaded, stale):
    if torch.allclose(out, loaded):
        return "loaded"
    if torch.allclose(out, stale):
        return "stale"
    return "mixed"


def load_run(sd_type_name, before, strategy_name, orig=False, strict=True):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy, StateDictType
    strategy = ShardingStrategy[strategy_name]
    sd_type = StateDictType[sd_type_name]
    x = torch.arange(8.0).reshape(2, 4) / 8
    a = _make(0, strategy, orig)
    a_out, a_root = _run(a, x)
    with FSDP.state_dict_type(a, sd_type):
        sd = a.state_dict()
    b = _make(1, strategy, orig)
    b_out, b_root = _run(_make(1, strategy, orig), x)   # B's own weights, from a fresh copy
    if before == "forward":
        b(x)
    elif before == "forward_no_grad":
        with torch.no_grad():
            b(x)
    elif before == "forward_backward":
        b(x).sum().backward()
    with FSDP.state_dict_type(b, sd_type):
        b.load_state_dict(sd, strict=strict)
    out, root = _run(b, x)
    return {"output": _classify(out, a_out, b_out), "root_unit": _classify(root, a_root, b_root)}


def job_load(rank, world):
    r = {}
    strategies = ["FULL_SHARD", "SHARD_GRAD_OP"] if world > 1 else ["FULL_SHARD"]
    types = ["LOCAL_STATE_DICT", "SHARDED_STATE_DICT", "FULL_STATE_DICT"] if world > 1 else [
        "LOCAL_STATE_DICT", "FULL_STATE_DICT"]
    for strategy in strategies:
        for t in types:
            for before in ("none", "forward", "forward_no_grad", "forward_backward"):
                key = f"{strategy}/{t}/{before}"
                try:
                    r[key] = load_run(t, before, strategy)
                except Exception as e:  # noqa: BLE001 - recorded for the test
                    r[key] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    if world > 1:   # use_orig_params=True: a strict LOCAL_STATE_DICT load raises; strict=False loads
        for before in ("none", "forward"):
            for strict in (True, False):
                key = f"FULL_SHARD/LOCAL_STATE_DICT/{before}/use_orig_params/strict={strict}"
                try:
                    r[key] = load_run("LOCAL_STATE_DICT", before, "FULL_SHARD", orig=True, strict=strict)
                except Exception as e:  # noqa: BLE001 - recorded for the test
                    r[key] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return r


def _rank_main(rank, job, world, outdir):
    run_rank(globals(), rank, job, world, outdir, f"{job}.w{world}.rank{rank}.json")


if __name__ == "__main__":
    job, world, outdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    mp.spawn(_rank_main, args=(job, world, outdir), nprocs=world, join=True)
