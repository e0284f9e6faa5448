"""2-rank gloo job for test_gloo_futures.py (torch 2.13.0 CPU): which async Work objects give a future.

Usage: python _gloo_futures_job.py OUTDIR  -> OUTDIR/rankN.json. Ranks meet through a FileStore in
OUTDIR (no port); the group has a short timeout so a failure cannot hang.

Every op is issued with async_op=True (p2p: isend/irecv, batch_isend_irecv). For each, the job records
the Work's class, what work.get_future() did (a future and what fut.wait() returned, or the exception),
and whether work.wait() then completed with the right values. Then it runs the two workarounds for the
ops without a future: wait() wrapped in a completed Future, and all_reduce (which has one) + a slice.
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

from _meet import meet  # noqa: E402 - ranks meet before the short-timeout init

WORLD = 2


def short(v):
    if isinstance(v, torch.Tensor):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [short(x) for x in v]
    if v is None or isinstance(v, (bool, int, float)):
        return v
    return repr(v)[:200]


def ops(rank):
    """name -> () -> (work, check) where check() returns the op's output after completion."""
    r1 = rank + 1.0

    def all_reduce():
        t = torch.tensor([r1, 4 * r1])
        return dist.all_reduce(t, async_op=True), lambda: t.tolist()

    def broadcast():
        t = torch.tensor([r1])
        return dist.broadcast(t, src=0, async_op=True), lambda: t.tolist()

    def reduce():
        t = torch.tensor([r1])
        return dist.reduce(t, dst=0, async_op=True), lambda: t.tolist()

    def all_gather():
        outs = [torch.zeros(1) for _ in range(WORLD)]
        return dist.all_gather(outs, torch.tensor([r1]), async_op=True), lambda: [o.tolist() for o in outs]

    def all_gather_into_tensor():
        out = torch.zeros(WORLD)
        return dist.all_gather_into_tensor(out, torch.tensor([r1]), async_op=True), lambda: out.tolist()

    def all_gather_single():
        out = torch.zeros(WORLD)
        return dist.all_gather_single(out, torch.tensor([r1]), async_op=True), lambda: out.tolist()

    def reduce_scatter():
        out = torch.zeros(1)
        ins = [torch.tensor([r1]), torch.tensor([10 * r1])]
        return dist.reduce_scatter(out, ins, async_op=True), lambda: out.tolist()

    def reduce_scatter_tensor():
        out = torch.zeros(1)
        return dist.reduce_scatter_tensor(out, torch.tensor([r1, 10 * r1]), async_op=True), lambda: out.tolist()

    def reduce_scatter_single():
        out = torch.zeros(1)
        return dist.reduce_scatter_single(out, torch.tensor([r1, 10 * r1]), async_op=True), lambda: out.tolist()

    def all_to_all_single():
        out = torch.zeros(WORLD)
        return dist.all_to_all_single(out, torch.tensor([r1, 10 * r1]), async_op=True), lambda: out.tolist()

    def all_to_all():
        outs = [torch.zeros(1) for _ in range(WORLD)]
        ins = [torch.tensor([r1]), torch.tensor([10 * r1])]
        return dist.all_to_all(outs, ins, async_op=True), lambda: [o.tolist() for o in outs]

    def gather():
        outs = [torch.zeros(1) for _ in range(WORLD)] if rank == 0 else None
        return dist.gather(torch.tensor([r1]), outs, dst=0, async_op=True), \
            lambda: [o.tolist() for o in outs] if outs else None

    def scatter():
        out = torch.zeros(1)
        ins = [torch.tensor([1.0]), torch.tensor([2.0])] if rank == 0 else None
        return dist.scatter(out, ins, src=0, async_op=True), lambda: out.tolist()

    def barrier():
        return dist.barrier(async_op=True), lambda: None

    def isend_irecv():
        t = torch.tensor([r1])
        w = dist.isend(t, dst=1) if rank == 0 else dist.irecv(t, src=0)
        return w, lambda: t.tolist()

    def batch_isend_irecv():
        send, recv = torch.tensor([r1]), torch.zeros(1)
        peer = 1 - rank
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)])
        return works[0], lambda: (works[1].wait(), recv.tolist())[1]   # probe the isend, then wait the irecv once
        # (a second wait() on the already-waited isend was followed by a hang in the next barrier here)

    return {f.__name__: f for f in (all_reduce, broadcast, reduce, all_gather, all_gather_into_tensor,
                                    all_gather_single, reduce_scatter, reduce_scatter_tensor,
                                    reduce_scatter_single, all_to_all_single, all_to_all, gather, scatter,
                                    barrier, batch_isend_irecv, isend_irecv)}


def probe(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        work, result = make()
    row = {"work_type": type(work).__name__}
    try:
        fut = work.get_future()
        row["future"] = {"type": type(fut).__name__, "wait": short(fut.wait())}
    except Exception as e:  # noqa: BLE001 - the error is the result
        row["future"] = {"error": {"type": type(e).__name__, "msg": str(e).split("\n")[0][:300]}}
    row["work_wait"] = work.wait()
    row["result"] = short(result())
    return row


def future_or_wait(work, result):
    """The workaround: the Work's own future where it has one, else wait() and a completed Future."""
    try:
        return work.get_future(), "get_future"
    except RuntimeError:
        work.wait()
        fut = torch.futures.Future()
        fut.set_result(result)
        return fut, "wait"


def workarounds(rank):
    r1 = rank + 1.0
    out = torch.zeros(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        work = dist.reduce_scatter_tensor(out, torch.tensor([r1, 10 * r1]), async_op=True)
    fut, how = future_or_wait(work, out)
    chained = fut.then(lambda f: f.value() * 2).wait()
    res = {"wrapped": {"how": how, "value": fut.wait().tolist(), "then_x2": chained.tolist()}}
    # all_reduce has a future on gloo; each rank then keeps its own slice (costs world_size x the bytes)
    full = torch.tensor([r1, 10 * r1])
    w = dist.all_reduce(full, async_op=True)
    mine = w.get_future().then(lambda f: f.value()[0].chunk(WORLD)[rank].clone()).wait()
    res["all_reduce_slice"] = mine.tolist()
    return res


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    meet(store, WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=20))
    r = {"torch": torch.__version__, "ops": {}}
    for name, make in ops(rank).items():
        try:
            r["ops"][name] = probe(make)
        except Exception as e:  # noqa: BLE001
            r["ops"][name] = {"error": {"type": type(e).__name__, "msg": str(e)[:300]}}
        dist.barrier()
    r["workarounds"] = workarounds(rank)
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
