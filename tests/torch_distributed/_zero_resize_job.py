"""ZeroRedundancyOptimizer: save at 2 ranks, load at 3 (torch 2.13.0 CPU, gloo) for test_zero_resize.py.

Usage: python _zero_resize_job.py OUTDIR -> OUTDIR/save_rank{0,1}.json and load_rank{0,1,2}.json.
Phase 1 (2 ranks): one AdamW step, consolidate_state_dict(to=0) on both ranks, rank 0 saves the full dict;
each rank also saves its inner optimizer's dict (optimizer.optim.state_dict(), the local shard).
Phase 2 (3 ranks): a fresh ZeroRedundancyOptimizer over the same model loads the full dict on every rank;
each rank reports which parameters it holds state for and whether that state equals the saved one; the
same dict object is then loaded by a second ZeroRedundancyOptimizer; and rank 0's 2-rank local shard is
loaded into a 3-rank ZeroRedundancyOptimizer to show what that file holds. Ranks meet through a FileStore.
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer

from _meet import meet  # noqa: E402


def cap(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:300]}}


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4))   # 6 parameter tensors


def held(opt, model):
    """global parameter index -> exp_avg list, for the parameters this rank's inner optimizer has state for"""
    idx = {id(p): i for i, p in enumerate(model.parameters())}
    return {idx[id(p)]: s["exp_avg"].flatten().tolist() for p, s in opt.optim.state.items()}


def save(rank, world, outdir):
    model = make_model()
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=0.1)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    local = opt.optim.state_dict()
    torch.save(local, os.path.join(outdir, f"local{rank}.pt"))
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        full = opt.state_dict()
        torch.save(full, os.path.join(outdir, "full.pt"))
        torch.save({i: v for i, v in enumerate(model.parameters())}, os.path.join(outdir, "params.pt"))
    dist.barrier()
    return {"local_states": len(local["state"]), "local_keys": sorted(local["state"]),
            "held": held(opt, model)}


def load(rank, world, outdir):
    model = make_model()
    full = torch.load(os.path.join(outdir, "full.pt"), weights_only=False)
    saved = {int(k): v["exp_avg"].flatten().tolist() for k, v in full["state"].items()}
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=0.5)
    opt.load_state_dict(full)
    mine = held(opt, model)
    r = {"held_ids": sorted(mine), "matches_saved": all(mine[i] == saved[i] for i in mine),
         "lr": opt.optim.param_groups[0]["lr"]}
    opt2 = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=0.5)
    r["second_zero_load_same_dict"] = cap(lambda: (opt2.load_state_dict(full), sorted(held(opt2, model)))[1])
    # the mistake: rank 0's 2-rank local shard saved as if it were the checkpoint
    local0 = torch.load(os.path.join(outdir, "local0.pt"), weights_only=False)
    opt3 = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=0.5)
    r["local_shard_load"] = cap(lambda: (opt3.load_state_dict(copy.deepcopy(local0)), sorted(held(opt3, model)))[1])
    # a step after the resize works on every rank
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    r["step_after_load"] = True
    return r


def main(rank, world, phase, outdir):
    warnings.simplefilter("ignore")
    store = dist.FileStore(os.path.join(outdir, f"store_{phase}"), world)
    meet(store, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
    r = {"torch": torch.__version__, "world": world}
    r.update((save if phase == "save" else load)(rank, world, outdir))
    with open(os.path.join(outdir, f"{phase}_rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    os._exit(0)


if __name__ == "__main__":
    out = sys.argv[1]
    mp.spawn(main, args=(2, "save", out), nprocs=2, join=True)
    mp.spawn(main, args=(3, "load", out), nprocs=3, join=True)
