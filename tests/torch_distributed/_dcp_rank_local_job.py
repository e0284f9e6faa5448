"""dcp.save(..., use_collectives=False) and what reads it back (torch 2.13.0, gloo, CPU).

Usage: python _dcp_rank_local_job.py save|load2|load3|load1|offline|collective OUTDIR
  save       2 ranks: dcp.save(use_collectives=False) into OUTDIR/ckpt; each rank records the files,
             read_metadata() with and without rank=, and the keys of its own metadata file.
  load2      2 ranks: dcp.load of that folder into fresh targets (same world size).
  load3      3 ranks: the same folder loaded at another world size (group timeout 8 s).
  load1      1 rank: the same folder loaded at a smaller world size (target filled with -1).
  collective 2 ranks: the same state saved with the default use_collectives=True into OUTDIR/ckc
             (default planner) and OUTDIR/ckc_low (DefaultSavePlanner(dedup_save_to_lowest_rank=True)),
             each loaded back: which rank's copy of the per-rank plain tensor was kept.
  offline    1 process, no group: dcp_to_torch_save of the folder.
Each rank writes OUTDIR/<phase>.rankN.json. Ranks meet through a FileStore (no TCP port).
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
from torch.distributed.device_mesh import init_device_mesh

from _meet import meet  # noqa: E402 - ranks meet before the short-timeout init

FULL = torch.arange(6, dtype=torch.float32)          # the sharded tensor's full value


def _err(e):
    return {"type": type(e).__name__, "msg": str(e)[:1500]}


def state(rank, world, fill):
    mesh = init_device_mesh("cpu", (world,))
    src = FULL if fill else torch.zeros(6)
    sd = {
        "sharded": distribute_tensor(src.clone(), mesh, [Shard(0)]),
        "replicated": torch.full((2,), 7.0) if fill else torch.zeros(2),
        "per_rank_plain": torch.full((2,), float(rank + 1)) if fill else torch.zeros(2),
        f"dl_rank{rank}": torch.tensor([100.0 + rank]) if fill else torch.zeros(1),
        "epoch": 3 if fill else 0,
    }
    return sd


def plain(sd):
    out = {}
    for k, v in sd.items():
        if isinstance(v, DTensor):
            out[k] = v.to_local().tolist()
        elif torch.is_tensor(v):
            out[k] = v.tolist()
        else:
            out[k] = v
    return out


def rank_main(rank, world, phase, outdir):
    ckpt = os.path.join(outdir, "ckpt")
    r = {}
    store = dist.FileStore(os.path.join(outdir, f"store.{phase}"), world)
    meet(store, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=8))
    try:
        if phase == "save":
            dcp.save(state(rank, world, True), checkpoint_id=ckpt, use_collectives=False)
            dist.barrier()
            r["files"] = sorted(os.listdir(ckpt))
            try:
                FileSystemReader(ckpt).read_metadata()
                r["read_metadata_global"] = "ok"
            except Exception as e:  # noqa: BLE001
                r["read_metadata_global"] = _err(e)
            md = FileSystemReader(ckpt).read_metadata(rank=rank)
            r["own_metadata_keys"] = sorted(md.state_dict_metadata)
            r["own_metadata_sharded_chunks"] = [list(c.offsets) + list(c.sizes)
                                                for c in md.state_dict_metadata["sharded"].chunks]
        elif phase == "collective":
            from torch.distributed.checkpoint import DefaultSavePlanner
            for name, planner in (("ckc", None), ("ckc_low", DefaultSavePlanner(dedup_save_to_lowest_rank=True))):
                d = os.path.join(outdir, name)
                dcp.save(state(rank, world, True), checkpoint_id=d, planner=planner)
                sd = state(rank, world, False)
                dcp.load(sd, checkpoint_id=d)
                r[name] = {"files": sorted(os.listdir(d)), "values": plain(sd)}
        else:
            sd = state(rank, world, False)
            if phase == "load1":
                sd["sharded"] = distribute_tensor(torch.full((6,), -1.0), init_device_mesh("cpu", (world,)), [Shard(0)])
            try:
                dcp.load(sd, checkpoint_id=ckpt)
                r["load"] = "ok"
            except BaseException as e:  # noqa: BLE001 - CheckpointException is a BaseException
                r["load"] = _err(e)
            r["values"] = plain(sd)
    except BaseException as e:  # noqa: BLE001
        r["error"] = _err(e)
        r["tb"] = traceback.format_exc()[-1500:]
    with open(os.path.join(outdir, f"{phase}.rank{rank}.json"), "w") as f:
        json.dump(r, f)
    os._exit(0)        # a rank left in a barrier must not block the others' exit


def offline(outdir):
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    r = {}
    try:
        dcp_to_torch_save(os.path.join(outdir, "ckpt"), os.path.join(outdir, "full.pt"))
        full = torch.load(os.path.join(outdir, "full.pt"), weights_only=False)
        r["keys"] = sorted(full)
        r["sharded_shape"] = list(full["sharded"].shape)
        r["sharded_first3"] = full["sharded"][:3].tolist()    # rank 0's chunk; the rest was never read
        r["sharded_last3"] = full["sharded"][3:].tolist()     # torch.empty: uninitialised, not rank 1's 3, 4, 5
    except BaseException as e:  # noqa: BLE001
        r["error"] = _err(e)
    with open(os.path.join(outdir, "offline.rank0.json"), "w") as f:
        json.dump(r, f)


if __name__ == "__main__":
    phase, outdir = sys.argv[1], sys.argv[2]
    if phase == "offline":
        offline(outdir)
    else:
        world = {"save": 2, "load2": 2, "load3": 3, "load1": 1, "collective": 2}[phase]
        mp.start_processes(rank_main, args=(world, phase, outdir), nprocs=world, join=True,
                           start_method="spawn")
