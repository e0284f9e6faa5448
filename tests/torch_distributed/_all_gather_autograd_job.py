"""2-rank gloo job for test_all_gather_autograd.py (torch 2.13.0 CPU).

Usage: python _all_gather_autograd_job.py OUTDIR  -> OUTDIR/rankN.json. Ranks meet through a
FileStore in OUTDIR (no port), after _meet.meet; the group has a short timeout so a failure cannot hang.

Rank r holds x = arange(6).reshape(2, 3) + 10 r and gathers its transpose (3 x 2, not contiguous).
Loss at rank r: sum over slots k of (r + 1)(k + 1) * gathered[k].sum(), so the true gradient at
rank r's input is sum over ranks s of (s + 1)(r + 1) = 3 (r + 1) per element: 3 on rank 0, 6 on
rank 1. A gradient of (r + 1)(r + 1) would mean "local only".
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

from _autograd_ddp_ignore_jobs import WORLD, cap  # noqa: E402 - the sibling job's 2-rank world and result capture
from _meet import meet  # noqa: E402 - ranks meet before the short-timeout init


def leaf(rank):
    x = (torch.arange(6.0).reshape(2, 3) + 10 * rank).requires_grad_()
    return x, x.t()                            # the transpose is a non-contiguous view


def warned(w):
    return [f"{m.category.__name__}: {m.message}" for m in w]


def nn_all_gather(rank):
    from torch.distributed import nn as dist_nn
    x, xt = leaf(rank)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = dist_nn.functional.all_gather(xt)
    loss = sum((rank + 1) * (k + 1) * o.sum() for k, o in enumerate(outs))
    loss.backward()
    return {"input_contiguous": xt.is_contiguous(), "type": type(outs).__name__, "len": len(outs),
            "slots": [o.tolist() for o in outs], "slot_contiguous": [o.is_contiguous() for o in outs],
            "grad": x.grad.unique().tolist(), "warnings": warned(w)}


def funcol_gather(rank, name):
    import torch.distributed._functional_collectives as funcol
    x, xt = leaf(rank)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = getattr(funcol, name)(xt, 0, dist.group.WORLD)
        y = funcol.wait_tensor(y)
    chunks = y.chunk(WORLD, dim=0)
    loss = sum((rank + 1) * (k + 1) * c.sum() for k, c in enumerate(chunks))
    loss.backward()
    return {"shape": list(y.shape), "value": y.tolist(), "grad": x.grad.unique().tolist(),
            "warnings": warned(w)}


def plain_all_gather(rank):
    """c10d all_gather with a non-contiguous input and empty_like outputs (which keep the strides)."""
    _, xt = leaf(rank)
    xt = xt.detach()
    outs = [torch.empty_like(xt) for _ in range(WORLD)]
    res = {"out_contiguous": [o.is_contiguous() for o in outs]}
    res["call"] = cap(lambda: (dist.all_gather(outs, xt), [o.tolist() for o in outs])[1])
    return res


def ddp_global_loss(rank):
    """DDP (which averages parameter gradients) + the differentiable gather, every rank computing one
    global, non-separable loss over the gathered batch: the summed-over-ranks input gradient and DDP's
    mean cancel, so the parameters get the single-process gradient of that loss (no rescaling)."""
    from torch.distributed import nn as dist_nn
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    ref = torch.nn.Linear(3, 2)
    ref.load_state_dict(lin.state_dict())
    X = torch.randn(WORLD * 4, 3, generator=torch.Generator().manual_seed(1))

    def loss_fn(z):
        return (z @ z.t()).logsumexp(dim=1).mean()
    ddp = torch.nn.parallel.DistributedDataParallel(lin)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        z = torch.cat(dist_nn.functional.all_gather(ddp(X[rank * 4:(rank + 1) * 4])), dim=0)
    loss_fn(z).backward()
    loss_fn(ref(X)).backward()
    return {"ddp_grad": lin.weight.grad.flatten().tolist(), "single_grad": ref.weight.grad.flatten().tolist()}


def ddp_local_loss(rank):
    """The contrastive-loss layout: each rank scores only its own n rows against all gathered rows
    (labels offset by n * rank) and takes the mean over its rows. Compared with one process computing the
    mean over all rows: (a) the gradient-carrying gather under DDP, (b) a plain dist.all_gather with this
    rank's own slot put back as the local, grad-carrying tensor (no gradient from the other ranks' losses)."""
    from torch.distributed import nn as dist_nn
    import torch.nn.functional as F
    n = 4
    X = torch.randn(WORLD * n, 3, generator=torch.Generator().manual_seed(2))
    labels = torch.arange(n) + n * rank

    def fresh():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 5)
    ref = fresh()
    Z = ref(X)
    F.cross_entropy(Z @ Z.t(), torch.arange(WORLD * n)).backward()
    single = ref.weight.grad.flatten()
    out = {}
    lin = fresh()
    ddp = torch.nn.parallel.DistributedDataParallel(lin)
    z = ddp(X[rank * n:(rank + 1) * n])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        allz = torch.cat(dist_nn.functional.all_gather(z), dim=0)
    F.cross_entropy(z @ allz.t(), labels).backward()
    out["with_grad_gather_max_diff"] = (lin.weight.grad.flatten() - single).abs().max().item()
    lin2 = fresh()
    ddp2 = torch.nn.parallel.DistributedDataParallel(lin2)
    z2 = ddp2(X[rank * n:(rank + 1) * n])
    slots = [torch.empty_like(z2) for _ in range(WORLD)]
    dist.all_gather(slots, z2.detach())
    slots[rank] = z2
    F.cross_entropy(z2 @ torch.cat(slots, 0).t(), labels).backward()
    g2 = lin2.weight.grad.flatten()
    ratio = g2 / single
    out["plain_gather_max_diff"] = (g2 - single).abs().max().item()
    out["plain_gather_ratio_spread"] = (ratio.max() - ratio.min()).item()   # 0 would mean a pure rescale
    out["plain_gather_cosine"] = torch.nn.functional.cosine_similarity(g2, single, dim=0).item()
    return out


def deprecation_names(rank):
    """The replacement each torch.distributed.nn.functional collective names in its FutureWarning
    (captured even where gloo then refuses the call)."""
    from torch.distributed import nn as dist_nn
    F = dist_nn.functional
    x = torch.ones(WORLD)
    calls = {"broadcast": lambda: F.broadcast(x.clone(), 0),
             "reduce_scatter": lambda: F.reduce_scatter(torch.empty(1), list(x.clone().split(1))),
             "all_to_all_single": lambda: F.all_to_all_single(torch.empty(WORLD), x.clone()),
             "all_reduce": lambda: F.all_reduce(x.clone())}
    out = {}
    for name, call in calls.items():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cap(call)
        out[name] = [str(m.message) for m in w if m.category is FutureWarning]
    return out


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    meet(store, WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=20))
    r = {"nn": cap(lambda: nn_all_gather(rank))}
    for name in ("all_gather_single", "all_gather_single_autograd", "all_gather_tensor_autograd"):
        r[name] = cap(lambda: funcol_gather(rank, name))
    r["plain"] = cap(lambda: plain_all_gather(rank))
    r["deprecations"] = deprecation_names(rank)
    r["ddp"] = cap(lambda: ddp_global_loss(rank))
    r["local_loss"] = cap(lambda: ddp_local_loss(rank))
    r["torch"] = torch.__version__
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
