"""2-rank gloo job for test_ddp_grad_strides.py (torch 2.13.0 CPU).

Usage: python _ddp_grad_strides_job.py OUTDIR -> OUTDIR/rankN.json ({case: result}). The reducer's
stride warning is a warn-once (TORCH_WARN_ONCE); torch.set_warn_always(True) makes it fire for every
case, so all cases share one process pair, each with a fresh model and DDP wrapper. Ranks meet
through a FileStore in OUTDIR.

Two steps per case; every rank records the warnings, strides and whether .grad equals the average of
the ranks' local gradients.

Cases (Conv2d, input built NHWC and permuted to NCHW, as a channels-last data pipeline does):
  cin3_permuted           Conv2d(3, 8, 3), permuted input
  cin3_channels_last_after Conv2d(3, 8, 3), model.to(channels_last) after DDP(...)
  cin3_channels_last_after_gabv  the same with gradient_as_bucket_view=True
  cin1_permuted           Conv2d(1, 8, 3), permuted input
  cin1_permuted_contig    Conv2d(1, 8, 3), permuted input then .contiguous()
  cin1_channels_last_before Conv2d(1, 8, 3), model.to(channels_last) before DDP(...)
  linear_transposed       Linear(4, 4) fed a transposed activation
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
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2


def build(case):
    torch.manual_seed(0)
    if case.startswith("linear"):
        return nn.Linear(4, 4)
    return nn.Conv2d(1 if case.startswith("cin1") else 3, 8, 3)


def batch(case, rank):
    g = torch.Generator().manual_seed(rank + 1)
    if case.startswith("linear"):
        return torch.randn(4, 2, generator=g).t()            # [2, 4] transposed view
    cin = 1 if case.startswith("cin1") else 3
    x = torch.randn(2, 8, 8, cin, generator=g).permute(0, 3, 1, 2)   # NHWC -> NCHW view
    return x.contiguous() if case.endswith("contig") else x


CASES = ["cin3_permuted", "cin3_channels_last_after", "cin3_channels_last_after_gabv", "cin1_permuted",
         "cin1_permuted_contig", "cin1_channels_last_before", "linear_transposed"]


def rank_main(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=30))
    torch.set_warn_always(True)
    res = {c: run_case(c, rank) for c in CASES}
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)


def run_case(case, rank):
    m = build(case)
    if "channels_last_before" in case:
        m = m.to(memory_format=torch.channels_last)
    d = DDP(m, gradient_as_bucket_view=case.endswith("_gabv"))
    if "channels_last_after" in case:
        m.to(memory_format=torch.channels_last)
    x = batch(case, rank)
    out = {"param_stride": list(m.weight.stride()), "input_stride": list(x.stride()),
           "input_is_contiguous": x.is_contiguous()}
    # the grad as autograd produces it, before AccumulateGrad stores it in .grad
    seen = []
    m.weight.register_hook(lambda g: seen.append(list(g.stride())))
    # reference: the average of each rank's local gradient, computed in this process without DDP
    local = []
    for r in range(WORLD):
        ref = build(case)
        ref(batch(case, r)).sum().backward()
        local.append(ref.weight.grad)
    avg = (local[0] + local[1]) / WORLD
    out["warnings"], out["grad_matches_average"] = [], []
    for step in range(2):
        m.zero_grad(set_to_none=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d(x).sum().backward()
        out["warnings"] += [str(w.message) for w in caught]
        g = m.weight.grad
        out["grad_matches_average"].append(bool(torch.allclose(g, avg, atol=1e-5)))
        if step == 0:
            out["incoming_grad_stride"] = seen[0]
            out["stored_grad_stride"] = list(g.stride())
            # the bucket's row-major values written into the grad's own memory order
            mem = g.permute(0, 2, 3, 1).reshape(-1) if g.dim() == 4 else g.reshape(-1)
            out["grad_memory_holds_row_major_average"] = bool(torch.allclose(mem, avg.reshape(-1), atol=1e-5))
    return out


if __name__ == "__main__":
    mp.spawn(rank_main, args=(sys.argv[1],), nprocs=WORLD, join=True)
