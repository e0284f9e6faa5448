"""FSDP2 root resharding after forward, and CPUOffloadPolicy with meta-device init (torch 2.13.0, 2 gloo ranks, CPU).

Usage: python _fsdp2_root_reshard_offload_job.py OUTDIR -> OUTDIR/rank{0,1}.json.

Root part. Model: an Encoder with its own `embed` (Linear 8->8, held by the root's group) and two
`blocks`, each `fully_shard`-ed, then `fully_shard(root, reshard_after_forward=R)` for R in None / True /
False. After one forward under torch.no_grad() (inference: no backward ever follows) each parameter is
recorded as "sharded" (a DTensor with an 4x8 local shard is registered) or "unsharded" (a plain 8x8 tensor
is registered). Then `root.reshard()` and `root.set_reshard_after_forward(True)` are tried on the default.

Offload part. `CPUOffloadPolicy(pin_memory=False)` on every unit. (a) built on the meta device and run
without materializing: the first forward's error. (b) built on meta, `to_empty(device="cpu")`, initialized:
one training step with Adam; where parameters, gradients and optimizer state live.
Ranks meet through a FileStore (no TCP port).
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor

WORLD = 2


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = torch.relu(b(x))
        return x


def state(p):
    return "sharded" if isinstance(p, DTensor) else "unsharded"


def registered(m):
    return {"embed": state(m.embed.weight), "block0": state(m.blocks[0].weight)}


def build(root_kw, offload=None):
    torch.manual_seed(0)
    m = Encoder()
    kw = {} if offload is None else {"offload_policy": offload}
    for b in m.blocks:
        fully_shard(b, **kw)
    fully_shard(m, **root_kw, **kw)
    return m


def root_part(res):
    x = torch.ones(2, 8)
    for name, kw in (("none", {}), ("true", {"reshard_after_forward": True}), ("false", {"reshard_after_forward": False})):
        m = build(kw)
        res[f"before_{name}"] = registered(m)
        with torch.no_grad():
            m(x)
        res[f"after_{name}"] = registered(m)
        res[f"embed_shape_after_{name}"] = list(m.embed.weight.shape if not isinstance(m.embed.weight, DTensor)
                                               else m.embed.weight.to_local().shape)
    m = build({})
    with torch.no_grad():
        m(x)
    m.reshard()
    res["after_none_then_reshard"] = registered(m)
    m = build({})
    m.set_reshard_after_forward(True)
    with torch.no_grad():
        m(x)
    res["after_none_set_true"] = registered(m)
    # Training with the default: the root's parameters stay gathered from forward to backward, then reshard.
    m = build({})
    m(x).sum().backward()
    res["after_backward_none"] = registered(m)


def meta_encoder_offloaded(policy):
    """Encoder built on the meta device, each block and the root sharded with the offload policy."""
    torch.manual_seed(0)
    with torch.device("meta"):
        m = Encoder()
    for b in m.blocks:
        fully_shard(b, offload_policy=policy)
    fully_shard(m, offload_policy=policy)
    return m


def offload_part(res):
    policy = CPUOffloadPolicy(pin_memory=False)
    try:
        m = meta_encoder_offloaded(policy)
        m(torch.ones(2, 8))
        res["meta_no_materialize"] = "ok"
    except Exception as e:  # noqa: BLE001
        res["meta_no_materialize"] = f"{type(e).__name__}: {e}"[:300]
    m = meta_encoder_offloaded(policy)
    m.to_empty(device="cpu")
    for mod in m.modules():
        if isinstance(mod, nn.Linear):
            mod.reset_parameters()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    m(torch.ones(2, 8)).sum().backward()
    w = m.blocks[0].weight
    res["offload_param_is_dtensor"] = isinstance(w, DTensor)
    res["offload_param_local_device"] = str(w.to_local().device)
    res["offload_grad_is_dtensor"] = isinstance(w.grad, DTensor)
    res["offload_grad_local_device"] = str(w.grad.to_local().device)
    opt.step()
    st = opt.state[w]
    res["offload_exp_avg_is_dtensor"] = isinstance(st["exp_avg"], DTensor)
    res["offload_exp_avg_local_device"] = str(st["exp_avg"].to_local().device)
    total = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    res["offload_clip_total_is_dtensor"] = isinstance(total, DTensor)


def worker(rank, outdir):
    res = {"rank": rank, "torch": torch.__version__}
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD)
    for part in (root_part, offload_part):
        try:
            part(res)
        except Exception as e:  # noqa: BLE001
            res[part.__name__ + "_error"] = f"{type(e).__name__}: {e}"[:400]
            res[part.__name__ + "_tb"] = traceback.format_exc()[-1500:]
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    mp.start_processes(worker, args=(sys.argv[1],), nprocs=WORLD, start_method="fork", join=True)
