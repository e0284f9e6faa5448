"""2-rank gloo job for test_pipelining.py: torch.distributed.pipelining on CPU (torch 2.13.0).

Usage: python _pipelining_job.py OUTDIR  -> OUTDIR/rankN.json. Ranks meet through a FileStore in OUTDIR
(no port). Each case runs on its own new group with a short timeout, so a case that breaks the P2P pairing
(a receiver failing while its peer waits) ends in an error on both ranks instead of a hang, and the next
case starts clean.

Model: two Linear(H, H) layers, one per rank (stage 0 on rank 0, stage 1 on rank 1); inputs are
[batch, seq, H], so the sequence length is dim 1 and the batch (the dim the schedule splits) is dim 0.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

WORLD = 2
H = 4


def cap(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:600]}}


def mse(out, target):
    return ((out - target) ** 2).mean()


def stage(rank, group, static_seq=None, static_mb=2, grad_meta=True, layer=None):
    from torch.distributed.pipelining import PipelineStage
    torch.manual_seed(rank)
    mod = layer or nn.Linear(H, H)
    kw = {}
    if static_seq is not None:                      # static mode: example microbatch in and out
        # requires_grad is part of the metadata: a received activation without it sends no gradient back
        kw = dict(input_args=torch.zeros(static_mb, static_seq, H, requires_grad=grad_meta and rank > 0),
                  output_args=torch.zeros(static_mb, static_seq, H, requires_grad=grad_meta))
    return PipelineStage(mod, rank, WORLD, torch.device("cpu"), group=group, **kw)


def run_steps(rank, group, shapes, sched="GPipe", n_mb=2, static_seq=None, static_mb=2, grad_meta=True):
    """One step per (batch, seq) in shapes; returns per step the output shape (last stage) or None."""
    from torch.distributed import pipelining as pp
    st = stage(rank, group, static_seq, static_mb, grad_meta)
    cls = {"GPipe": pp.ScheduleGPipe, "1F1B": pp.Schedule1F1B}[sched]
    schedule = cls(st, n_microbatches=n_mb, loss_fn=mse)
    done = []
    for b, s in shapes:
        x = torch.randn(b, s, H)
        y = torch.randn(b, s, H)
        losses = []
        if rank == 0:
            out = schedule.step(x)                   # inputs go to the first stage only
        else:
            out = schedule.step(target=y, losses=losses)   # target and losses on the last stage
        done.append({"shape": [b, s], "out": None if out is None else list(out.shape), "n_losses": len(losses)})
    return done


def construct(rank, group, sched, n_mb):
    """Only build the schedule: a check in __init__ raises before any communication."""
    from torch.distributed import pipelining as pp
    cls = {"GPipe": pp.ScheduleGPipe, "1F1B": pp.Schedule1F1B}[sched]
    cls(stage(rank, group), n_microbatches=n_mb, loss_fn=mse)
    return "constructed"


def interleaved(rank, group, n_mb):
    """ScheduleInterleaved1F1B: 4 stages, 2 per rank (rank r holds stages r and r + 2)."""
    from torch.distributed import pipelining as pp
    torch.manual_seed(0)
    stages = [pp.PipelineStage(nn.Linear(H, H), i, 2 * WORLD, torch.device("cpu"), group=group)
              for i in (rank, rank + WORLD)]
    schedule = pp.ScheduleInterleaved1F1B(stages, n_microbatches=n_mb, loss_fn=mse)
    x, y = torch.randn(n_mb, 8, H), torch.randn(n_mb, 8, H)
    losses = []
    out = schedule.step(x) if rank == 0 else schedule.step(target=y, losses=losses)
    return {"out": None if out is None else list(out.shape), "n_losses": len(losses)}


def traced(rank, group, shapes):
    """pipeline(): trace the whole model with one example microbatch, split it, build this rank's stage."""
    from torch.distributed import pipelining as pp
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(H, H), nn.Linear(H, H))
    pipe = pp.pipeline(model, mb_args=(torch.randn(2, 8, H),), split_spec={"1": pp.SplitPoint.BEGINNING})
    st = pipe.build_stage(rank, torch.device("cpu"), group)
    schedule = pp.ScheduleGPipe(st, n_microbatches=2, loss_fn=mse)
    done = []
    for b, s in shapes:
        x, y = torch.randn(b, s, H), torch.randn(b, s, H)
        out = schedule.step(x) if rank == 0 else schedule.step(target=y)
        done.append({"shape": [b, s], "out": None if out is None else list(out.shape), "stages": pipe.num_stages})
    return done


def one_case(rank, fn):
    g = dist.new_group(timeout=datetime.timedelta(seconds=8))
    res = cap(lambda: fn(g))
    try:                                            # realign both ranks before the next case
        dist.barrier()
    except Exception:  # noqa: BLE001
        pass
    return res


CASES = {
    "same_shape": lambda rank: lambda g: run_steps(rank, g, [(4, 8), (4, 8)]),
    "longer_seq": lambda rank: lambda g: run_steps(rank, g, [(4, 8), (4, 12)]),
    "shorter_seq": lambda rank: lambda g: run_steps(rank, g, [(4, 8), (4, 6)]),
    "bigger_batch": lambda rank: lambda g: run_steps(rank, g, [(4, 8), (6, 8)]),
    "uneven_split": lambda rank: lambda g: run_steps(rank, g, [(5, 8)]),
    "static_other_seq": lambda rank: lambda g: run_steps(rank, g, [(4, 12)], static_seq=8),
    "static_same": lambda rank: lambda g: run_steps(rank, g, [(4, 8), (4, 8)], static_seq=8),
    "static_no_grad_meta": lambda rank: lambda g: run_steps(rank, g, [(4, 8)], static_seq=8, grad_meta=False),
    "static_whole_batch": lambda rank: lambda g: run_steps(rank, g, [(4, 8)], static_seq=8, static_mb=4),
    "interleaved_1mb": lambda rank: lambda g: interleaved(rank, g, 1),
    "interleaved_3mb": lambda rank: lambda g: interleaved(rank, g, 3),
    "interleaved_5mb": lambda rank: lambda g: interleaved(rank, g, 5),
    "traced_same": lambda rank: lambda g: traced(rank, g, [(4, 8), (4, 8)]),
    "traced_longer": lambda rank: lambda g: traced(rank, g, [(4, 8), (4, 12)]),
    "rebuild": lambda rank: lambda g: run_steps(rank, g, [(4, 8)]) + run_steps(rank, g, [(4, 12)]),
    "1f1b_1mb_init": lambda rank: lambda g: construct(rank, g, "1F1B", 1),
    "1f1b_2mb": lambda rank: lambda g: run_steps(rank, g, [(2, 8)], sched="1F1B", n_mb=2),
    "gpipe_1mb": lambda rank: lambda g: run_steps(rank, g, [(2, 8)], sched="GPipe", n_mb=1),
}


def worker(rank, outdir, cases):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=30))
    r = {}
    for name in cases:
        r[name] = one_case(rank, CASES[name](rank))
        tmp = os.path.join(outdir, f"rank{rank}.tmp")      # after every case (a crash keeps the rest), atomically
        with open(tmp, "w") as f:
            json.dump(r, f, indent=1)
        os.replace(tmp, os.path.join(outdir, f"rank{rank}.json"))
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1], sys.argv[2:]), nprocs=WORLD, join=True)
