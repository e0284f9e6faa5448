"""Uneven per-rank batch counts: stop together with an all-reduced flag, or Join (torch 2.13.0 CPU, 2 gloo ranks).

Usage: python _stop_together_job.py OUTDIR -> OUTDIR/rank{0,1}.json. Rank 0 has 3 batches, rank 1 has 5.
1. flag loop: every iteration all_reduce(has_batch, MIN) before forward; all ranks break on 0.
2. async flag: the flag for the NEXT batch is issued with async_op=True right after this batch is fetched,
   and waited only at the top of the next iteration (one batch prefetched).
3. Join([ddp], throw_on_early_termination=True): what each rank raises and after how many steps.
For test_stop_together.py; reference data-loading.md#stop-together-without-join.
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
from torch import nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from _meet import meet  # noqa: E402

WORLD = 2
BATCHES = {0: 3, 1: 5}


def setup(rank):
    torch.manual_seed(0)
    model = DDP(nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [torch.ones(2, 4) * (i + 1) for i in range(BATCHES[rank])]
    return model, opt, data


def train_step(model, opt, x):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()


def flag_loop(rank):
    model, opt, data = setup(rank)
    it, steps = iter(data), 0
    while True:
        x = next(it, None)
        flag = torch.tensor([1 if x is not None else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)        # every rank, every iteration
        if flag.item() == 0:
            break
        train_step(model, opt, x)
        steps += 1
    return {"steps": steps, "weight_sum": round(model.module.weight.sum().item(), 6)}


def async_flag_loop(rank):
    model, opt, data = setup(rank)
    it, steps = iter(data), 0
    x = next(it, None)
    flag = torch.tensor([1 if x is not None else 0])
    work = dist.all_reduce(flag, op=dist.ReduceOp.MIN, async_op=True)
    while True:
        work.wait()                                        # the decision needs the result
        if flag.item() == 0:
            break
        nxt = next(it, None)                               # prefetch and start the next flag before compute
        flag = torch.tensor([1 if nxt is not None else 0])
        work = dist.all_reduce(flag, op=dist.ReduceOp.MIN, async_op=True)
        train_step(model, opt, x)                          # overlaps the flag's all_reduce
        steps += 1
        x = nxt
    return {"steps": steps, "weight_sum": round(model.module.weight.sum().item(), 6)}


def join_throw(rank):
    model, opt, data = setup(rank)
    steps = 0
    try:
        with Join([model], throw_on_early_termination=True):
            for x in data:
                train_step(model, opt, x)
                steps += 1
        return {"steps": steps, "raised": None}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"steps": steps, "raised": f"{type(e).__name__}: {e}"}


def main(rank, outdir):
    warnings.simplefilter("ignore")
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    meet(store, WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=30))
    r = {"torch": torch.__version__, "flag": flag_loop(rank), "async_flag": async_flag_loop(rank),
         "join_throw": join_throw(rank)}
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(main, args=(sys.argv[1],), nprocs=WORLD, join=True)
