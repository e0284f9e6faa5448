"""Runs under `torchrun --nproc_per_node 2` (gloo, CPU, torch 2.13.0). Records DTensor placements,
local shards, full_tensor/redistribute results and the from_local / distribute_tensor source
rules; rank 0 writes JSON to argv[1] (read by test_dtensor.py)."""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

dist.init_process_group("gloo")
RANK = dist.get_rank()
mesh = init_device_mesh("cpu", (2,))
OUT = {}


def every_rank(v):
    got = [None] * dist.get_world_size()
    dist.all_gather_object(got, v)
    return got


full = torch.arange(10.0).reshape(5, 2)
d = distribute_tensor(full, mesh, [Shard(0)])
OUT["shard_local_shapes"] = every_rank(list(d.to_local().shape))
OUT["shard_global_shape"] = list(d.shape)
OUT["full_tensor_equal"] = every_rank(bool(torch.equal(d.full_tensor(), full)))
r = d.redistribute(mesh, [Replicate()])
OUT["replicate_local_shapes"] = every_rank(list(r.to_local().shape))

# distribute_tensor takes rank 0's data (src_data_rank=0), whatever the other ranks pass
mine = torch.full((4,), float(RANK + 1))
OUT["distribute_from_rank0"] = every_rank(distribute_tensor(mine, mesh, [Replicate()]).to_local().tolist())
OUT["input_after_distribute"] = every_rank(mine.tolist())
mine = torch.full((4,), float(RANK + 1))

# from_local trusts each rank: inconsistent "replicated" data stays inconsistent (run_check=False)
fl = DTensor.from_local(mine, mesh, [Replicate()])
OUT["from_local_replicate"] = every_rank(fl.full_tensor().tolist())
OUT["from_local_shard_global_shape"] = list(DTensor.from_local(mine, mesh, [Shard(0)]).shape)

# Partial: a pending sum; redistribute to Replicate all-reduces
p = DTensor.from_local(torch.full((2,), float(RANK + 1)), mesh, [Partial()])
OUT["partial_to_replicate"] = every_rank(p.redistribute(mesh, [Replicate()]).to_local().tolist())
OUT["partial_full_tensor"] = every_rank(p.full_tensor().tolist())

# ops on DTensors keep placements; mixing a DTensor with a plain tensor fails
OUT["op_placement"] = str((d * 2).placements)
try:
    d + torch.ones(5, 2)
    OUT["mixed_error"] = None
except RuntimeError as e:
    OUT["mixed_error"] = str(e).splitlines()[0]

if RANK == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(OUT, f, indent=1, sort_keys=True)
dist.barrier()
dist.destroy_process_group()
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
