"""3-rank gloo job for test_rooted_collectives.py (torch 2.13.0 CPU): reduce, gather, scatter and their
object forms -- what each rank passes, what raises and where, what each rank holds afterwards -- plus the
autograd alternatives of process-groups.md (custom autograd.Function, DTensor).

Usage: python _rooted_collectives_job.py OUTDIR -> OUTDIR/rankN.json. Ranks meet through a FileStore in
OUTDIR (no port). Rank r holds 10**r (1, 10, 100), so a partial sum is recognisable by its digits.

Hang-free design: a rank that raises before communicating never enters the collective, so an error
case is run either by the raising rank alone (it must return at once: a call that communicated would
wait for peers that never come) or, for "what the others see", on its own fresh group with a 3 s timeout.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 3


def cap(fn):
    t0 = time.monotonic()
    try:
        out = {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        out = {"error": {"type": type(e).__name__, "msg": str(e).splitlines()[0][:300]}}
    out["seconds"] = round(time.monotonic() - t0, 3)
    return out


def vec(rank, n=6):
    return torch.full((n,), 10.0 ** rank)


def reduce_(rank, dst, n):
    t = vec(rank, n)
    dist.reduce(t, dst=dst)
    return t.tolist()


def issue_76527(rank, pair):
    # pytorch/pytorch#76527 verbatim on a 2-rank group: rank 1 ended with [[4, 5], [9, 11]]
    if rank not in (0, 1):
        return None
    t = torch.tensor([[1, 2], [3, 4]]) if rank == 0 else torch.tensor([[4, 5], [6, 7]])
    dist.reduce(t, dst=0, group=pair)
    return t.tolist()


def reduce_clone(rank):
    t = vec(rank)
    buf = t.clone()
    dist.reduce(buf, dst=0)
    return {"t": t.tolist(), "buf": buf.tolist()}


def all_reduce_(rank):
    t = vec(rank)
    dist.all_reduce(t)
    return t.tolist()


def gather_(rank, empty_list_off_dst=False):
    t = torch.tensor([10.0 ** rank])
    out = [torch.zeros(1) for _ in range(WORLD)] if rank == 0 else ([] if empty_list_off_dst else None)
    ret = dist.gather(t, gather_list=out, dst=0)
    return {"ret": ret, "list": None if out is None else [o.tolist() for o in out]}


def all_gather_(rank):
    out = [torch.zeros(1) for _ in range(WORLD)]
    dist.all_gather(out, torch.tensor([10.0 ** rank]))
    return [o.tolist() for o in out]


def scatter_(rank):
    out = torch.full((1,), -1.0)
    src_list = [torch.tensor([float(i + 1)]) for i in range(WORLD)] if rank == 0 else None
    dist.scatter(out, scatter_list=src_list, src=0)
    return out.tolist()


def gather_object_(rank):
    out = [None] * WORLD if rank == 0 else None
    dist.gather_object({"rank": rank}, out, dst=0)
    return out


def scatter_object_(rank):
    out = [None]
    # non-src ranks may pass any list (items unused; rank 1) or None (rank 2)
    inp = [{"to": i} for i in range(WORLD)] if rank == 0 else (["ignored"] * WORLD if rank == 1 else None)
    dist.scatter_object_list(out, inp, src=0)
    return out


def sub_reduce(rank, sub, **kw):
    t = torch.tensor([10.0 ** rank])
    dist.reduce(t, group=sub, **kw)
    return t.tolist()


def autograd_alternatives(rank):
    """y = sum over ranks of x; each rank's loss is (r + 1) * y."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial

    class AllReduceSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.clone()
            dist.all_reduce(y)
            return y

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            dist.all_reduce(g)          # the adjoint of a sum all-reduce is a sum all-reduce
            return g

    out = {}
    x = torch.tensor([rank + 1.0], requires_grad=True)
    y = AllReduceSum.apply(x)
    (y * (rank + 1)).sum().backward()
    out["custom_function"] = {"y": y.tolist(), "grad": x.grad.tolist()}

    mesh = init_device_mesh("cpu", (WORLD,))
    x = torch.tensor([rank + 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = DTensor.from_local(x, mesh, [Partial()]).full_tensor()
        (y * (rank + 1)).sum().backward()
    out["dtensor_per_rank_loss"] = {"y": y.tolist(), "grad": x.grad.tolist(),
                                    "warnings": [f"{m.category.__name__}: {m.message}" for m in w]}
    x = torch.tensor([rank + 1.0], requires_grad=True)
    y = DTensor.from_local(x, mesh, [Partial()]).full_tensor()
    (y * 2.0).sum().backward()                       # the same loss on every rank (SPMD)
    out["dtensor_same_loss"] = {"y": y.tolist(), "grad": x.grad.tolist()}
    return out


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=30))
    pair = dist.new_group([0, 1])
    sub = dist.new_group([1, 2])
    r = {"torch": torch.__version__}
    # 1. valid calls, every rank
    r["reduce_dst0"] = cap(lambda: reduce_(rank, 0, 6))
    r["reduce_dst2"] = cap(lambda: reduce_(rank, 2, 6))
    r["reduce_dst0_n1"] = cap(lambda: reduce_(rank, 0, 1))
    r["reduce_dst0_n1024"] = cap(lambda: reduce_(rank, 0, 1024))
    r["issue_76527"] = cap(lambda: issue_76527(rank, pair))
    r["reduce_clone"] = cap(lambda: reduce_clone(rank))
    r["all_reduce"] = cap(lambda: all_reduce_(rank))
    r["gather"] = cap(lambda: gather_(rank))
    r["gather_empty_list_off_dst"] = cap(lambda: gather_(rank, empty_list_off_dst=True))
    r["all_gather"] = cap(lambda: all_gather_(rank))
    r["scatter"] = cap(lambda: scatter_(rank))
    r["gather_object"] = cap(lambda: gather_object_(rank))
    r["scatter_object_list"] = cap(lambda: scatter_object_(rank))
    # subgroup [1, 2]: group_dst=1 is global rank 2; dst=2 (global) is the same rank
    if rank in (1, 2):
        r["sub_reduce_group_dst1"] = cap(lambda: sub_reduce(rank, sub, group_dst=1))
        r["sub_reduce_dst2"] = cap(lambda: sub_reduce(rank, sub, dst=2))
    else:
        r["sub_reduce_non_member"] = cap(lambda: sub_reduce(rank, sub, dst=2))   # warns, returns
    dist.barrier()
    # 2. argument errors, called by the raising rank alone: they must return at once
    alone = {}
    if rank == 0:
        t = torch.ones(1)
        alone["gather_no_list_on_dst"] = cap(lambda: dist.gather(t, None, dst=0))
        alone["scatter_no_list_on_src"] = cap(lambda: dist.scatter(t, None, src=0))
        alone["gather_object_no_list_on_dst"] = cap(lambda: dist.gather_object(1, None, dst=0))
        alone["scatter_object_no_list_on_src"] = cap(lambda: dist.scatter_object_list([None], None, src=0))
        alone["reduce_no_dst"] = cap(lambda: dist.reduce(t))
        alone["reduce_dst_and_group_dst"] = cap(lambda: dist.reduce(t, dst=0, group_dst=0))
    if rank == 1:
        t = torch.ones(1)
        lst = [torch.zeros(1) for _ in range(WORLD)]
        alone["gather_list_off_dst"] = cap(lambda: dist.gather(t, lst, dst=0))
        alone["scatter_list_off_src"] = cap(lambda: dist.scatter(t, lst, src=0))
        alone["gather_object_list_off_dst"] = cap(lambda: dist.gather_object(1, [None] * WORLD, dst=0))
        alone["gather_dtype_mismatch"] = cap(lambda: dist.gather(t, [torch.zeros(1, dtype=torch.int64)] * WORLD, dst=1))
        alone["sub_reduce_dst_not_in_group"] = cap(lambda: sub_reduce(rank, sub, dst=0))
        alone["sub_reduce_group_dst_as_global"] = cap(lambda: sub_reduce(rank, sub, group_dst=2))
    r["alone"] = alone
    dist.barrier()
    # 3. autograd alternatives (every rank)
    r["autograd"] = cap(lambda: autograd_alternatives(rank))
    dist.barrier()
    # 4. one rank raises, the others are already inside gather: own group, 3 s timeout, used once
    g = dist.new_group(timeout=datetime.timedelta(seconds=3))
    t = torch.ones(1)
    if rank == 1:
        r["mismatch"] = cap(lambda: dist.gather(t, [torch.zeros(1)] * WORLD, dst=0, group=g))
        time.sleep(5)   # stay alive past g's timeout: an exiting process would reset the peers' sockets instead
    elif rank == 0:
        r["mismatch"] = cap(lambda: dist.gather(t, [torch.zeros(1) for _ in range(WORLD)], dst=0, group=g))
    else:
        r["mismatch"] = cap(lambda: dist.gather(t, None, dst=0, group=g))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1, default=str)
    os._exit(0)   # group g holds a half-finished gather; skip teardown


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
