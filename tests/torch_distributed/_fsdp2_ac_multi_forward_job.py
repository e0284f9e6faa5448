"""FSDP2 + activation checkpointing, two forwards before one backward (torch 2.13.0, 2 gloo ranks, CPU).

Usage: python _fsdp2_ac_multi_forward_job.py OUTDIR -> OUTDIR/rank{0,1}.json.
Model: 3 layers; each layer runs `checkpoint(block, use_reentrant=False)` where block = fc1 -> relu -> fc2,
with fully_shard(block.fc1) (a separately sharded child inside the checkpointed region), fully_shard(layer),
fully_shard(root). Step: a = m(x); b = m(2x); (a * b).sum().backward().
Each scenario builds a fresh model. "old" scenarios install, before fully_shard registers its hooks, a
_pre_forward that returns early in TrainingState.PRE_BACKWARD (what releases before the re-unshard check
did); the pinned method is restored afterwards. Each scenario records "ok" or the error text.
Ranks meet through a FileStore (no TCP port).
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState
from torch.utils.checkpoint import checkpoint

WORLD = 2
PINNED = FSDPState._pre_forward


def old_pre_forward(self, module, args, kwargs):
    """The early return of releases before the fix: trust the pre-backward hook to have unsharded."""
    if self._training_state == TrainingState.PRE_BACKWARD:
        return self._cast_forward_inputs(args, kwargs)
    return PINNED(self, module, args, kwargs)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Layer(nn.Module):
    def __init__(self, ac):
        super().__init__()
        self.block = Block()
        self.ac = ac

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False) if self.ac else self.block(x)


def build(ac=True, shard_child=True, reshard=None):
    torch.manual_seed(0)
    m = nn.Sequential(*[Layer(ac) for _ in range(3)])
    kw = {} if reshard is None else {"reshard_after_forward": reshard}
    for layer in m:
        if shard_child:
            fully_shard(layer.block.fc1, **kw)
        fully_shard(layer, **kw)
    fully_shard(m, **kw)
    return m


def step(m, forwards=2):
    x = torch.ones(2, 8)
    outs = [m(x * (i + 1)) for i in range(forwards)]
    loss = outs[0] * outs[1] if forwards == 2 else outs[0]
    loss.sum().backward()
    return "ok"


SCENARIOS = {
    "pinned": dict(),
    "old": dict(old=True),
    "old_one_forward": dict(old=True, forwards=1),
    "old_no_ac": dict(old=True, ac=False),
    "old_no_child_shard": dict(old=True, shard_child=False),
    "old_reshard_after_forward_false": dict(old=True, reshard=False),
}


def worker(rank, outdir):
    res = {"rank": rank}
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD)
    for name, sc in SCENARIOS.items():
        sc = dict(sc)
        old, forwards = sc.pop("old", False), sc.pop("forwards", 2)
        try:
            FSDPState._pre_forward = old_pre_forward if old else PINNED
            m = build(**sc)
            FSDPState._pre_forward = PINNED
            res[name] = step(m, forwards)
        except Exception as e:  # noqa: BLE001
            res[name] = f"{type(e).__name__}: {e}"[:400]
            res[name + "_tb"] = traceback.format_exc()[-800:]
        finally:
            FSDPState._pre_forward = PINNED
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    mp.start_processes(worker, args=(sys.argv[1],), nprocs=WORLD, start_method="fork", join=True)
