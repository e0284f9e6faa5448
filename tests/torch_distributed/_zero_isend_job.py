"""2-rank gloo job for test_zero_optimizer_and_isend.py (torch 2.13.0 CPU).

Usage: python _zero_isend_job.py OUTDIR  -> OUTDIR/rankN.json. Ranks meet through a FileStore in OUTDIR
(no port); the group has a short timeout so the designed failures cannot hang.

1. ZeroRedundancyOptimizer checkpointing: state_dict() before consolidate_state_dict, after it on the
   `to` rank and on the other rank; the consolidated dict loaded by a new ZeroRedundancyOptimizer on every
   rank and by a plain torch.optim.AdamW, and what ZeroRedundancyOptimizer.load_state_dict leaves in the
   dict it was given; consolidate_state_dict called on rank 0 only (rank 1 goes on to a barrier).
2. gloo isend: rank 0 isends and wait()s while rank 1 posts its recv 1 s late (how long wait() took);
   then rank 0 writes its result, isends again WITHOUT wait() and ends the process at once (os._exit);
   rank 1 posts its recv 1 s later and records what it got.
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer

from _meet import meet  # noqa: E402 - ranks meet before the short-timeout init

WORLD = 2
LATE_S = 1.0
SHORT_S = 2


def cap(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:400]}}


def zero_part(rank, outdir):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=0.1)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    r = {"local_states": len(opt.optim.state), "params": sum(1 for _ in model.parameters())}
    r["before_consolidate"] = cap(lambda: list(opt.state_dict()))
    opt.consolidate_state_dict(to=0)                       # collective: every rank calls it
    r["after_consolidate"] = cap(lambda: {"states": len(opt.state_dict()["state"]),
                                          "group_params": [len(g["params"]) for g in opt.state_dict()["param_groups"]]})
    path = os.path.join(outdir, "zero.pt")
    if rank == 0:
        torch.save(opt.state_dict(), path)
    dist.barrier()
    full = torch.load(path, weights_only=False)
    plain = torch.optim.AdamW(model.parameters(), lr=0.5)
    plain.load_state_dict(copy.deepcopy(full))
    r["plain_load"] = {"states": len(plain.state), "lr": plain.param_groups[0]["lr"]}
    opt2 = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=0.5)
    opt2.load_state_dict(full)
    r["zero_load"] = {"local_states": len(opt2.optim.state), "lr": opt2.param_groups[0]["lr"],
                      "local_lr": opt2.optim.param_groups[0]["lr"]}
    r["dict_after_zero_load"] = {"none_states": sum(v is None for v in full["state"].values()),
                                 "states": len(full["state"])}
    r["plain_load_of_that_dict"] = cap(lambda: torch.optim.AdamW(model.parameters(), lr=0.5).load_state_dict(full))
    dist.barrier()
    # the usual mistake: consolidate inside `if rank == 0:` (on a group of its own with a 2-s timeout)
    short = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=SHORT_S))
    opt_s = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=0.1,
                                    process_group=short)
    model(torch.ones(2, 4)).sum().backward()
    opt_s.step()
    t0 = time.monotonic()
    if rank == 0:
        res = cap(lambda: opt_s.consolidate_state_dict(to=0))
    else:
        res = cap(lambda: dist.barrier(group=short))
    r["rank0_only_consolidate"] = {"result": res, "seconds": round(time.monotonic() - t0, 1)}
    return r


def main(rank, outdir):
    warnings.simplefilter("ignore")
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    meet(store, WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=30))
    r = {"torch": torch.__version__, "zero": zero_part(rank, outdir)}
    # the rank-0-only consolidate above timed out on its own group; p2p runs on a fresh one
    p2p = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=30))
    dist.barrier(group=p2p)
    if rank == 0:
        t0 = time.monotonic()
        work = dist.isend(torch.arange(16.0), dst=1, group=p2p)
        r["isend_returned_s"] = round(time.monotonic() - t0, 2)
        work.wait()
        r["isend_wait_s"] = round(time.monotonic() - t0, 2)
        store.set("first_done", "1")
        store.wait(["second_posted_soon"])
        with open(os.path.join(outdir, "rank0.json"), "w") as f:
            json.dump(r, f, indent=1)
        dist.isend(torch.arange(16.0), dst=1, group=p2p)   # no wait(): the process ends right away
        os._exit(0)
    time.sleep(LATE_S)
    got = torch.zeros(16)
    dist.recv(got, src=0, group=p2p)
    r["first_recv"] = got[-3:].tolist()
    store.wait(["first_done"])
    store.set("second_posted_soon", "1")
    time.sleep(LATE_S)
    got = torch.zeros(16)
    r["second_recv"] = cap(lambda: (dist.recv(got, src=0, group=p2p), got[-3:].tolist())[1])
    with open(os.path.join(outdir, "rank1.json"), "w") as f:
        json.dump(r, f, indent=1)
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(main, args=(sys.argv[1],), nprocs=WORLD, join=True)
