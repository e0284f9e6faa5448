"""One-rank gloo job for test_ddp_checkpoint_unused_walk.py (torch 2.13.0 CPU).

Usage: python _ddp_ckpt_unused_job.py OUTDIR -> OUTDIR/result.json. Model: `pre` (Linear, outside any
checkpoint) then `blk` (Linear, run through torch.utils.checkpoint). Scenarios vary use_reentrant and
find_unused_parameters; each records the first backward's error text, if any. Run with
TORCH_DISTRIBUTED_DEBUG=INFO so the error names the parameter.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.pre = nn.Linear(2, 2)
        self.blk = nn.Linear(2, 2)
        self.reentrant = reentrant

    def forward(self, x):
        return checkpoint(self.blk, self.pre(x), use_reentrant=self.reentrant).sum()


def run(reentrant, find_unused):
    d = DDP(Net(reentrant), find_unused_parameters=find_unused)
    try:
        for _ in range(2):
            d(torch.ones(1, 2)).backward()
        return {"ok": True}
    except RuntimeError as e:
        return {"error": str(e)}


if __name__ == "__main__":
    out = sys.argv[1]
    dist.init_process_group("gloo", store=dist.FileStore(os.path.join(out, "store"), 1), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    res = {f"reentrant={r},find_unused={f}": run(r, f) for r in (True, False) for f in (True, False)}
    with open(os.path.join(out, "result.json"), "w") as fh:
        json.dump(res, fh)
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)
