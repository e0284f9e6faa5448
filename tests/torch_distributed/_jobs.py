"""Multi-process gloo jobs whose results tests/torch_distributed/test_behaviour.py asserts.

Usage: python _jobs.py JOB OUTDIR   (spawns the job's ranks with torch.multiprocessing; each rank
writes OUTDIR/JOB.rankN.json). Every designed hang runs on a process group with a short timeout,
so a hang becomes a recorded error; the test runs this file under a subprocess timeout as well.
Ranks rendezvous through a FileStore in OUTDIR (no TCP port to collide with other test runs).
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
INIT_TIMEOUT_S = {"trio": 15}                # the job that proves the init_process_group timeout
WORLD = {"detail": 2, "pair": 2, "trio": 3}


def capture(fn):
    """Run fn; return {'ok': value, 's': seconds} or {'error': {...}, 's': seconds}."""
    t0 = time.monotonic()
    try:
        return {"ok": fn(), "s": round(time.monotonic() - t0, 2)}
    except Exception as e:  # noqa: BLE001 - the error itself is the recorded result
        return {"error": {"type": type(e).__name__, "msg": str(e)[:3000]}, "s": round(time.monotonic() - t0, 2)}


def wait_for(path, seconds=60):
    end = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.05)


def tcp_sockets_of_this_process():
    """{'listen': [port], 'established': [[local_ip, local_port, remote_port]]}: this process's TCP
    sockets (IPv4 and IPv6), read from /proc (socket inodes of /proc/self/fd matched in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = {"listen": [], "established": []}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
                if inode not in inodes:
                    continue
                lhex, lport = local.split(":")
                ip = (".".join(str(int(lhex[i:i + 2], 16)) for i in (6, 4, 2, 0)) if len(lhex) == 8
                      else ("127.0.0.1" if lhex.endswith("0100007F") else lhex))
                if state == "0A":
                    out["listen"].append(int(lport, 16))
                elif state == "01":
                    out["established"].append([ip, int(lport, 16), int(remote.split(":")[1], 16)])
    return out


# --------------------------------------------------------------------------- collectives (3 ranks)

def job_collectives(rank, world, r, tmp):
    r["backend"] = dist.get_backend()
    r["backend_config"] = str(dist.get_backend_config())
    r["rank_world"] = [dist.get_rank(), dist.get_world_size()]
    t = torch.tensor([float(rank)]); dist.all_reduce(t); r["all_reduce_default_op"] = t.item()
    t = torch.tensor([float(rank)]); dist.all_reduce(t, op=dist.ReduceOp.AVG); r["all_reduce_avg"] = t.item()
    t = torch.tensor([1.0]); work = dist.all_reduce(t, async_op=True); r["async_before_wait_type"] = type(work).__name__
    work.wait(); r["async_after_wait"] = t.item()
    # gloo's own connections (the store is a file, so every TCP socket here is gloo's): containers-and-networking.md
    dist.barrier(); r["tcp_sockets"] = tcp_sockets_of_this_process(); dist.barrier()
    objs = [None] * world; dist.all_gather_object(objs, {"rank": rank, "pad": "x" * rank}); r["all_gather_object"] = objs
    lst = [{"lr": 0.1, "from": rank}] if rank == 0 else [None]; dist.broadcast_object_list(lst, src=0)
    r["broadcast_object_list"] = lst
    got = [None] * world if rank == 0 else None; dist.gather_object(["r", rank], got, dst=0); r["gather_object"] = got
    out = [None]; dist.scatter_object_list(out, [f"to{i}" for i in range(world)] if rank == 0 else None, src=0)
    r["scatter_object_list"] = out[0]
    if rank == 0:
        dist.send(torch.tensor([42.0]), dst=1)
    elif rank == 1:
        t = torch.zeros(1); dist.recv(t, src=0); r["recv"] = t.item()
    # a subgroup: every rank calls new_group, non-members get GroupMember.NON_GROUP_MEMBER
    sub = dist.new_group([0, 1])
    r["subgroup_non_member"] = sub == dist.GroupMember.NON_GROUP_MEMBER
    r["subgroup_rank"] = dist.get_rank(sub)
    if rank in (0, 1):
        t = torch.ones(1); dist.all_reduce(t, group=sub); r["subgroup_sum"] = t.item()
    # members-only creation (set-3 s3-td-02): use_local_synchronization=True, rank 2 never calls; the
    # all-rank new_group calls below still pair up (hashed names do not advance the group counter)
    if rank in (0, 1):
        loc = dist.new_group([0, 1], use_local_synchronization=True)
        t = torch.ones(1) * (rank + 1); dist.all_reduce(t, group=loc); r["local_sync_sum"] = t.item()
        r["local_sync_same_ranks_again"] = capture(lambda: type(dist.new_group([0, 1], use_local_synchronization=True)).__name__)
    # monitored_barrier: ranks 1 and 2 never arrive
    g = dist.new_group(timeout=SHORT)
    if rank == 0:
        r["monitored_barrier_all"] = capture(lambda: dist.monitored_barrier(
            group=g, timeout=datetime.timedelta(seconds=2), wait_all_ranks=True))
    g = dist.new_group(timeout=SHORT)
    if rank == 0:
        r["monitored_barrier_first"] = capture(lambda: dist.monitored_barrier(group=g, timeout=datetime.timedelta(seconds=2)))
    dist.barrier()
    # mismatched shapes on gloo: no shape check (needs TORCH_DISTRIBUTED_DEBUG=DETAIL, see job_detail)
    g = dist.new_group(timeout=SHORT)
    t = torch.ones(2 if rank == 0 else 3)
    r["mismatched_shapes"] = capture(lambda: (dist.all_reduce(t, group=g), t.tolist())[1])
    dist.barrier()
    # a rank skips a collective on the default group: the others wait for init_process_group's timeout
    if rank != 2:
        r["skipped_collective"] = capture(lambda: dist.all_reduce(torch.ones(1)))
    else:
        time.sleep(INIT_TIMEOUT_S["trio"] + 1)
    # new_group is collective over the whole world: rank 2 does not call it (run last: it breaks group naming)
    if rank != 2:
        r["new_group_missing_rank"] = capture(lambda: type(dist.new_group([0, 1], timeout=SHORT)).__name__)

    def next_group_all_reduce():
        g = dist.new_group(timeout=SHORT)          # group names come from a per-process counter
        t = torch.ones(1)
        dist.all_reduce(t, group=g)
        return t.item()
    if rank != 2:
        r["next_new_group_after_skip"] = capture(next_group_all_reduce)
    else:                                          # rank 2 blocks longer (gloo connect); record that it is stuck
        import threading
        th = threading.Thread(target=lambda: r.__setitem__("next_new_group_after_skip", capture(next_group_all_reduce)),
                              daemon=True)
        th.start(); th.join(6)
        r["rank2_still_blocked_after_6s"] = th.is_alive()


# --------------------------------------------------------------------------- TORCH_DISTRIBUTED_DEBUG=DETAIL (2 ranks)

class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(3, 2)
        self.unused = nn.Linear(3, 2)

    def forward(self, x):
        return self.used(x)


def unused_param_run(**ddp_kwargs):
    """Three training steps through a DDP model with a parameter that never gets a gradient."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(TwoHeads(), **ddp_kwargs)
    steps = []
    for i in range(3):
        res = capture(lambda: model(torch.ones(2, 3)).sum().backward())
        steps.append(res)
        if "error" in res:
            break
    return {"steps": steps, "unused_grad_is_none": model.module.unused.weight.grad is None}


class CondCompute(nn.Module):
    """l2 runs only when asked: conditional compute (an expert some ranks skip)."""
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.l2 = nn.Linear(4, 4)

    def forward(self, x, use_l2):
        h = self.l1(x)
        return self.l2(h) if use_l2 else h


def fsdp2_unused_run(rank, flag, pg):
    """One fully_shard group holding l1 and l2; rank 0 uses l2, rank 1 does not; two backward passes."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = CondCompute()
    fully_shard(model, mesh=DeviceMesh.from_group(pg, "cpu"))
    if flag:
        model.set_reduce_scatter_unused_params(True)

    def steps():
        for _ in range(2):
            model(torch.ones(2, 4), use_l2=rank == 0).sum().backward()
        g = model.l2.weight.grad
        return None if g is None else round(float(g.full_tensor().abs().sum()), 4)
    return capture(steps)


# --------------------------------------------------------------------------- s12: barrier pairing, SyncBatchNorm

def barrier_in_main_only_branch(rank, tmp, tag):
    """s12-fd-k04: rank 0 calls barrier() inside main-only work; every rank then calls barrier().

    Barriers carry no call-site identity: rank 1's "wait for main" barrier pairs with rank 0's inner
    one, so rank 1 goes on before the file exists. Rank 1 then calls one extra barrier so the counts
    line up again (the real bug leaves them shifted)."""
    path = os.path.join(tmp, f"tokenizer.{tag}")
    dist.barrier()
    t0 = time.time()
    if rank == 0:
        dist.barrier()                     # nested "run on main" helper that synchronises
        time.sleep(0.4)
        open(path, "w").close()
    dist.barrier()                         # the barrier every rank reaches
    out = {"passed_s": round(time.time() - t0, 2), "file_existed": os.path.exists(path)}
    if rank == 1:
        dist.barrier()                     # realign with rank 0's second barrier
    dist.barrier()
    return out


def shifted_count_next_collective(rank):
    """s12-fd-k04 under DETAIL: the shifted count surfaces at the next collective of another type."""
    g = dist.new_group(timeout=SHORT)
    t = torch.ones(2)
    def seq():
        if rank == 0:
            dist.barrier(group=g)          # inner barrier (main-only work)
            dist.barrier(group=g)          # barrier for every rank
        else:
            dist.barrier(group=g)          # released by rank 0's inner barrier
        dist.all_reduce(t, group=g)        # rank 1 meets rank 0's second barrier here
    return capture(seq)


def syncbn_probe(rank):
    """s12-td-g01 / s12-td-i03: SyncBatchNorm with an initialised 2-rank gloo group, CPU tensors."""
    out = {}
    bn = nn.BatchNorm1d(3)
    sbn = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(bn))[0]
    out["type"] = type(sbn).__name__
    out["weight_is_same_object"] = sbn.weight is bn.weight
    out["bias_is_same_object"] = sbn.bias is bn.bias
    out["running_mean_is_same_object"] = sbn.running_mean is bn.running_mean
    out["process_group_default"] = repr(sbn.process_group)
    g = dist.new_group()
    sub = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(3), process_group=g)
    out["process_group_stored"] = sub.process_group is g
    x = torch.arange(12.).reshape(4, 3) + rank
    out["train_cpu"] = capture(lambda: sbn.train()(x).shape)
    sbn.eval()
    y = sbn(x)
    ref = torch.nn.functional.batch_norm(x, sbn.running_mean, sbn.running_var, sbn.weight, sbn.bias, False, 0.0, sbn.eps)
    out["eval_cpu_equals_plain_bn"] = bool(torch.allclose(y, ref))
    return out


def job_detail(rank, world, r, tmp):
    r["debug_level"] = str(dist.get_debug_level())
    g = dist.new_group(timeout=SHORT)
    t = torch.ones(2)
    r["op_mismatch"] = capture(lambda: dist.all_reduce(t, group=g) if rank == 0 else dist.broadcast(t, src=1, group=g))
    dist.barrier()
    g = dist.new_group(timeout=SHORT)
    t = torch.ones(2 if rank == 0 else 3)
    r["shape_mismatch"] = capture(lambda: dist.all_reduce(t, group=g))
    dist.barrier()
    # s11-fd-c03: FSDP2 with a parameter used on rank 0 only, with and without set_reduce_scatter_unused_params
    for flag in (True, False):
        r[f"fsdp2_unused_flag_{flag}"] = fsdp2_unused_run(rank, flag, dist.new_group(timeout=SHORT))
        dist.barrier()
    r["barrier_main_only"] = barrier_in_main_only_branch(rank, tmp, "detail")
    r["barrier_shifted_next"] = shifted_count_next_collective(rank)
    dist.barrier()
    r["syncbn"] = syncbn_probe(rank)
    dist.barrier()
    dump(r, "detail", rank, tmp)
    # torch 2.13.0+cpu: constructing DDP under DETAIL crashes the process (recorded by the test from the exit)
    from torch.nn.parallel import DistributedDataParallel as DDP
    DDP(nn.Linear(2, 2))
    r["ddp_constructed_under_detail"] = True


# --------------------------------------------------------------------------- DDP (2 ranks)

def ddp_ctor(module, **kw):
    from torch.nn.parallel import DistributedDataParallel as DDP
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DDP(module, **kw)
    return model, [f"{w.category.__name__}: {w.message}" for w in caught]


def resume_run(rank, tmp, every_rank, model_after_wrap=False):
    """Rank 0 saves model + Adam state; on resume the model state is loaded on rank 0 only (DDP's
    construction broadcast makes the replicas equal), the optimizer state on rank 0 only or on every rank."""
    path = os.path.join(tmp, "resume.pt")
    if rank == 0 and not os.path.exists(path):
        torch.manual_seed(0)
        m = nn.Linear(3, 1)
        opt = torch.optim.Adam(m.parameters(), lr=0.1)
        for _ in range(3):
            m(torch.ones(2, 3)).pow(2).sum().backward(); opt.step(); opt.zero_grad()
        torch.save({"model": m.state_dict(), "optimizer": opt.state_dict()}, path)
    dist.barrier()
    ck = torch.load(path, map_location="cpu")
    torch.manual_seed(rank + 7)
    m = nn.Linear(3, 1)
    if rank == 0 and not model_after_wrap:
        m.load_state_dict(ck["model"])
    model, _ = ddp_ctor(m)
    if rank == 0 and model_after_wrap:
        model.module.load_state_dict(ck["model"])   # after wrapping: nothing broadcasts it any more
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    if every_rank or rank == 0:
        opt.load_state_dict(ck["optimizer"])
    def gathered():
        w = torch.cat([p.detach().flatten() for p in model.parameters()])
        out = [torch.zeros_like(w) for _ in range(dist.get_world_size())]
        dist.all_gather(out, w)
        return all(torch.equal(out[0], o) for o in out[1:])
    res = {"equal_after_wrap": gathered(), "opt_state_len": len(opt.state)}
    model(torch.ones(2, 3)).pow(2).sum().backward(); opt.step()
    res["equal_after_one_step"] = gathered()
    return res


def job_ddp(rank, world, r, tmp):
    """Run with TORCH_DISTRIBUTED_DEBUG=INFO (the test sets it): the unused-parameter error then names them."""
    r["debug_level"] = str(dist.get_debug_level())
    from torch.distributed.algorithms.join import Join
    from torch.utils.checkpoint import checkpoint

    # construction broadcasts rank 0's parameters and buffers
    torch.manual_seed(rank)
    lin = nn.Linear(3, 1)
    model, _ = ddp_ctor(lin)
    r["init_weight"] = model.module.weight.detach().flatten().tolist()
    r["state_dict_keys"] = sorted(model.state_dict())
    r["module_state_dict_keys"] = sorted(model.module.state_dict())
    # gradients are averaged: rank r sees input filled with r+1
    x = torch.full((2, 3), float(rank + 1))
    local = nn.Linear(3, 1); local.load_state_dict(model.module.state_dict())
    local(x).sum().backward()
    model(x).sum().backward()
    r["local_grad"] = local.weight.grad.flatten().tolist()
    r["ddp_grad"] = model.module.weight.grad.flatten().tolist()

    # no_sync: grads stay local inside, the next synced backward averages the accumulated sum
    torch.manual_seed(0)
    model, _ = ddp_ctor(nn.Linear(3, 1, bias=False))
    with model.no_sync():
        model(torch.full((1, 3), float(rank + 1))).sum().backward()
    r["no_sync_grad_inside"] = model.module.weight.grad.flatten().tolist()
    model(torch.full((1, 3), float(10 * (rank + 1)))).sum().backward()
    r["no_sync_grad_after_sync"] = model.module.weight.grad.flatten().tolist()

    # unused parameters
    r["unused_default"] = unused_param_run()
    r["unused_find_unused"] = unused_param_run(find_unused_parameters=True)
    r["unused_static_graph"] = unused_param_run(static_graph=True)

    # buffers: BatchNorm running stats under the three buffer settings
    def bn_run(**kw):
        torch.manual_seed(0)
        bn = nn.BatchNorm1d(2)
        bn.running_mean.fill_(float(rank + 1))      # rank-local buffer before wrapping
        model, warns = ddp_ctor(bn, **kw)
        after_init = model.module.running_mean.tolist()
        model.train()
        model(torch.full((4, 2), float(10 * (rank + 1))) + torch.arange(4.).unsqueeze(1))
        after_train_fwd = model.module.running_mean.tolist()
        model.eval()
        with torch.no_grad():
            model(torch.zeros(1, 2))
        after_second_fwd = model.module.running_mean.tolist()
        return {"after_init": after_init, "after_train_fwd": after_train_fwd,
                "after_second_fwd": after_second_fwd, "warnings": warns}
    r["bn_default"] = bn_run()
    r["bn_forward_sync_false"] = bn_run(forward_sync_buffers=False)
    r["bn_broadcast_buffers_false"] = bn_run(broadcast_buffers=False)

    # construction rules
    r["device_ids_on_cpu"] = capture(lambda: ddp_ctor(nn.Linear(2, 2), device_ids=[0]))
    frozen = nn.Linear(2, 2).requires_grad_(False)
    r["no_trainable_params"] = capture(lambda: ddp_ctor(frozen))

    # s12-ck-e09: resume; DDP broadcasts parameters/buffers at construction, never optimizer state
    r["resume_optimizer_rank0_only"] = resume_run(rank, tmp, every_rank=False)
    r["resume_optimizer_every_rank"] = resume_run(rank, tmp, every_rank=True)
    r["resume_model_after_wrap_rank0_only"] = resume_run(rank, tmp, every_rank=True, model_after_wrap=True)

    # communication hook: a hook that sums instead of averaging
    def sum_hook(state, bucket):
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    torch.manual_seed(0)
    model, _ = ddp_ctor(nn.Linear(3, 1, bias=False))
    model.register_comm_hook(state=None, hook=sum_hook)
    model(torch.full((1, 3), float(rank + 1))).sum().backward()
    r["sum_hook_grad"] = model.module.weight.grad.flatten().tolist()
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    torch.manual_seed(0)
    model, _ = ddp_ctor(nn.Linear(3, 1, bias=False))
    model.register_comm_hook(state=None, hook=default_hooks.allreduce_hook)
    model(torch.full((1, 3), float(rank + 1))).sum().backward()
    r["allreduce_hook_grad"] = model.module.weight.grad.flatten().tolist()

    # gradient (activation) checkpointing inside DDP
    class Ck(nn.Module):
        def __init__(self, reentrant, twice=False):
            super().__init__()
            self.a, self.b, self.reentrant, self.twice = nn.Linear(3, 3), nn.Linear(3, 1), reentrant, twice

        def forward(self, x):
            h = checkpoint(self.a, x, use_reentrant=self.reentrant)
            if self.twice:
                h = checkpoint(self.a, h, use_reentrant=self.reentrant)
            return self.b(h)

    def ck_run(reentrant, twice=False, **kw):
        torch.manual_seed(0)
        model, _ = ddp_ctor(Ck(reentrant, twice), **kw)
        x = torch.ones(2, 3, requires_grad=True)
        steps = []
        for _ in range(2):
            res = capture(lambda: model(x).sum().backward())
            steps.append(res)
            if "error" in res:
                break
        return steps
    r["ckpt_nonreentrant_twice"] = ck_run(False, twice=True)
    r["ckpt_reentrant_twice"] = ck_run(True, twice=True)
    r["ckpt_reentrant_twice_static"] = ck_run(True, twice=True, static_graph=True)
    r["ckpt_reentrant_find_unused"] = ck_run(True, find_unused_parameters=True)
    r["ckpt_nonreentrant_find_unused"] = ck_run(False, find_unused_parameters=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoint(nn.Linear(2, 2), torch.ones(1, 2, requires_grad=True))
    r["ckpt_default_warning"] = [str(w.message) for w in caught]

    # SyncBatchNorm
    net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    r["syncbn_types"] = [type(m).__name__ for m in conv]
    r["syncbn_train_cpu"] = capture(lambda: conv(torch.ones(2, 2)).tolist())
    conv.eval()
    r["syncbn_eval_cpu"] = capture(lambda: conv(torch.ones(2, 2)).shape[0])

    # uneven inputs: rank 0 has 3 batches, rank 1 has 2; a short-timeout group turns the hang into an error
    g = dist.new_group(timeout=SHORT)
    batches = 3 if rank == 0 else 2

    def uneven(use_join):
        torch.manual_seed(0)
        model, _ = ddp_ctor(nn.Linear(2, 1, bias=False), process_group=g)
        grads = []

        def loop():
            for _ in range(batches):
                model.zero_grad()
                model(torch.ones(1, 2)).sum().backward()
                grads.append(model.module.weight.grad.flatten().tolist())
        if use_join:
            with Join([model]):
                loop()
            return grads
        return capture(loop)
    r["uneven_with_join"] = capture(lambda: uneven(True))
    dist.barrier()
    g = dist.new_group(timeout=SHORT)
    r["uneven_without_join"] = uneven(False)
    dist.barrier()
    # requires_grad changed after wrapping: DDP keeps the parameter set it saw at construction
    def late_unfreeze():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
        net[0].weight.requires_grad_(False)
        m, _ = ddp_ctor(net)
        net[0].weight.requires_grad_(True)
        m(torch.full((2, 3), float(rank + 1))).sum().backward()
        return {"late": net[0].weight.grad.flatten().tolist(), "synced": net[1].weight.grad.flatten().tolist()}

    def late_freeze():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
        m, _ = ddp_ctor(net)
        net[0].weight.requires_grad_(False)
        steps = []
        for _ in range(2):
            steps.append(capture(lambda: m(torch.full((2, 3), float(rank + 1))).sum().backward()))
            if "error" in steps[-1]:
                break
        return {"steps": steps, "l1_bias_grad": net[0].bias.grad.flatten().tolist()}
    r["ddp_late_unfreeze"] = capture(late_unfreeze)
    r["ddp_late_freeze"] = capture(late_freeze)
    dist.barrier()
    # evaluating through the DDP wrapper on rank 0 only (a module with buffers): forward broadcasts buffers
    g = dist.new_group(timeout=SHORT)
    model, _ = ddp_ctor(nn.BatchNorm1d(2), process_group=g)
    model.eval()
    if rank == 0:
        with torch.no_grad():
            r["eval_rank0_wrapper"] = capture(lambda: model(torch.ones(1, 2)).shape[0])
            r["eval_rank0_module"] = capture(lambda: model.module(torch.ones(1, 2)).shape[0])
    else:
        time.sleep(4)


# --------------------------------------------------------------------------- data, checkpoints, FSDP2 + DCP save (2 ranks)

class Custom:
    """A user class: torch.load's default weights_only=True refuses to unpickle it."""


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 8)
        self.l2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def job_state(rank, world, r, tmp):
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    ds = list(range(10))
    s = DistributedSampler(ds)                         # num_replicas and rank from the default group
    r["sampler_defaults"] = {"num_replicas": s.num_replicas, "rank": s.rank, "shuffle": s.shuffle,
                             "seed": s.seed, "drop_last": s.drop_last, "len": len(s)}
    r["epoch0_a"] = list(s); r["epoch0_b"] = list(s)
    s.set_epoch(1); r["epoch1"] = list(s)
    r["seed_rank"] = list(DistributedSampler(ds, seed=rank))
    r["uneven_pad"] = list(DistributedSampler(list(range(5)), shuffle=False))
    r["uneven_drop_last"] = list(DistributedSampler(list(range(5)), shuffle=False, drop_last=True))
    dl = DataLoader(list(range(5)), batch_size=2, sampler=DistributedSampler(list(range(5)), shuffle=False))
    r["loader_batches"] = [b.tolist() for b in dl]

    # rank-0 save + barrier, then every rank loads with map_location
    torch.manual_seed(0)
    model = Tiny()
    path = os.path.join(tmp, "rank0.pt")
    if rank == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    seen = []
    sd = torch.load(path, map_location=lambda storage, loc: (seen.append(loc), storage)[1])
    r["map_location_loc"] = sorted(set(seen))
    r["rank0_load_equal"] = all(torch.equal(sd[k], v) for k, v in model.state_dict().items())

    if rank == 0:
        torch.save({"obj": Custom()}, os.path.join(tmp, "custom.pt"))
    dist.barrier()
    r["weights_only_default"] = capture(lambda: torch.load(os.path.join(tmp, "custom.pt")))

    # FSDP2 on CPU / gloo, DCP save of a 2-rank sharded model and optimizer
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_state_dict
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    import torch.distributed.checkpoint as dcp
    torch.manual_seed(0)
    model = Tiny()
    full_before = {k: v.clone() for k, v in model.state_dict().items()}
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fully_shard(model.l1, mp_policy=mp_policy)
    fully_shard(model.l2, mp_policy=mp_policy)
    fully_shard(model, mp_policy=mp_policy)
    w = model.l1.weight
    r["fsdp_param"] = {"type": type(w).__name__, "placements": [str(p) for p in w.placements],
                       "local_shape": list(w.to_local().shape), "global_shape": list(w.shape), "dtype": str(w.dtype)}
    r["fsdp_type"] = type(model).__name__
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    out = model(torch.randn(4, 6))
    r["fsdp_output_dtype"] = str(out.dtype)
    out.float().sum().backward()
    r["fsdp_grad"] = {"type": type(model.l1.weight.grad).__name__, "dtype": str(model.l1.weight.grad.dtype)}
    opt.step()
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    r["full_state_dict_keys"] = sorted(full)
    r["full_changed_by_step"] = bool(full) and not torch.equal(full["l1.weight"], full_before["l1.weight"])
    msd, osd = get_state_dict(model, opt)
    ck = os.path.join(tmp, "dcp")
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=ck)
    dist.barrier()
    r["dcp_files"] = sorted(os.listdir(ck))
    if rank == 0:
        torch.save(full, os.path.join(tmp, "full_after_step.pt"))


# --------------------------------------------------------------------------- DCP load at 3 ranks (resharding)

def job_reshard(rank, world, r, tmp):
    """Collective part: load the 2-rank checkpoint into a 3-rank FSDP2 model, gather the full state."""
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_state_dict,
                                                         set_state_dict)
    from torch.distributed.fsdp import fully_shard
    import torch.distributed.checkpoint as dcp
    torch.manual_seed(123)                            # different init: values must come from the checkpoint
    model = Tiny()
    fully_shard(model.l1); fully_shard(model.l2); fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    r["local_rows_l1"] = model.l1.weight.to_local().shape[0]
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=os.path.join(tmp, "dcp"))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    r["optim_step_loaded"] = sorted({float(v["step"]) for v in opt.state_dict()["state"].values()})
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        torch.save(full, os.path.join(tmp, "full_after_reshard.pt"))


def reshard_compare(rank, r, tmp):
    """Rank-0 local part (no collectives), run after the collectives section."""
    if rank != 0:
        return
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    ref = torch.load(os.path.join(tmp, "full_after_step.pt"))
    full = torch.load(os.path.join(tmp, "full_after_reshard.pt"))
    r["reshard_equal"] = sorted(ref) == sorted(full) and all(torch.equal(ref[k], full[k]) for k in ref)
    # plain full-size tensors as the target, no_dist=True while the 3-rank group is still initialized
    import torch.distributed.checkpoint as dcp
    plain = {"model": {k: torch.zeros_like(v) for k, v in ref.items()}}
    dcp.load(plain, checkpoint_id=os.path.join(tmp, "dcp"), no_dist=True)
    r["plain_no_dist_group_up"] = dist.is_initialized()
    r["plain_no_dist_equal"] = all(torch.equal(plain["model"][k], ref[k]) for k in ref)
    dcp_to_torch_save(os.path.join(tmp, "dcp"), os.path.join(tmp, "converted.pt"))
    conv = torch.load(os.path.join(tmp, "converted.pt"))
    r["dcp_to_torch_save_keys"] = sorted(conv)
    r["dcp_to_torch_save_equal"] = all(torch.equal(conv["model"][k], ref[k]) for k in ref)


def job_pair(rank, world, r, tmp):
    """2 ranks, TORCH_DISTRIBUTED_DEBUG=INFO: data loading, checkpoints, FSDP2 + DCP save, then DDP."""
    job_state(rank, world, r, tmp)
    dist.barrier()
    job_ddp(rank, world, r, tmp)


def job_trio(rank, world, r, tmp):
    """3 ranks: DCP load of the pair job's checkpoint (resharding), then collectives and designed hangs."""
    job_reshard(rank, world, r, tmp)
    dist.barrier()
    job_collectives(rank, world, r, tmp)
    reshard_compare(rank, r, tmp)


# --------------------------------------------------------------------------- runner

JOBS = {"detail": job_detail, "pair": job_pair, "trio": job_trio}


def dump(r, job, rank, outdir):
    with open(os.path.join(outdir, f"{job}.rank{rank}.json"), "w") as f:
        json.dump(r, f, default=repr)


def _rank_main(rank, job, world, outdir):
    faulthandler.enable()
    torch.set_num_threads(1)
    r = {}
    try:
        dist.init_process_group("gloo", init_method=f"file://{outdir}/{job}.store", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=INIT_TIMEOUT_S.get(job, 120)))
        JOBS[job](rank, world, r, outdir)
    except Exception:  # noqa: BLE001 - recorded for the test to show
        r["job_traceback"] = traceback.format_exc()[-4000:]
    dump(r, job, rank, outdir)
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)                                        # skip teardown of groups that timed out on purpose


def main(argv):
    job, outdir = argv[1], os.path.abspath(argv[2])
    mp.spawn(_rank_main, args=(job, WORLD[job], outdir), nprocs=WORLD[job], join=True)


if __name__ == "__main__":
    main(sys.argv)
