"""2-rank gloo job for test_ddp_no_sync_scope.py (torch 2.13.0 CPU).

Usage: python _ddp_no_sync_scope_job.py OUTDIR -> OUTDIR/rankN.json. Ranks meet through a FileStore in
OUTDIR. DDP wraps Linear(1, 1, bias=False) with weight 1 and loss = output.sum(), so a rank's local
weight gradient is its input: rank 0 feeds 1, rank 1 feeds 3; the all-reduced (averaged) gradient is 2.

Scenarios: which half of a step sits inside `no_sync()` (forward, backward, both); a two-micro-batch
accumulation with only the forward inside; and a buffer that the module reassigns (not in place).
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2
X = {0: 1.0, 1: 3.0}


def fresh(pg):
    """DDP over Linear(1, 1) with a comm hook that counts the bucket all-reduces it launches."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    m = nn.Linear(1, 1, bias=False)
    nn.init.ones_(m.weight)
    d = DDP(m, process_group=pg)
    d.calls = 0

    def counting(state, bucket):
        d.calls += 1
        return allreduce_hook(state, bucket)

    d.register_comm_hook(pg, counting)
    return d


def grad_of(scenario, rank, pg):
    d = fresh(pg)
    x = torch.tensor([[X[rank]]])
    if scenario == "both_inside":
        with d.no_sync():
            loss = d(x).sum()
            loss.backward()
    elif scenario == "backward_only_inside":
        loss = d(x).sum()
        with d.no_sync():
            loss.backward()
    elif scenario == "forward_only_inside":
        with d.no_sync():
            loss = d(x).sum()
        loss.backward()
    elif scenario == "accumulate_forward_only_inside":
        with d.no_sync():
            loss = d(x).sum()
        loss.backward()                      # micro-batch 1: local only
        d(x).sum().backward()                # micro-batch 2: all-reduces the accumulated sum
    elif scenario == "accumulate_backward_only_inside":
        loss = d(x).sum()
        with d.no_sync():
            loss.backward()                  # micro-batch 1: already all-reduced
        d(x).sum().backward()
    # a collective after the step proves both ranks are still in step (no pending all-reduce)
    t = torch.ones(1)
    dist.all_reduce(t, group=pg)
    return {"grad": d.module.weight.grad.item(), "allreduces": d.calls, "after": t.item()}


class ReassignBuffer(nn.Module):
    """forward records the buffer it sees, then replaces it with a new tensor (self.buf = self.buf + 1)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(1, 1, bias=False)
        self.register_buffer("buf", torch.zeros(1))
        self.seen = []

    def forward(self, x):
        self.seen.append(self.buf.item())
        self.buf = self.buf + 1              # a new tensor object under the same name, not an in-place add
        return self.lin(x)


def reassigned_buffer(rank, pg):
    m = ReassignBuffer()
    d = DDP(m, process_group=pg)
    for step in range(2):
        if rank == 1:
            m.buf = torch.tensor([100.0 * (step + 1)])   # rank 1 diverges by reassignment
        d(torch.ones(1, 1)).sum().backward()
    return {"seen": m.seen, "final": m.buf.item()}


def cap(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:2000]}}


SCENARIOS = ("both_inside", "backward_only_inside", "forward_only_inside",
             "accumulate_forward_only_inside", "accumulate_backward_only_inside")


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    r = {}
    for scenario in SCENARIOS:
        pg = dist.new_group(timeout=datetime.timedelta(seconds=10))
        r[scenario] = cap(lambda: grad_of(scenario, rank, pg))
    pg = dist.new_group(timeout=datetime.timedelta(seconds=10))
    r["reassigned_buffer"] = cap(lambda: reassigned_buffer(rank, pg))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    dist.destroy_process_group()
    os._exit(0)                                # written: no exit-time gloo teardown can change the return code


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
