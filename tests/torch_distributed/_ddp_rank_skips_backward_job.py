"""2-rank gloo jobs for test_ddp_rank_skips_backward.py (torch 2.13.0 CPU).

Usage: python _ddp_rank_skips_backward_job.py OUTDIR -> OUTDIR/rankN.json, one entry per scenario. Ranks
meet through a FileStore in OUTDIR; each scenario gets its own group (new_group, 4 s timeout) because a
failed reducer or a timed-out collective leaves its group unusable, and the designed hangs end there.

Gradient scenarios: DDP(Linear(1, 1, bias=False)) with weight 1 on both ranks and loss = output.sum(), so
a rank's local weight gradient is its input. Rank 0 feeds 1, 2, 3 at iterations 0, 1, 2; rank 1 feeds
100, 200, 300. Correct DDP gradients are the means 50.5, 101, 151.5. At iteration 0 rank 1 has "no
loss" and builds it in the way the scenario names; gradients are recorded per iteration (no optimizer
step, grads zeroed after each read).
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2
INPUTS = {0: [1.0, 2.0, 3.0], 1: [100.0, 200.0, 300.0]}


def cap(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:3000]}}


class TwoHeads(nn.Module):
    """Trunk + head_a + head_b; forward returns both head outputs (the multi-task case)."""

    def __init__(self, skip_a=False):
        super().__init__()
        self.trunk = nn.Linear(1, 1, bias=False)
        self.head_a = nn.Linear(1, 1, bias=False)
        self.head_b = nn.Linear(1, 1, bias=False)
        for p in self.parameters():
            nn.init.ones_(p)
        self.skip_a = skip_a

    def forward(self, x):
        h = self.trunk(x)
        b = self.head_b(h)
        if self.skip_a:
            return None, b
        return self.head_a(h), b


def grad_steps(rank, scenario, pg):
    """Three iterations; rank 1 has no loss at iteration 0. Returns per-iteration results."""
    find_unused = scenario.endswith("_find_unused")
    two_heads = scenario.startswith("head_")
    steps = []
    if two_heads:
        m = TwoHeads()
    else:
        m = nn.Linear(1, 1, bias=False)
        nn.init.ones_(m.weight)
    d = DDP(m, find_unused_parameters=find_unused, process_group=pg)
    for it, xv in enumerate(INPUTS[rank]):
        x = torch.tensor([[xv]])

        def one():
            no_loss = rank == 1 and it == 0
            if two_heads:
                if scenario.startswith("head_skipped") and no_loss:
                    m.skip_a = True                       # head A not run in forward on this rank
                a, b = d(x)
                m.skip_a = False
                loss = b.sum() if no_loss else a.sum() + b.sum()   # head A's output left out of the loss
                loss.backward()
                g = {n: (None if p.grad is None else p.grad.item()) for n, p in m.named_parameters()}
                m.zero_grad(set_to_none=True)
                return g
            out = d(x)
            if scenario.startswith("skip_flag"):
                flag = torch.tensor([0.0 if no_loss else 1.0])
                dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=pg)       # every rank learns that one has no loss
                if flag.item() == 0.0:
                    m.zero_grad(set_to_none=True)
                    return "skipped on every rank"
                loss = out.sum()
            elif no_loss and scenario.startswith("detached"):
                loss = torch.zeros((), requires_grad=True)        # a "zero loss" made by hand: no graph to the model
            elif no_loss and scenario.startswith("zero_from_output"):
                loss = out.sum() * 0                               # zero value, connected to the parameters
            elif no_loss and scenario.startswith("skip_backward"):
                m.zero_grad(set_to_none=True)
                return None                                       # this rank alone skips backward
            else:
                loss = out.sum()
            loss.backward()
            g = None if m.weight.grad is None else m.weight.grad.item()
            m.zero_grad(set_to_none=True)
            return g

        t0 = time.monotonic()
        r = cap(one)
        r["seconds"] = round(time.monotonic() - t0, 1)
        steps.append(r)
        if "error" in r:
            break
    return steps


def unused_message(rank, pg):
    """An unused parameter, no TORCH_DISTRIBUTED_DEBUG: the error text of the second iteration."""
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))       # params 0, 1 used; 2, 3 (the second layer) not

    class Used(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = m

        def forward(self, x):
            return self.seq[0](x)

    used = Used()
    d = DDP(used, process_group=pg)
    res = [{"trainable_names": [n for n, p in used.named_parameters() if p.requires_grad]}]
    for _ in range(2):
        res.append(cap(lambda: d(torch.ones(1, 2)).sum().backward()))
    return res


def buffer_sync_pattern(rank, pg):
    """Which forwards through the wrapper broadcast rank 0's buffers. Before each forward rank 0 sets
    its BatchNorm running_mean to k and rank 1 to 100 + k; after it rank 1 reads it back: k means the
    forward synced. eval() mode so the forward itself does not update the running stats."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).eval()
    d = DDP(m, process_group=pg)
    bn = m[1]
    plan = [("train_1", "grad"), ("val_1", "no_grad"), ("val_2", "no_grad"), ("val_3", "no_grad"),
            ("train_2", "grad"), ("train_3", "grad"), ("accum_1", "no_sync"), ("accum_2", "no_sync"),
            ("train_4", "grad")]
    seen = {}
    for k, (name, mode) in enumerate(plan, start=1):
        with torch.no_grad():
            bn.running_mean.fill_(k if rank == 0 else 100 + k)
        x = torch.ones(3, 2)
        if mode == "no_grad":
            with torch.no_grad():
                d(x)
        elif mode == "no_sync":
            with d.no_sync():
                d(x).sum().backward()
        else:
            d(x).sum().backward()
        seen[name] = "synced" if bn.running_mean[0].item() == k else "local"
    return seen


def uneven_no_grad_validation(rank, pg):
    """Rank 0 runs 3 no_grad forwards, rank 1 one, then both train 2 steps (module with buffers)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    d = DDP(m, process_group=pg)
    d(torch.ones(4, 2)).sum().backward()
    m.eval()
    with torch.no_grad():
        for _ in range(3 if rank == 0 else 1):
            d(torch.ones(4, 2))
    m.train()
    for _ in range(2):
        d(torch.randn(4, 2)).sum().backward()
    t = torch.tensor([1.0])
    dist.all_reduce(t, group=pg)
    return {"trained": 2, "after": t.item()}


SCENARIOS = ("detached_default", "detached_find_unused", "skip_backward_default", "zero_from_output", "skip_flag",
             "head_ignored_default", "head_ignored_find_unused", "head_skipped_find_unused", "unused_message",
             "buffer_sync_pattern", "uneven_no_grad_validation")


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    r = {}
    for scenario in SCENARIOS:
        pg = dist.new_group(timeout=datetime.timedelta(seconds=4))
        if scenario == "unused_message":
            r[scenario] = unused_message(rank, pg)
        elif scenario == "buffer_sync_pattern":
            r[scenario] = cap(lambda: buffer_sync_pattern(rank, pg))
        elif scenario == "uneven_no_grad_validation":
            r[scenario] = cap(lambda: uneven_no_grad_validation(rank, pg))
        else:
            r[scenario] = grad_steps(rank, scenario, pg)
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    os._exit(0)                                # a failed reducer can leave threads behind


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
