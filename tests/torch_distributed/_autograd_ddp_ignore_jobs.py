"""2-rank gloo jobs for test_autograd_collectives_and_ddp_ignore.py (torch 2.13.0 CPU).

Usage: python _autograd_ddp_ignore_jobs.py OUTDIR  -> OUTDIR/rankN.json. Ranks meet through a
FileStore in OUTDIR; every group has a short timeout so a designed failure cannot hang.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

from _meet import meet  # noqa: E402 - ranks meet before the short-timeout init

WORLD = 2


def run_job(script, outdir):
    """Run a 2-rank job script of this folder (python SCRIPT OUTDIR) and return its rank0/rank1 json results;
    the tests of both jobs start them this way."""
    import subprocess
    from pathlib import Path
    r = subprocess.run([sys.executable, str(script), str(outdir)], timeout=240, capture_output=True, text=True)
    if r.returncode != 0:                     # the child's own traceback, not only "exit status 1"
        raise AssertionError(f"{Path(script).name} exited {r.returncode}:\n{r.stderr[-6000:]}")
    return [json.loads((Path(outdir) / f"rank{r}.json").read_text()) for r in range(WORLD)]


def cap(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:2000]}}


def autograd_collectives(rank):
    from torch.distributed import nn as dist_nn
    import torch.distributed._functional_collectives as funcol
    out = {}
    # torch.distributed.nn.all_reduce: out of place, differentiable, deprecated in 2.13
    x = torch.tensor([rank + 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = dist_nn.all_reduce(x)
    out["nn_result"] = y.tolist()
    out["nn_input_after"] = x.tolist()
    out["nn_warning"] = [f"{m.category.__name__}: {m.message}" for m in w]
    (y * (rank + 1)).sum().backward()
    out["nn_grad"] = x.grad.tolist()          # all-reduced: d(sum_r (r+1)*y)/dx = 1 + 2 = 3
    # a bare call discards the result: t keeps its local value
    t = torch.tensor([rank + 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist_nn.all_reduce(t)
    out["bare_call_t_after"] = t.tolist()
    # plain dist.all_reduce: in place, no autograd kernel -> backward treats it as identity
    a = torch.tensor([rank + 1.0], requires_grad=True)
    z = a * 1.0
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dist.all_reduce(z)
        (z * (rank + 1)).sum().backward()
    out["plain_z"] = z.tolist()
    out["plain_grad"] = a.grad.tolist()       # local only: rank + 1
    out["plain_warning"] = [str(m.message)[:200] for m in w]
    # _functional_collectives.all_reduce: out of place, differentiable (sum)
    b = torch.tensor([rank + 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c = funcol.all_reduce(b, "sum", dist.group.WORLD)
        c = funcol.wait_tensor(c) if hasattr(funcol, "wait_tensor") else c
        out["funcol_result"] = c.tolist()
        out["funcol_input_after"] = b.tolist()
        out["funcol_backward"] = cap(lambda: ((c * (rank + 1)).sum().backward(), b.grad.tolist())[1])
    out["funcol_warning"] = [str(m.message)[:200] for m in w]
    return out


class Net(nn.Module):
    """`orig` stands in for PEFT's ModulesToSaveWrapper.original_module: trainable, never used."""

    def __init__(self, rank):
        super().__init__()
        torch.manual_seed(rank)               # different weights per rank: shows what DDP broadcasts
        self.used = nn.Linear(4, 2)
        self.orig = nn.Linear(4, 2)

    def forward(self, x):
        return self.used(x)


def ddp_steps(rank, setup, steps=3):
    from torch.nn.parallel import DistributedDataParallel as DDP
    m = Net(rank)
    if setup == "ignore_before":
        m._ddp_params_and_buffers_to_ignore = ["orig.weight", "orig.bias"]
    if setup == "helper_before":
        DDP._set_params_and_buffers_to_ignore_for_model(m, ["orig.weight", "orig.bias"])
    if setup == "freeze_before":
        m.orig.requires_grad_(False)
    d = DDP(m)                                 # find_unused_parameters=False (the default)
    if setup == "ignore_after":
        m._ddp_params_and_buffers_to_ignore = ["orig.weight", "orig.bias"]
    done = 0
    for _ in range(steps):
        d(torch.ones(3, 4)).sum().backward()
        done += 1
    return {"steps": done, "orig_w0": round(float(m.orig.weight[0, 0].detach()), 6),
            "used_w0": round(float(m.used.weight[0, 0].detach()), 6)}


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    meet(store, WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=10))
    r = {"autograd": cap(lambda: autograd_collectives(rank))}
    for setup in ("plain", "ignore_before", "helper_before", "freeze_before", "ignore_after"):
        pg = dist.new_group(timeout=datetime.timedelta(seconds=5))
        r["ddp_" + setup] = cap(lambda: ddp_steps(rank, setup))
        dist.barrier(pg) if "error" not in r["ddp_" + setup] else None
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    os._exit(0)                                # a failed DDP reducer can leave threads behind


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
