"""FSDP1 HYBRID_SHARD with a one-rank shard group (one GPU per node) and FSDP1 NO_SHARD with CPU offload
options (torch 2.13.0, gloo, CPU).

Usage: python _fsdp1_hybrid_noshard_job.py hybrid|offload WORLD OUTDIR   (each rank writes OUTDIR/<job>.wN.rankR.json)
  hybrid   2 ranks as two one-device "nodes": the same Linear on both ranks (seed 0), different data per rank,
           one forward + backward + SGD step, under
             FSDP1 HYBRID_SHARD + process_group=(rank alone, both ranks)
             FSDP1 HYBRID_SHARD + device_mesh (2, 1)        (dim 0 replicate, dim 1 shard)
             FSDP1 HYBRID_SHARD, groups built by FSDP (auto_wrap_policy; the CPU device count is 1)
             FSDP1 NO_SHARD over both ranks                  (the reference: DDP-like)
             FSDP2 fully_shard on a (2, 1) mesh
           and compares each rank's gradient with its own local gradient and with the mean over ranks.
  offload  1 rank (FULL_SHARD requested -> NO_SHARD) or 2 ranks with an explicit NO_SHARD: which state-dict and
           unshard calls raise or warn with offload_to_cpu=True / CPUOffload(offload_params=True).
Ranks meet through a FileStore in OUTDIR (no TCP port).
"""
from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rank_main import run_rank  # noqa: E402 - shared rank entry of this folder's job scripts

CPU = torch.device("cpu")   # FSDP1 refuses to run with no accelerator unless device_id names the CPU
SWITCH = "switching to use `NO_SHARD`"


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 2))


def _data(rank):
    return torch.arange(12.0).reshape(3, 4) / 10 * (rank + 1) - rank


def _local_grad(rank):
    m = _model()
    m(_data(rank)).pow(2).sum().backward()
    return m[0].weight.grad.clone()


def _close(a, b):
    return bool(torch.allclose(a, b, atol=1e-6))


def _hybrid_case(rank, world, name):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy, fully_shard
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    model = _model()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        if name == "fsdp1_hybrid_tuple":
            alone = [dist.new_group([r]) for r in range(world)]     # every rank calls new_group for every group
            both = dist.new_group(list(range(world)))
            m = FSDP(model, sharding_strategy=ShardingStrategy.HYBRID_SHARD, process_group=(alone[rank], both),
                     device_id=CPU, use_orig_params=True)
        elif name == "fsdp1_hybrid_mesh_2x1":
            mesh = init_device_mesh("cpu", (world, 1), mesh_dim_names=("replicate", "shard"))
            m = FSDP(model, sharding_strategy=ShardingStrategy.HYBRID_SHARD, device_mesh=mesh,
                     device_id=CPU, use_orig_params=True)
        elif name == "fsdp1_hybrid_auto_groups":
            m = FSDP(model, sharding_strategy=ShardingStrategy.HYBRID_SHARD,
                     auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=CPU, use_orig_params=True)
        elif name == "fsdp1_no_shard_world":
            m = FSDP(model, sharding_strategy=ShardingStrategy.NO_SHARD, device_id=CPU, use_orig_params=True)
        elif name == "fsdp2_mesh_2x1":
            mesh = init_device_mesh("cpu", (world, 1), mesh_dim_names=("replicate", "shard"))
            m = fully_shard(model, mesh=mesh)
        else:
            raise ValueError(name)
    r = {"switch_warning": any(SWITCH in str(x.message) for x in w)}
    if name.startswith("fsdp1"):
        fsdp = m if name != "fsdp1_hybrid_auto_groups" else FSDP.fsdp_modules(m)[-1]
        r["strategy"] = fsdp.sharding_strategy.name
        r["shard_group"] = sorted(dist.get_process_group_ranks(fsdp.process_group))
        inter = getattr(fsdp, "_inter_node_pg", None)
        r["replicate_group"] = sorted(dist.get_process_group_ranks(inter)) if inter is not None else None
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m(_data(rank)).pow(2).sum().backward()
    weight = model[0].weight
    grad = weight.grad.full_tensor() if hasattr(weight.grad, "full_tensor") else weight.grad.detach().clone()
    own = _local_grad(rank)
    locals_ = [None] * world
    dist.all_gather_object(locals_, own)
    mean = sum(locals_) / world
    r["grad_equals_own_local"] = _close(grad, own)
    r["grad_equals_mean_over_ranks"] = _close(grad, mean)
    r["grad_equals_own_local_over_world"] = _close(grad, own / world)   # divided by the replicas, never summed
    opt.step()
    w_after = weight.full_tensor() if hasattr(weight, "full_tensor") else weight.detach().clone()
    all_w = [None] * world
    dist.all_gather_object(all_w, w_after)
    r["weights_equal_across_ranks_after_step"] = all(_close(all_w[0], x) for x in all_w)
    return r


def job_hybrid(rank, world):
    return {name: _hybrid_case(rank, world, name) for name in (
        "fsdp1_hybrid_tuple", "fsdp1_hybrid_mesh_2x1", "fsdp1_hybrid_auto_groups",
        "fsdp1_no_shard_world", "fsdp2_mesh_2x1")}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _attempt(fn):
    """{"result": "ok" | "<Type>: <message>", "warnings": [NO_SHARD / offload warnings], **fn's dict}"""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = fn() or {}
            r = {"result": "ok", **out}
        except Exception as e:  # noqa: BLE001 - recorded for the test
            r = {"result": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"}
    r["warnings"] = sorted({" ".join(str(x.message).split())[:90] for x in w
                            if "NO_SHARD" in str(x.message) or "offload_to_cpu" in str(x.message)})
    return r


def _offload_case(world, orig, ctor_offload):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.fsdp import (CPUOffload, FullOptimStateDictConfig, FullStateDictConfig,
                                        FullyShardedDataParallel as FSDP, ShardedStateDictConfig,
                                        ShardingStrategy, StateDictType)
    torch.manual_seed(0)
    strategy = ShardingStrategy.FULL_SHARD if world == 1 else ShardingStrategy.NO_SHARD
    kw = dict(cpu_offload=CPUOffload(offload_params=True)) if ctor_offload else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = FSDP(Net(), sharding_strategy=strategy, device_id=CPU, use_orig_params=orig, **kw)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)   # momentum: the optimizer has state to save
    if not ctor_offload:   # the offloaded backward syncs an accelerator stream (no CPU path): no step then
        m(torch.ones(2, 4)).sum().backward()
        opt.step()
    r = {"strategy": m.sharding_strategy.name}

    def full_sd(offload, rank0_only):
        def fn():
            with FSDP.state_dict_type(m, StateDictType.FULL_STATE_DICT,
                                      FullStateDictConfig(offload_to_cpu=offload, rank0_only=rank0_only)):
                sd = m.state_dict()
            return {"keys": len(sd)}
        return fn

    def sharded_sd():
        with FSDP.state_dict_type(m, StateDictType.SHARDED_STATE_DICT, ShardedStateDictConfig(offload_to_cpu=True)):
            sd = m.state_dict()
        return {"keys": len(sd), "value_types": sorted({type(v).__name__ for v in sd.values()})}

    def load_back():
        cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=False)
        with FSDP.state_dict_type(m, StateDictType.FULL_STATE_DICT, cfg):
            sd = m.state_dict()
            m.load_state_dict(sd)

    def summon(offload, rank0_only):
        def fn():
            with FSDP.summon_full_params(m, offload_to_cpu=offload, rank0_only=rank0_only):
                pass
        return fn

    def optim_sd():
        with FSDP.state_dict_type(m, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=True, rank0_only=True),
                                  FullOptimStateDictConfig(offload_to_cpu=True, rank0_only=True)):
            osd = FSDP.optim_state_dict(m, opt)
        return {"param_entries": len(osd.get("state", {}))}

    def full_optim_sd():   # the deprecated call LLaMA2-Accessory's save_checkpoint makes under the same context
        with FSDP.state_dict_type(m, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
            osd = FSDP.full_optim_state_dict(m, opt)
        return {"param_entries": len(osd.get("state", {}))}

    def dcp_sd():
        sd = get_model_state_dict(m, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return {"keys": len(sd)}

    r["state_dict_full_offload_rank0_only"] = _attempt(full_sd(True, True))
    r["state_dict_full_offload"] = _attempt(full_sd(True, False))
    r["state_dict_full_default"] = _attempt(full_sd(False, False))
    r["state_dict_sharded_offload"] = _attempt(sharded_sd)
    r["load_state_dict_full_offload"] = _attempt(load_back)
    r["optim_state_dict_offload"] = _attempt(optim_sd)
    r["full_optim_state_dict"] = _attempt(full_optim_sd)
    r["get_model_state_dict_cpu_offload"] = _attempt(dcp_sd)
    r["summon_offload_rank0_only"] = _attempt(summon(True, True))
    r["summon_offload"] = _attempt(summon(True, False))
    r["summon_default"] = _attempt(summon(False, False))
    return r


def job_offload(rank, world):
    # CPUOffload(offload_params=True) pins the CPU shard (FlatParamHandle.init_flat_param_attributes), which needs an
    # accelerator: on this CPU-only run pin_memory is made the identity; no state-dict code reads offload_params
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    return {f"orig={orig}/ctor_offload={ctor}": _offload_case(world, orig, ctor)
            for orig in (False, True) for ctor in (False, True)}


def _rank_main(rank, job, world, outdir):
    run_rank(globals(), rank, job, world, outdir, f"{job}.w{world}.rank{rank}.json")


if __name__ == "__main__":
    job, world, outdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    mp.spawn(_rank_main, args=(job, world, outdir), nprocs=world, join=True)
