"""A 2-rank gloo job for the claims audit of sub-skills/torch-distributed (tests/audit_torch).

Usage: python _jobs_audit.py audit OUTDIR  -> each rank writes OUTDIR/audit.rankN.json.
Ranks rendezvous through a FileStore in OUTDIR. Every designed failure runs on a group with a
short timeout, so a hang becomes a recorded error; the test bounds the whole run as well.
Sections: process groups (new_group timeouts and renumbering), DDP construction and gradient
options, FSDP2 (resharding defaults, gradient sync, ignored params, state-dict options,
broadcast_from_rank0 load, async DCP save), DistributedSampler epochs.
"""
from __future__ import annotations

import datetime
import faulthandler
import json
import os
import sys
import time
import traceback
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

SHORT = datetime.timedelta(seconds=3)
WORLD_TIMEOUT = datetime.timedelta(seconds=60)


def capture(fn):
    t0 = time.monotonic()
    try:
        return {"ok": fn(), "s": round(time.monotonic() - t0, 2)}
    except Exception as e:  # noqa: BLE001 - the error is the recorded result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:2000]}, "s": round(time.monotonic() - t0, 2)}


def warns_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [f"{w.category.__name__}: {w.message}" for w in caught]


def pg_timeout(group) -> float:
    return group._get_backend(torch.device("cpu")).options._timeout.total_seconds()


# --------------------------------------------------------------------------- process groups

def section_groups(rank, world, r, tmp):
    r["world_timeout_s"] = pg_timeout(dist.group.WORLD)
    r["new_group_default_timeout_s"] = pg_timeout(dist.new_group())
    r["new_group_given_timeout_s"] = pg_timeout(dist.new_group(timeout=datetime.timedelta(seconds=5)))
    # groups other code creates: DeviceMesh dims and new_subgroups (what FSDP1 HYBRID_SHARD calls)
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (2, 1), mesh_dim_names=("dp", "tp"))
    r["mesh_world_dim_timeout_s"] = pg_timeout(mesh.get_group("dp"))         # spans the world: the default group
    r["mesh_world_dim_is_world"] = mesh.get_group("dp") is dist.group.WORLD
    r["mesh_sub_dim_timeout_s"] = pg_timeout(mesh.get_group("tp"))           # a real subgroup
    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = datetime.timedelta(seconds=7)
    mesh = init_device_mesh("cpu", (2, 1), mesh_dim_names=("a", "b"), backend_override={"b": ("gloo", opts)})
    r["mesh_override_timeout_s"] = pg_timeout(mesh.get_group("b"))
    r["new_subgroups_timeout_s"] = pg_timeout(dist.new_subgroups(1)[0])
    r["sorted_rank"] = dist.get_rank(dist.new_group([1, 0]))
    r["unsorted_rank"] = dist.get_rank(dist.new_group([1, 0], sort_ranks=False))
    # barrier with one rank missing: an error without rank names
    g = dist.new_group(timeout=SHORT)
    if rank == 0:
        r["barrier_missing_rank"] = capture(lambda: dist.barrier(group=g))
    else:
        time.sleep(5)
    dist.barrier()
    # different collectives on the two ranks without TORCH_DISTRIBUTED_DEBUG=DETAIL
    g = dist.new_group(timeout=SHORT)
    t = torch.ones(2) * (rank + 1)
    r["op_mismatch_off"] = capture(lambda: (dist.all_reduce(t, group=g) if rank == 0
                                            else dist.broadcast(t, src=1, group=g), t.tolist())[1])
    dist.barrier()


# --------------------------------------------------------------------------- DDP

def ddp(module, **kw):
    from torch.nn.parallel import DistributedDataParallel as DDP
    return warns_of(lambda: DDP(module, **kw))


def section_ddp(rank, world, r, tmp):
    # init_sync=False: no broadcast of rank 0's parameters at construction
    torch.manual_seed(rank)
    model, _ = ddp(nn.Linear(3, 1), init_sync=False)
    r["init_sync_false_weight"] = model.module.weight.detach().flatten().tolist()
    torch.manual_seed(rank)
    model, _ = ddp(nn.Linear(3, 1))
    r["init_sync_true_weight"] = model.module.weight.detach().flatten().tolist()
    r["bucket_bytes_cap"] = model.bucket_bytes_cap
    # parameter shapes differ between ranks: construction fails
    g = dist.new_group(timeout=SHORT)
    r["shape_mismatch_ctor"] = capture(lambda: ddp(nn.Linear(3 if rank == 0 else 4, 1), process_group=g) and "built")
    dist.barrier()
    # check_reduction: deprecated and ignored
    _, w = ddp(nn.Linear(2, 1), check_reduction=True)
    r["check_reduction_warnings"] = w

    # gradient_as_bucket_view: .grad tensors are views into one bucket storage
    def grad_storages(**kw):
        torch.manual_seed(0)
        m, _ = ddp(nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1)), **kw)
        m(torch.ones(2, 3)).sum().backward()
        return len({p.grad.untyped_storage().data_ptr() for p in m.parameters()})
    r["grad_storages_default"] = grad_storages()
    r["grad_storages_bucket_view"] = grad_storages(gradient_as_bucket_view=True)

    # register_comm_hook: a second registration, and a first registration after a backward
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    m, _ = ddp(nn.Linear(2, 1))
    m.register_comm_hook(None, default_hooks.allreduce_hook)
    r["comm_hook_twice"] = capture(lambda: m.register_comm_hook(None, default_hooks.allreduce_hook))
    m, _ = ddp(nn.Linear(2, 1))
    m(torch.ones(1, 2)).sum().backward()
    r["comm_hook_after_backward"] = capture(lambda: m.register_comm_hook(None, default_hooks.allreduce_hook))
    # bf16_compress_hook is refused without CUDA+NCCL (or XPU+XCCL); fp16_compress_hook runs on gloo
    m, _ = ddp(nn.Linear(3, 1, bias=False))
    r["bf16_compress_hook_gloo"] = capture(lambda: m.register_comm_hook(None, default_hooks.bf16_compress_hook))
    torch.manual_seed(0)
    m, _ = ddp(nn.Linear(3, 1, bias=False))
    m.register_comm_hook(None, default_hooks.fp16_compress_hook)
    r["fp16_compress_hook_grad"] = capture(lambda: (m(torch.full((1, 3), float(rank + 1))).sum().backward(),
                                                    m.module.weight.grad.flatten().tolist())[1])


# --------------------------------------------------------------------------- FSDP2

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 8)
        self.l2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def section_fsdp(rank, world, r, tmp):
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         set_model_state_dict)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    import torch.distributed.checkpoint as dcp

    # parameter objects are replaced: an optimizer built before holds the old ones
    torch.manual_seed(0)
    model = Tiny()
    before = {id(p) for p in model.parameters()}
    fully_shard(model.l1)                              # l2 stays in the root group
    fully_shard(model)
    r["params_replaced"] = not ({id(p) for p in model.parameters()} & before)
    mesh = model.l1.weight.device_mesh
    r["default_mesh"] = {"ndim": mesh.ndim, "size": mesh.size()}
    # reshard_after_forward=None: non-root reshards after forward, the root keeps its parameters
    out = model(torch.ones(2, 6))
    r["after_forward_types"] = {"child_l1": type(model.l1.weight).__name__, "root_l2": type(model.l2.weight).__name__}
    out.sum().backward()
    r["after_backward_types"] = {"child_l1": type(model.l1.weight).__name__, "root_l2": type(model.l2.weight).__name__}

    # cast_forward_inputs=True: a float32 input reaches the module in param_dtype
    torch.manual_seed(0)
    m = Tiny()
    seen = {}
    m.l1.register_forward_pre_hook(lambda mod, args: seen.__setitem__("l1_input", str(args[0].dtype)))
    fully_shard(m, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
    m(torch.ones(2, 6))
    r["cast_forward_inputs_seen"] = seen.get("l1_input")

    # set_requires_gradient_sync(False): no reduction; the next synced backward averages the sum
    torch.manual_seed(0)
    ref = Tiny()
    m = Tiny(); m.load_state_dict(ref.state_dict())
    fully_shard(m.l1); fully_shard(m)
    xs = {k: torch.full((2, 6), float(k + 1)) for k in range(world)}      # rank k's first input
    ys = {k: torch.full((2, 6), float(10 * (k + 1))) for k in range(world)}
    m.set_requires_gradient_sync(False)
    m(xs[rank]).sum().backward()
    r["no_sync_grad_is_none"] = m.l1.weight.grad is None
    m.set_requires_gradient_sync(True)
    m(ys[rank]).sum().backward()
    got = m.l1.weight.grad.full_tensor()
    want = torch.zeros_like(ref.l1.weight)
    for k in range(world):
        ref.zero_grad()
        ref(xs[k]).sum().backward(); ref(ys[k]).sum().backward()
        want += ref.l1.weight.grad / world
    r["sync_after_no_sync_matches_mean_of_sums"] = bool(torch.allclose(got, want, rtol=1e-4, atol=1e-5))

    # ignored_params: left unsharded
    torch.manual_seed(0)
    m = Tiny()
    fully_shard(m, ignored_params={m.l2.weight})
    r["ignored_param_type"] = type(m.l2.weight).__name__
    r["sharded_param_type"] = type(m.l1.weight).__name__
    # ...and its gradient is not reduced: with rank-dependent inputs the ranks keep different grads
    m(torch.full((2, 6), float(rank + 1))).sum().backward()
    g = m.l2.weight.grad.detach().clone()
    gs = [torch.zeros_like(g) for _ in range(world)]
    dist.all_gather(gs, g)
    r["ignored_grad_same_on_all_ranks"] = all(torch.equal(gs[0], x) for x in gs[1:])

    # StateDictOptions: ignore_frozen_params, strict, broadcast_from_rank0
    torch.manual_seed(0)
    m = Tiny()
    m.l2.requires_grad_(False)
    fully_shard(m.l1); fully_shard(m)
    r["keys_ignore_frozen"] = sorted(get_model_state_dict(m, options=StateDictOptions(ignore_frozen_params=True)))
    sd = get_model_state_dict(m)
    sd.pop("l1.bias")
    r["strict_missing_key"] = capture(lambda: set_model_state_dict(m, sd) and "loaded")
    sd = get_model_state_dict(m)
    sd.pop("l1.bias")
    r["non_strict_missing_key"] = capture(lambda: str(set_model_state_dict(
        m, sd, options=StateDictOptions(strict=False))))

    torch.manual_seed(0)
    src = Tiny()
    full = {k: v.clone() for k, v in src.state_dict().items()}
    expected = {k: v.clone() for k, v in full.items()}     # set_model_state_dict may rewrite `full`
    torch.manual_seed(99)                              # different init: the values must come from rank 0
    m = Tiny()
    fully_shard(m.l1); fully_shard(m)
    opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    r["broadcast_from_rank0_load"] = capture(lambda: (set_model_state_dict(m, full if rank == 0 else {}, options=opts),
                                                      "done")[1])
    back = get_model_state_dict(m, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        r["broadcast_from_rank0_equal"] = sorted(back) == sorted(expected) and all(
            torch.equal(back[k], expected[k]) for k in expected)

    # async_save: returns before the write is done; .result() waits
    ck = os.path.join(tmp, "async_dcp")
    fut = dcp.async_save({"model": get_model_state_dict(m)}, checkpoint_id=ck)
    r["async_save_type"] = type(fut).__name__
    r["async_save_has_result"] = hasattr(fut, "result")
    fut.result()
    dist.barrier()
    r["async_save_files"] = sorted(os.listdir(ck))


def section_fsdp_extra_forward(rank, world, r, tmp):
    """FSDP2 on a 3 s group: rank 0 runs one forward more than rank 1 (generation stopping early)."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    g = dist.new_group(timeout=SHORT)
    mesh = DeviceMesh.from_group(g, "cpu")
    torch.manual_seed(0)
    m = Tiny()
    fully_shard(m.l1, mesh=mesh); fully_shard(m.l2, mesh=mesh); fully_shard(m, mesh=mesh)
    steps = 2 if rank == 0 else 1

    def run():
        with torch.no_grad():
            for _ in range(steps):
                m(torch.ones(1, 6))
        return steps
    r["fsdp_extra_forward"] = capture(run)
    if rank != 0:
        time.sleep(5)


# --------------------------------------------------------------------------- sampler

def section_fsdp1_hybrid(rank, world, r, tmp):
    """FSDP1 HYBRID_SHARD + sync_module_states (set-5 s5-mn-06). Pretrained weights on rank 0 only.
    (a) explicit (shard_pg, replicate_pg) tuple: the order of the two broadcasts (told apart by group
    identity) and whether buffers go out in both; (b) groups FSDP builds itself with one device per
    "node" (CPU device count 1): the shard group has one rank, FSDP clamps to NO_SHARD and nothing
    crosses nodes, neither weights nor gradients. The CPU-tensor check is bypassed (it wants GPU
    tensors); the broadcasts themselves run as in the library."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp import _init_utils as iu
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    calls = []
    real_sync, real_check = iu._sync_module_params_and_buffers, iu._check_module_states_for_sync_module_states

    def recording_sync(module, params, pg):
        unsynced = sum(not getattr(b, iu.FSDP_SYNCED, False) for b in module.buffers())
        calls.append({"pg": pg, "ranks": sorted(dist.get_process_group_ranks(pg)), "buffers": unsynced})
        return real_sync(module, params, pg)

    def model():
        m = nn.Sequential(nn.Linear(4, 4))
        m.register_buffer("stat", torch.full((2,), float(rank)))
        with torch.no_grad():
            m[0].weight.fill_(float(rank == 0))
        return m

    iu._sync_module_params_and_buffers = recording_sync
    iu._check_module_states_for_sync_module_states = lambda states: None
    cpu = torch.device("cpu")
    try:
        r["hybrid_manual_error"] = capture(lambda: FSDP(nn.Linear(2, 2), sharding_strategy=ShardingStrategy.HYBRID_SHARD,
                                                        device_id=cpu) and None)
        shard_pg, replicate_pg = dist.new_group([0, 1]), dist.new_group([0, 1])
        calls.clear()
        FSDP(model(), sharding_strategy=ShardingStrategy.HYBRID_SHARD, sync_module_states=True,
             process_group=(shard_pg, replicate_pg), device_id=cpu)
        r["hybrid_tuple_calls"] = [("replicate" if c["pg"] is replicate_pg else "shard" if c["pg"] is shard_pg
                                    else "other", c["buffers"]) for c in calls]
        calls.clear()
        fsdp = FSDP(model(), sharding_strategy=ShardingStrategy.HYBRID_SHARD, sync_module_states=True,
                    auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=cpu, use_orig_params=True)
        out = fsdp(torch.full((1, 4), float(rank + 1))).sum()
        out.backward()
        with FSDP.summon_full_params(fsdp, with_grads=True):
            r["hybrid_one_per_node"] = {
                "strategy": str(fsdp.sharding_strategy), "shard_group": sorted(dist.get_process_group_ranks(fsdp.process_group)),
                "replicate_group": sorted(dist.get_process_group_ranks(fsdp._inter_node_pg)),
                "broadcast_groups": [c["ranks"] for c in calls],
                "weight_sum": float(fsdp.module[0].weight.detach().sum()),
                "grad_sum": float(fsdp.module[0].weight.grad.sum())}
    finally:
        iu._sync_module_params_and_buffers, iu._check_module_states_for_sync_module_states = real_sync, real_check


def section_fsdp_lora(rank, world, r, tmp):
    """A LoRA-shaped block (frozen base Linear + trainable lora_A/lora_B, as PEFT builds it) under
    FSDP1 with and without use_orig_params, FSDP1 with the trainable layers in their own units (what
    PEFT's fsdp_auto_wrap_policy does), and FSDP2. Records the error or which grads exist."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    cpu = torch.device("cpu")

    class LoraLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = nn.Linear(8, 8)
            self.lora_A, self.lora_B = nn.Linear(8, 2, bias=False), nn.Linear(2, 8, bias=False)
            self.base.requires_grad_(False)

        def forward(self, x):
            return self.base(x) + self.lora_B(self.lora_A(x))

    def grads(m):
        loss = m(torch.ones(2, 8)).sum()
        loss.backward()
        return {n.replace("_fsdp_wrapped_module.", ""): p.grad is not None for n, p in m.named_parameters()}

    torch.manual_seed(0)
    r["lora_fsdp1_flat"] = capture(lambda: FSDP(LoraLinear(), device_id=cpu) and None)
    m = FSDP(LoraLinear(), device_id=cpu, use_orig_params=True)
    r["lora_fsdp1_orig_grads"] = grads(m)
    r["lora_fsdp1_orig_flat_requires_grad"] = [bool(h.flat_param.requires_grad) for h in m._all_handles]
    r["lora_fsdp1_orig_local_numel"] = {n: p.numel() for n, p in m.named_parameters()}
    h = m._all_handles[0]                              # the sharded gradient covers the frozen part too
    r["lora_fsdp1_orig_flat_grad"] = [h.flat_param._local_shard.numel(),
                                      None if h.flat_param.grad is None else h.flat_param.grad.numel()]
    m = FSDP(LoraLinear(), device_id=cpu, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    r["lora_fsdp1_own_units_grads"] = grads(m)
    m = LoraLinear()
    fully_shard(m)
    r["lora_fsdp2_grads"] = grads(m)
    r["lora_fsdp2_base_requires_grad"] = bool(m.base.weight.requires_grad)


def section_dcp_node_local(rank, world, r, tmp):
    """DCP save where each rank's path is a different folder, as on node-local disks (set-5 s5-mn-05):
    which files each "node" ends up holding."""
    import torch.distributed.checkpoint as dcp
    own = os.path.join(tmp, f"node{rank}", "ckpt")
    dcp.save({"w": torch.full((4,), float(rank))}, storage_writer=dcp.FileSystemWriter(own))
    r["dcp_node_local_files"] = sorted(os.listdir(own))


def section_sampler(rank, world, r, tmp):
    from torch.utils.data.distributed import DistributedSampler
    s = DistributedSampler(list(range(10)))
    r["sampler_epochs"] = {}
    for epoch in (0, 1, 2):
        s.set_epoch(epoch)
        r["sampler_epochs"][str(epoch)] = list(s)


JOBS = {"audit": [section_groups, section_ddp, section_fsdp, section_fsdp_extra_forward, section_fsdp1_hybrid,
                   section_fsdp_lora, section_dcp_node_local, section_sampler]}


def dump(r, job, rank, outdir):
    with open(os.path.join(outdir, f"{job}.rank{rank}.json"), "w") as f:
        json.dump(r, f, default=repr)


def _rank_main(rank, job, world, outdir):
    faulthandler.enable()
    torch.set_num_threads(1)
    r = {}
    try:
        dist.init_process_group("gloo", init_method=f"file://{outdir}/{job}.store", rank=rank, world_size=world,
                                timeout=WORLD_TIMEOUT)
        for section in JOBS[job]:
            try:
                section(rank, world, r, outdir)
            except Exception:  # noqa: BLE001 - recorded per section, the next one still runs
                r[f"{section.__name__}_traceback"] = traceback.format_exc()[-3000:]
            dist.barrier()
    except Exception:  # noqa: BLE001
        r["job_traceback"] = traceback.format_exc()[-3000:]
    dump(r, job, rank, outdir)
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)                                        # skip teardown of groups that timed out on purpose


def main(argv):
    job, outdir = argv[1], os.path.abspath(argv[2])
    mp.spawn(_rank_main, args=(job, 2, outdir), nprocs=2, join=True)


if __name__ == "__main__":
    main(sys.argv)
