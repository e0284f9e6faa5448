"""FSDP2 over TP (2-D, dp=2 x tp=2): the _StridedShard placement and DCP save/reshard (torch 2.13.0, gloo, CPU).

Usage: python _fsdp2_tp_dcp_job.py OUTDIR
4 ranks, mesh ("dp", "tp") = (2, 2). A two-layer MLP (w0: Linear(6, 8), w1: Linear(8, 6), no bias) gets
ColwiseParallel / RowwiseParallel on mesh["tp"], then fully_shard(model, mesh=mesh["dp"]). Each rank records:
the placements FSDP2 gave w0 and w1; whether full_tensor() rebuilds the original weights; what the same local
shard would rebuild to if it were labelled (Shard(0), Shard(0)) instead (the layout torch 2.4 could not name);
get_model_state_dict + dcp.save; then dcp.load of that checkpoint into plain 1-D fully_shard over all 4 ranks
(another layout) and whether the loaded full weights equal the originals.
Each rank writes OUTDIR/rankN.json. Ranks meet through a FileStore (no TCP port).
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

WORLD = 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w0 = nn.Linear(6, 8, bias=False)
        self.w1 = nn.Linear(8, 6, bias=False)

    def forward(self, x):
        return self.w1(torch.relu(self.w0(x)))


def _model(fill):
    m = MLP()
    with torch.no_grad():
        if fill:
            m.w0.weight.copy_(torch.arange(48, dtype=torch.float32).reshape(8, 6))
            m.w1.weight.copy_(torch.arange(48, dtype=torch.float32).reshape(6, 8) + 100)
        else:
            m.w0.weight.zero_()
            m.w1.weight.zero_()
    return m


def worker(rank, outdir):
    res = {"rank": rank}
    try:
        store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD)
        ref = _model(True)
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        m = _model(True)
        parallelize_module(m, mesh["tp"], {"w0": ColwiseParallel(), "w1": RowwiseParallel()})
        fully_shard(m, mesh=mesh["dp"])
        w0 = m.w0.weight
        res["w0_placements"] = str(w0.placements)
        res["w1_placements"] = str(m.w1.weight.placements)
        res["w0_local_shape"] = list(w0.to_local().shape)
        res["w0_full_matches"] = bool(torch.equal(w0.full_tensor(), ref.w0.weight))
        res["w1_full_matches"] = bool(torch.equal(m.w1.weight.full_tensor(), ref.w1.weight))
        # the same local rows labelled as plain nested Shard(0): DP-first order, not FSDP2's TP-first order
        naive = DTensor.from_local(w0.to_local(), mesh, [Shard(0), Shard(0)], run_check=False)
        res["naive_full_matches"] = bool(torch.equal(naive.full_tensor(), ref.w0.weight))
        res["w0_local_rows"] = w0.to_local()[:, 0].div(6).long().tolist()
        ck = os.path.join(outdir, "ckpt")
        dcp.save(get_model_state_dict(m), checkpoint_id=ck)
        res["save"] = "ok"
        # reshard on load: plain FSDP2 over all 4 ranks
        m1 = _model(False)
        fully_shard(m1, mesh=init_device_mesh("cpu", (WORLD,)))
        sd = get_model_state_dict(m1)
        dcp.load(sd, checkpoint_id=ck)
        set_model_state_dict(m1, sd)
        res["load1d_placements"] = str(m1.w0.weight.placements)
        res["load1d_matches"] = bool(torch.equal(m1.w0.weight.full_tensor(), ref.w0.weight)
                                     and torch.equal(m1.w1.weight.full_tensor(), ref.w1.weight))
        dist.barrier()
    except Exception as e:  # noqa: BLE001
        res["error"] = f"{type(e).__name__}: {e}"[:1500]
        res["tb"] = traceback.format_exc()[-1500:]
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    os._exit(0)


if __name__ == "__main__":
    mp.start_processes(worker, args=(sys.argv[1],), nprocs=WORLD, start_method="fork", join=True)
