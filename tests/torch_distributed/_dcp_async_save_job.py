"""One-rank gloo job for test_dcp_async_save_staging.py (torch 2.13.0 CPU): what dcp.async_save has copied
when it returns.

Usage: python _dcp_async_save_job.py OUTDIR -> OUTDIR/result.json. The group is joined through a FileStore
in OUTDIR (no port). A 1M-element CPU tensor is saved with async_save and changed in place right after the
call returns (as optimizer.step() would); the checkpoint is then loaded into zeros.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

N = 1_000_000


def main(outdir):
    warnings.simplefilter("ignore")
    store = dist.FileStore(os.path.join(outdir, "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    sd = {"w": torch.ones(N), "step": 7}
    fut = dcp.async_save(sd, checkpoint_id=os.path.join(outdir, "ck"))
    r = {"torch": torch.__version__, "future_type": type(fut).__name__, "done_at_return": fut.done()}
    sd["w"].add_(1.0)                                   # the training loop goes on at once
    fut.result()
    target = {"w": torch.zeros(N), "step": 0}
    dcp.load(target, checkpoint_id=os.path.join(outdir, "ck"))
    r["loaded_first_last"] = [target["w"][0].item(), target["w"][-1].item()]
    r["loaded_step"] = target["step"]
    r["live_first"] = sd["w"][0].item()
    with open(os.path.join(outdir, "result.json"), "w") as f:
        json.dump(r, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
