"""2-rank gloo job for test_fx23_w3.py (torch 2.13.0 CPU): what object collectives do with a tensor's
device, DTensor torch.norm over a sharded or an unsharded dim (and the to_local/from_local shortcut),
FSDP2 MixedPrecisionPolicy and buffers, FSDP2 gradients on gloo against a single-process mean, and an
isend that no rank ever receives.

Usage: python _fx23_w3_job.py OUTDIR -> OUTDIR/rankN.json. Ranks meet through a FileStore in OUTDIR
(no port). The unmatched isend runs last: its group is left half-used, so the worker ends with os._exit.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

WORLD = 2


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rooted_collectives_job import cap  # noqa: E402 - run one call, record its result or error and seconds


def object_devices(rank):
    # 'meta' stands in for "the sender's GPU": a device the receiver's device= argument is not
    sent = [torch.ones(2, device="meta"), torch.ones(2)]
    if rank == 0:
        dist.send_object_list(sent, dst=1)
        return None
    objs = [None, None]
    dist.recv_object_list(objs, src=0, device=torch.device("cpu"))
    return [str(o.device) for o in objs]


def broadcast_devices(rank):
    objs = [torch.ones(2, device="meta")] if rank == 0 else [None]
    dist.broadcast_object_list(objs, src=0, device=torch.device("cpu"))
    return str(objs[0].device)


def dtensor_norm(rank, mesh, shard_dim):
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor
    torch.manual_seed(0)
    full = torch.randn(8, 4, dtype=torch.float64)
    ref_leaf = full.clone().requires_grad_()
    ref = torch.norm(ref_leaf, p=2, dim=0)
    ref.sum().backward()

    x = distribute_tensor(full.clone(), mesh, [Shard(shard_dim)]).requires_grad_()
    n = torch.norm(x, p=2, dim=0)
    n.sum().backward()
    out = {
        "placements": [repr(p) for p in n.placements],
        "shape": list(n.shape),
        "equal_ref": bool(torch.allclose(n.full_tensor(), ref)),
        "grad_placements": [repr(p) for p in x.grad.placements],
        "grad_equal_ref": bool(torch.allclose(x.grad.full_tensor(), ref_leaf.grad)),
    }
    # the shortcut: local norm, labelled Shard(0) whatever x's placement
    local = torch.norm(x.detach().to_local(), p=2, dim=0)
    short = DTensor.from_local(local, device_mesh=mesh, placements=[Shard(0)])
    sf = short.full_tensor()
    out["shortcut_shape"] = list(sf.shape)
    out["shortcut_equal_ref"] = bool(sf.shape == ref.shape and torch.allclose(sf, ref.detach()))
    return out


def masked_fill_on_dtensor(mesh):
    from torch.distributed.tensor import Shard, distribute_tensor
    x = distribute_tensor(torch.arange(8.0).reshape(4, 2), mesh, [Shard(0)])
    x.masked_fill_(x > 3, 0.0)
    return x.full_tensor().tolist()


class WithBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 2.0))          # fp32 buffer
        self.register_buffer("proj", torch.eye(4))                    # fp32 buffer used as a weight

    def forward(self, x, use_as_weight=False):
        h = self.lin(x)
        self.seen = {"h": str(h.dtype), "scale": str(self.scale.dtype),
                     "scale_type": type(self.scale).__name__}
        if use_as_weight:
            return F.linear(h, self.proj)
        return h * self.scale


def fsdp2_buffers(mesh):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    torch.manual_seed(0)
    m = WithBuffer()
    fully_shard(m, mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
    y = m(torch.randn(3, 4))
    m.reshard()                                                    # back to the sharded parameters
    res = {"seen": dict(m.seen), "out": str(y.dtype),
           "param_dtype_sharded": str(m.lin.weight.dtype),
           "param_type": type(m.lin.weight).__name__,
           "buffer_after": str(m.scale.dtype)}
    res["as_weight"] = cap(lambda: str(m(torch.randn(3, 4), use_as_weight=True).dtype))
    # casting only the buffers (not the module): the params stay fp32 master weights
    for b in m.buffers():
        b.data = b.data.to(torch.bfloat16)
    y2 = m(torch.randn(3, 4))
    m.reshard()
    res["after_buffer_cast"] = {"out": str(y2.dtype), "param": str(m.lin.weight.dtype)}
    return res


def fsdp2_grads(rank, mesh):
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3, bias=False), torch.nn.Linear(3, 2, bias=False))
    m = torch.nn.Sequential(torch.nn.Linear(4, 3, bias=False), torch.nn.Linear(3, 2, bias=False))
    m.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    xs = torch.randn(2 * WORLD, 4)
    ref(xs).pow(2).mean().backward()                         # single process, global batch
    for layer in m:
        fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    m(xs[rank * 2:(rank + 1) * 2]).pow(2).mean().backward()  # each rank its half, mean loss
    ratios = []
    for p, q in zip(m.parameters(), ref.parameters()):
        g = p.grad.full_tensor()
        ratios.append(round(float(g.norm() / q.grad.norm()), 4))
    return ratios


def unmatched_isend(rank):
    if rank == 1:
        time.sleep(2.5)              # never posts the irecv
        return None
    t0 = time.monotonic()
    w = dist.isend(torch.ones(2), dst=1)
    returned_after = round(time.monotonic() - t0, 3)
    try:
        w.wait(datetime.timedelta(seconds=1))
        waited = "completed"
    except Exception as e:  # noqa: BLE001
        waited = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return {"isend_returned_after_s": returned_after, "wait": waited}


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (WORLD,))
    res = {}
    res["object_devices"] = cap(lambda: object_devices(rank))
    res["broadcast_devices"] = cap(lambda: broadcast_devices(rank))
    res["norm_shard0"] = cap(lambda: dtensor_norm(rank, mesh, 0))
    res["norm_shard1"] = cap(lambda: dtensor_norm(rank, mesh, 1))
    res["masked_fill"] = cap(lambda: masked_fill_on_dtensor(mesh))
    res["fsdp2_buffers"] = cap(lambda: fsdp2_buffers(mesh))
    res["fsdp2_grads"] = cap(lambda: fsdp2_grads(rank, mesh))
    dist.barrier()
    res["unmatched_isend"] = cap(lambda: unmatched_isend(rank))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    os._exit(0)   # the unmatched isend is still pending; skip teardown


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
