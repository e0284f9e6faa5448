"""One rank of a 2-process CPU (gloo) job that trains a tiny model for two steps under DDP,
DeepSpeed ZeRO-1/2/3 (DS_ACCELERATOR=cpu), FSDP2 (fully_shard) and FSDP1 (FULL_SHARD,
SHARD_GRAD_OP) in turn, and records the
bytes of every parameter, gradient, fp32 master-weight and optimizer-state tensor this rank
holds. Run by test_model_states.py; writes JSON to argv[1].

Where each category lives (deepspeed 0.19.8, torch 2.13.0):
- DDP: module parameters and their .grad (fp32, Accelerate-style autocast), optimizer.state.
- ZeRO-1/2 (DeepSpeedZeroOptimizer): 16-bit weights = bit16_groups_flat; 16-bit gradient
  partition = averaged_gradients after backward; fp32 master = the inner optimizer's params
  (single_partition_of_fp32_groups); fp32 gradient partition = their .grad while the inner
  optimizer steps; optimizer states = inner optimizer.state.
- ZeRO-3 (DeepSpeedZeroOptimizer_Stage3): 16-bit weights = each parameter's ds_tensor;
  16-bit gradients = grad_partitions_flat_buffer; fp32 master/gradient/states as above.
- FSDP2: local shards (DTensor.to_local()) of parameters, gradients and optimizer states.
- FSDP1 (use_orig_params=True): the original parameters, their .grad and optimizer states, all
  views of each unit's local flat shard.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

IN, HID = 64, 128          # 64*128 + 128*128 + 128*64 = 32768 parameters, no biases


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HID, bias=False), nn.ReLU(), nn.Linear(HID, HID, bias=False), nn.ReLU(),
                         nn.Linear(HID, IN, bias=False))


def nbytes(tensors) -> int:
    """Bytes of distinct tensors (a view counted once per (address, size))."""
    seen = {}
    for t in tensors:
        if t is None:
            continue
        if hasattr(t, "to_local"):
            t = t.to_local()
        if t.numel():
            seen[(t.data_ptr(), t.numel())] = t.numel() * t.element_size()
    return sum(seen.values())


def state_tensors(opt, keys=("exp_avg", "exp_avg_sq")):
    return [s[k] for s in opt.state.values() for k in keys if k in s]


def batch(dtype):
    g = torch.Generator().manual_seed(dist.get_rank())
    return torch.randn(4, IN, generator=g).to(dtype)


def run_ddp():
    from torch.nn.parallel import DistributedDataParallel as DDP
    m = make_model()
    ddp = DDP(m)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = ddp(batch(torch.float32)).float().pow(2).mean()
        loss.backward()
        grads = nbytes(p.grad for p in m.parameters())
        opt.step()
    return {"parameters": nbytes(m.parameters()), "gradients": grads, "master_weights": 0,
            "optimizer_states": nbytes(state_tensors(opt))}


def run_zero(stage):
    import deepspeed
    # The CPU accelerator JIT-builds a shared-memory all-reduce op (needs a C++ compiler, minutes);
    # without it DeepSpeed falls back to torch.distributed (gloo), which is all this test needs.
    # `import deepspeed.comm.torch as m` would bind the torch library (deepspeed.comm re-exports
    # it under that name), so the module is looked up by its full name.
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    m = make_model()
    zo = {"stage": stage}
    if stage == 3:
        zo["stage3_param_persistence_threshold"] = 0     # default 1e5 keeps small params whole on every rank
    cfg = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "zero_optimization": zo,
           "zero_allow_untested_optimizer": True}
    eng, _, _, _ = deepspeed.initialize(model=m, optimizer=torch.optim.AdamW(m.parameters(), lr=1e-3), config=cfg)
    zopt = eng.optimizer
    inner = zopt.optimizer
    seen = {"states_at_init": nbytes(state_tensors(inner))}
    orig_step = inner.step

    def step(*a, **k):
        seen["grads32"] = nbytes(p.grad for g in inner.param_groups for p in g["params"])
        seen["master"] = nbytes(p for g in inner.param_groups for p in g["params"])
        return orig_step(*a, **k)

    inner.step = step
    for _ in range(2):
        loss = eng(batch(torch.bfloat16)).float().pow(2).mean()
        eng.backward(loss)
        if stage < 3:
            ag = zopt.averaged_gradients
            vals = ag.values() if isinstance(ag, dict) else ag
            g16 = nbytes([t for lst in vals if lst is not None for t in lst]
                         + [p.grad for p in m.parameters()])
            params16 = nbytes(zopt.bit16_groups_flat)
        else:
            g16 = nbytes([zopt.grad_partitions_flat_buffer] + [p.grad for p in m.parameters()])
            params16 = nbytes(p.ds_tensor for p in m.parameters())
        eng.step()
    return {"parameters": params16, "gradients": g16 + seen["grads32"], "gradients_16bit": g16,
            "gradients_fp32": seen["grads32"], "master_weights": seen["master"],
            "optimizer_states": nbytes(state_tensors(inner)), "optimizer": type(zopt).__name__,
            "optimizer_states_at_initialize": seen["states_at_init"]}


def run_fsdp2():
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    m = make_model()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in m:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mp_policy=mp)
    fully_shard(m, mp_policy=mp)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    states_before_step = nbytes(state_tensors(opt))
    for _ in range(2):
        opt.zero_grad()
        loss = m(batch(torch.float32)).float().pow(2).mean()
        loss.backward()
        grads = nbytes(p.grad for p in m.parameters())
        opt.step()
    return {"parameters": nbytes(m.parameters()), "gradients": grads, "master_weights": 0,
            "optimizer_states": nbytes(state_tensors(opt)), "optimizer_states_before_first_step": states_before_step}


def run_fsdp1(strategy):
    """FSDP1 (FullyShardedDataParallel) with use_orig_params=True, one unit per Linear plus the root:
    the original parameters are views into each unit's local flat shard."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    m = make_model()
    f = FSDP(m, device_id=torch.device("cpu"), sharding_strategy=ShardingStrategy[strategy], use_orig_params=True,
             auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
             mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16))
    opt = torch.optim.AdamW(f.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        loss = f(batch(torch.float32)).float().pow(2).mean()
        loss.backward()
        grads = nbytes(p.grad for p in f.parameters())
        opt.step()
    return {"parameters": nbytes(f.parameters()), "gradients": grads, "master_weights": 0,
            "optimizer_states": nbytes(state_tensors(opt))}


def main():
    out_path = sys.argv[1]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="file://" + os.environ["PLANNER_STORE"], rank=rank, world_size=world)
    result = {"rank": rank, "world_size": world,
              "total_params": sum(p.numel() for p in make_model().parameters()), "strategies": {}}
    for name, fn in (("ddp", run_ddp), ("zero1", lambda: run_zero(1)), ("zero2", lambda: run_zero(2)),
                     ("zero3", lambda: run_zero(3)), ("fsdp2", run_fsdp2),
                     ("fsdp-full-shard", lambda: run_fsdp1("FULL_SHARD")),
                     ("fsdp-shard-grad-op", lambda: run_fsdp1("SHARD_GRAD_OP"))):
        t0 = time.monotonic()
        try:
            result["strategies"][name] = fn()
            result["strategies"][name]["seconds"] = round(time.monotonic() - t0, 2)
        except Exception as exc:  # recorded, and the test reports it
            result["strategies"][name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        dist.barrier()
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
    # finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
    # destroy_process_group()). Every file is closed and stdout flushed first.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
