"""FSDP2 HSDP collectives per mesh shape, and DDP buffer sync between two forwards (torch 2.13.0, gloo, CPU).

Usage: python _fx15c_jobs.py hsdp|ddpbn OUTDIR   (2 ranks; each writes OUTDIR/<job>.rankN.json)
  hsdp   fully_shard on a 2-layer model over a (2, 1) mesh ("replicate", "shard") and a (1, 2) mesh;
         every torch.distributed collective FSDP2 calls is recorded with its group size, separately
         for forward and backward, plus the gradients after one step.
  ddpbn  DDP-wrapped BatchNorm2d in eval mode, forward on x1, forward on x2, then autograd.grad of
         the first output (the pytorch#65907 pattern): as installed, and again with
         torch.autograd._unsafe_preserve_version_counter replaced by a no-op (how _sync_buffers ran
         before pytorch PR #175851), with the default buffer sync, forward_sync_buffers=False and
         broadcast_buffers=False.
Ranks meet through a FileStore in OUTDIR (no TCP port).
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rank_main import run_rank  # noqa: E402 - shared rank entry of this folder's job scripts

COLLECTIVES = ("all_gather_single", "reduce_scatter_single", "all_gather_into_tensor", "reduce_scatter_tensor",
               "all_reduce", "broadcast", "all_gather", "reduce_scatter", "_broadcast_coalesced")
LOG: list = []


def _patch_collectives():
    for name in COLLECTIVES:
        fn = getattr(dist, name, None)
        if fn is None:
            continue

        def wrapped(*a, __fn=fn, __name=name, **kw):
            g = kw.get("group")
            LOG.append([__name, dist.get_world_size(g) if g is not None else dist.get_world_size()])
            return __fn(*a, **kw)
        setattr(dist, name, wrapped)


def _take():
    out = list(LOG)
    LOG.clear()
    return out


def hsdp_run(rank, shape):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=("replicate", "shard"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 2, bias=False))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    w = model[0].weight
    r = {"shape": list(shape), "placements": [repr(p) for p in w.placements],
         "local_shape": list(w.to_local().shape), "full_shape": list(w.shape)}
    _take()
    x = torch.full((2, 4), float(rank + 1))
    y = model(x).sum()
    r["forward"] = _take()
    y.backward()
    r["backward"] = _take()
    r["grad0_local"] = model[0].weight.grad.to_local().tolist()
    return r


def job_hsdp(rank, world):
    _patch_collectives()
    return {"n_1": hsdp_run(rank, (world, 1)), "one_n": hsdp_run(rank, (1, world))}


class Mod(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(2, affine=True)

    def forward(self, z):
        return self.bn(z).sum()


def two_forwards(rank, old_release, **ddp_kw):
    torch.manual_seed(0)
    m = Mod()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ddp = nn.parallel.DistributedDataParallel(m, **ddp_kw)
    ddp.eval()
    x1 = torch.randn(1, 2, 3, 4, requires_grad=True)
    x2 = torch.randn(1, 2, 3, 4, requires_grad=True)
    real = torch.autograd._unsafe_preserve_version_counter
    if old_release:
        torch.autograd._unsafe_preserve_version_counter = lambda tensors: contextlib.nullcontext()
    r = {"future_warning": any(issubclass(w.category, FutureWarning) for w in caught)}
    try:
        y1 = ddp(x1)
        v_after_first = m.bn.running_var._version
        y2 = ddp(x2)
        r["running_var_version_bumped_by_second_forward"] = m.bn.running_var._version - v_after_first
        try:
            torch.autograd.grad(y1, x1)
            r["grad_first"] = "ok"
        except RuntimeError as e:
            r["grad_first"] = str(e)[:400]
        torch.autograd.grad(y2, x2)
    finally:
        torch.autograd._unsafe_preserve_version_counter = real
    return r


def job_ddpbn(rank, world):
    r = {}
    for old in (False, True):
        tag = "old" if old else "now"
        r[f"{tag}_default"] = two_forwards(rank, old)
        r[f"{tag}_forward_sync_false"] = two_forwards(rank, old, forward_sync_buffers=False)
        r[f"{tag}_broadcast_false"] = two_forwards(rank, old, broadcast_buffers=False)
    return r


def _rank_main(rank, job, world, outdir):
    run_rank(globals(), rank, job, world, outdir, f"{job}.rank{rank}.json")


if __name__ == "__main__":
    job, outdir = sys.argv[1], sys.argv[2]
    mp.spawn(_rank_main, args=(job, 2, outdir), nprocs=2, join=True)
