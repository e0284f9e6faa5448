"""One rank of a 2-process CPU (gloo) job that trains a tiny model with gradient accumulation
under DDP, DeepSpeed ZeRO-1/2/3 (DS_ACCELERATOR=cpu), FSDP1 (FULL_SHARD, SHARD_GRAD_OP) and FSDP2 (fully_shard),
and records after every micro-step's backward how many bytes of gradient this rank holds.
Run by test_gradient_accumulation.py; argv: output JSON path, then the case names to run.

A case runs two optimizer steps of GA micro-steps each (GA = 1 or 2). Recorded per micro-step:
- grads: bytes of every gradient tensor the rank holds after backward returns (the union of
  their memory ranges, so views into a flat buffer count once). Not counted: the reduce buckets
  of DDP and DeepSpeed (the planner's `communication_buffers`); their bytes are reported apart.
- grads_before_reduction (DeepSpeed only): the same at the end of autograd, before the engine's
  reduction (DeepSpeedEngine.allreduce_gradients) runs.
- grads_in_step (DeepSpeed, at the boundary): held while the inner optimizer steps, when the
  fp32 gradient partition exists too.
- unsharded_params (FSDP1/FSDP2): bytes of gathered (unsharded) parameters still allocated.
- comm: bytes handed to each kind of gloo collective during the micro-step (forward, backward and,
  at the boundary, the optimizer step), from the profiler's gloo:* events. gloo has no
  reduce-scatter: DeepSpeed and FSDP all-reduce the whole buffer instead, so the figures are
  payloads, not the ring traffic the planner plans; the test compares how they scale with GA.
  Collectives under 1 KiB (overflow flags, scalars) are counted apart, as `<kind>_small`.
Where the gradients live (deepspeed 0.19.8, torch 2.13.0):
- DDP: each parameter's .grad (fp32: Accelerate-style autocast keeps weights fp32).
- ZeRO-1/2: the 16-bit parameters' .grad and .grad_accum, the optimizer's averaged_gradients,
  all_grad_tensors and grads_in_partition, the fp32 partition's .grad during step.
- ZeRO-3: grad_partitions_flat_buffer, the parameters' .grad, the fp32 partition's .grad.
- FSDP1: each FlatParameter's .grad and _saved_grad_shard and the original parameters' .grad views.
- FSDP2: each FSDPParam's sharded .grad (local shard), unsharded_accumulated_grad and the
  unsharded parameter's .grad.
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
BF16 = torch.bfloat16


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HID, bias=False), nn.ReLU(), nn.Linear(HID, HID, bias=False), nn.ReLU(),
                         nn.Linear(HID, IN, bias=False))


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def span_bytes(tensors) -> dict:
    """Bytes covered by the memory ranges of the given tensors (overlaps and views counted once),
    in all and per dtype: {"total": n, "bfloat16": n, "float32": n}."""
    spans = []
    for t in tensors:
        if t is None:
            continue
        t = local(t)
        if t.numel():
            start = t.data_ptr()
            spans.append((start, start + t.numel() * t.element_size(), str(t.dtype).replace("torch.", "")))
    out, end = {"total": 0}, None
    for a, b, dtype in sorted(spans):
        new = b - a if end is None or a >= end else max(0, b - end)
        end = b if end is None else max(end, b)
        out["total"] += new
        if new:
            out[dtype] = out.get(dtype, 0) + new
    return out


def outside(tensors, buffers):
    """The tensors that do not live inside one of `buffers` (reduce buckets), and those that do."""
    ranges = [(b.data_ptr(), b.data_ptr() + b.numel() * b.element_size()) for b in buffers if b is not None]
    keep, inside = [], []
    for t in tensors:
        if t is None:
            continue
        p = local(t).data_ptr()
        (inside if any(a <= p < e for a, e in ranges) else keep).append(t)
    return keep, inside


DTYPE_BYTES = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8, "long int": 8, "int": 4,
               "bool": 1, "unsigned char": 1, "signed char": 1}


class Comm:
    """Bytes this rank hands to gloo collectives inside the block, per collective (the profiler's
    gloo:* events: input shapes and dtypes), so DDP's C++ reducer is counted like Python callers."""

    def __enter__(self):
        from torch.profiler import ProfilerActivity, profile
        self.prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        self.prof.__exit__(*exc)
        self.bytes = {}
        for e in self.prof.events():
            if not e.name.startswith("gloo:"):
                continue
            n = 0
            for shape, dtype in zip(e.input_shapes, getattr(e, "input_dtypes", []) or []):
                if shape and all(isinstance(d, int) for d in shape):
                    numel = 1
                    for d in shape:
                        numel *= d
                    n += numel * DTYPE_BYTES.get(dtype, 4)
            op = e.name.split(":", 1)[1] + ("_small" if n < 1024 else "")    # flags and scalars apart
            self.bytes[op] = self.bytes.get(op, 0) + n
        return False


def batch(dtype, k):
    g = torch.Generator().manual_seed(100 * dist.get_rank() + k)
    return torch.randn(4, IN, generator=g).to(dtype)


def flat(values):
    out = []
    for v in values:
        if v is None:
            continue
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif hasattr(v, "flat_partition"):          # GradPartitionBufferGroup
            out.append(v.flat_partition)
        else:
            out.extend(flat(v))
    return out


# ----------------------------------------------------------------------------- DDP

def run_ddp(ga, no_sync):
    from torch.nn.parallel import DistributedDataParallel as DDP
    import contextlib
    m = make_model()
    ddp = DDP(m)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    rec, k = [], 0
    for _ in range(2):
        for micro in range(ga):
            boundary = micro == ga - 1
            ctx = ddp.no_sync() if (no_sync and not boundary) else contextlib.nullcontext()
            with Comm() as comm:
                with ctx:
                    with torch.autocast("cpu", dtype=BF16):
                        loss = ddp(batch(torch.float32, k)).float().pow(2).mean()
                    loss.backward()
                grads = span_bytes(p.grad for p in m.parameters())
                if boundary:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            k += 1
            rec.append({"boundary": boundary, "grads": grads, "comm": comm.bytes})
    return rec


# ----------------------------------------------------------------------------- DeepSpeed

def ds_grad_tensors(zopt, model, stage):
    ts = [p.grad for p in model.parameters()] + [getattr(p, "grad_accum", None) for p in model.parameters()]
    if stage < 3:
        ag = zopt.averaged_gradients
        ts += flat(ag.values() if isinstance(ag, dict) else ag)
        ts += flat(getattr(zopt, "all_grad_tensors", {}).values())
        ts.append(getattr(zopt, "grads_in_partition", None))
        buckets = [b for bucket in zopt.ipg_buckets.values() for b in bucket.buffer]
    else:
        ts.append(getattr(zopt, "grad_partitions_flat_buffer", None))
        buckets = []
        for bucket in getattr(zopt, "ipg_buckets", {}).values():
            buf = getattr(bucket, "buffer", None)
            buckets += [buf] if isinstance(buf, torch.Tensor) else list(buf or [])
    ts += [p.grad for g in zopt.optimizer.param_groups for p in g["params"]]
    keep, inside = outside(ts, buckets)
    return span_bytes(keep), span_bytes(inside)["total"]


def run_zero(stage, ga, overlap_comm=None):
    import deepspeed
    # The CPU accelerator JIT-builds a shared-memory all-reduce op (needs a C++ compiler, minutes);
    # without it DeepSpeed falls back to torch.distributed (gloo), which is all this test needs.
    # `import deepspeed.comm.torch as m` would bind the torch library (deepspeed.comm re-exports
    # it under that name), so the module is looked up by its full name.
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    m = make_model()
    zo = {"stage": stage}
    if overlap_comm is not None:
        zo["overlap_comm"] = overlap_comm
    if stage == 3:
        zo["stage3_param_persistence_threshold"] = 0
    cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": ga, "bf16": {"enabled": True},
           "zero_optimization": zo, "zero_allow_untested_optimizer": True}
    eng, _, _, _ = deepspeed.initialize(model=m, optimizer=torch.optim.AdamW(m.parameters(), lr=1e-3), config=cfg)
    zopt = eng.optimizer
    inner = zopt.optimizer
    cur = {}

    orig_reduce = eng.allreduce_gradients

    def allreduce_gradients(*a, **kw):
        cur["grads_before_reduction"] = ds_grad_tensors(zopt, m, stage)[0]
        return orig_reduce(*a, **kw)

    eng.allreduce_gradients = allreduce_gradients
    orig_step = inner.step

    def step(*a, **kw):
        cur["grads_in_step"] = ds_grad_tensors(zopt, m, stage)[0]
        return orig_step(*a, **kw)

    inner.step = step
    rec, k = [], 0
    for _ in range(2):
        for micro in range(ga):
            cur.clear()
            boundary = eng.is_gradient_accumulation_boundary()
            assert boundary == (micro == ga - 1), (micro, ga, boundary)
            with Comm() as comm:
                loss = eng(batch(BF16, k)).float().pow(2).mean()
                eng.backward(loss)
                grads, in_bucket = ds_grad_tensors(zopt, m, stage)
                full = sum(p.numel() for p in m.parameters() if p.grad is not None)
                eng.step()
            k += 1
            r = {"boundary": boundary, "grads": grads, "grads_in_reduce_bucket": in_bucket,
                 "grads_before_reduction": cur.get("grads_before_reduction"), "full_grad_params": full,
                 "comm": comm.bytes}
            if "grads_in_step" in cur:
                r["grads_in_step"] = cur["grads_in_step"]
            rec.append(r)
    return {"micro_steps": rec, "optimizer": type(zopt).__name__,
            "overlap_comm": bool(getattr(zopt, "overlap_comm", None))}


# ----------------------------------------------------------------------------- FSDP1

def run_fsdp1(ga, strategy="FULL_SHARD"):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    import contextlib
    m = make_model()
    # Accelerate's FSDP mixed precision: param_dtype = reduce_dtype = bf16 (FullyShardedDataParallelPlugin)
    f = FSDP(m, device_id=torch.device("cpu"), sharding_strategy=ShardingStrategy[strategy], use_orig_params=True,
             auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
             mixed_precision=MixedPrecision(param_dtype=BF16, reduce_dtype=BF16, buffer_dtype=BF16))
    opt = torch.optim.AdamW(f.parameters(), lr=1e-3)
    handles = [mod._handle for mod in FSDP.fsdp_modules(f) if getattr(mod, "_handle", None) is not None]

    def held():
        ts = [p.grad for p in f.parameters()]
        full = 0
        for h in handles:
            fp = h.flat_param
            ts += [fp.grad, getattr(fp, "_saved_grad_shard", None)]
            padded = getattr(fp, "_full_param_padded", None)
            if padded is not None:
                full += padded.untyped_storage().nbytes()
        return span_bytes(ts), full

    rec, k = [], 0
    for _ in range(2):
        for micro in range(ga):
            boundary = micro == ga - 1
            with Comm() as comm:
                with (contextlib.nullcontext() if boundary else f.no_sync()):
                    loss = f(batch(torch.float32, k)).float().pow(2).mean()
                    loss.backward()
                grads, full = held()
                if boundary:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            k += 1
            rec.append({"boundary": boundary, "grads": grads, "unsharded_params": full, "comm": comm.bytes})
    return {"micro_steps": rec, "units": len(handles)}


# ----------------------------------------------------------------------------- FSDP2

def run_fsdp2(ga, reduce_dtype):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    m = make_model()
    mp = MixedPrecisionPolicy(param_dtype=BF16, reduce_dtype=reduce_dtype)
    for layer in m:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mp_policy=mp)
    fully_shard(m, mp_policy=mp)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    fsdp_params = []
    for mod in m.modules():
        state = mod._get_fsdp_state() if hasattr(mod, "_get_fsdp_state") else None
        group = getattr(state, "_fsdp_param_group", None) if state is not None else None
        if group is not None:
            fsdp_params += list(group.fsdp_params)

    def held():
        ts, full = [p.grad for p in m.parameters()], 0
        for fp in fsdp_params:
            ts.append(fp.unsharded_accumulated_grad)
            up = getattr(fp, "_unsharded_param", None)
            if up is not None:
                ts.append(up.grad)
                full += up.untyped_storage().nbytes()
        return span_bytes(ts), full

    rec, k = [], 0
    for _ in range(2):
        for micro in range(ga):
            boundary = micro == ga - 1
            m.set_requires_gradient_sync(boundary)
            with Comm() as comm:
                loss = m(batch(torch.float32, k)).float().pow(2).mean()
                loss.backward()
                grads, full = held()
                if boundary:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            k += 1
            rec.append({"boundary": boundary, "grads": grads, "unsharded_params": full, "comm": comm.bytes})
    return {"micro_steps": rec, "fsdp_params": len(fsdp_params)}


CASES = {
    "ddp-ga1": lambda: {"micro_steps": run_ddp(1, False)},
    "ddp-ga2": lambda: {"micro_steps": run_ddp(2, False)},
    "ddp-ga2-no_sync": lambda: {"micro_steps": run_ddp(2, True)},
    "zero1-ga1": lambda: run_zero(1, 1),
    "zero1-ga2": lambda: run_zero(1, 2),
    "zero1-ga2-overlap": lambda: run_zero(1, 2, overlap_comm=True),
    "zero2-ga1": lambda: run_zero(2, 1),
    "zero2-ga2": lambda: run_zero(2, 2),
    "zero2-ga2-overlap": lambda: run_zero(2, 2, overlap_comm=True),
    "zero3-ga1": lambda: run_zero(3, 1),
    "zero3-ga2": lambda: run_zero(3, 2),
    "fsdp1-ga1": lambda: run_fsdp1(1),
    "fsdp1-ga2-no_sync": lambda: run_fsdp1(2),
    "fsdp1-shard-grad-op-ga1": lambda: run_fsdp1(1, "SHARD_GRAD_OP"),
    "fsdp1-shard-grad-op-ga2-no_sync": lambda: run_fsdp1(2, "SHARD_GRAD_OP"),
    "fsdp2-ga1": lambda: run_fsdp2(1, None),
    "fsdp2-ga2-no_sync": lambda: run_fsdp2(2, None),
    "fsdp2-ga2-no_sync-fp32-reduce": lambda: run_fsdp2(2, torch.float32),
}


def main():
    out_path, names = sys.argv[1], sys.argv[2:] or list(CASES)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="file://" + os.environ["PLANNER_STORE"], rank=rank, world_size=world)
    result = {"rank": rank, "world_size": world, "total_params": sum(p.numel() for p in make_model().parameters()),
              "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cases": {}}
    for name in names:
        t0 = time.monotonic()
        try:
            result["cases"][name] = CASES[name]()
            result["cases"][name]["seconds"] = round(time.monotonic() - t0, 2)
        except Exception as exc:  # recorded, and the test reports it
            import traceback
            result["cases"][name] = {"error": f"{type(exc).__name__}: {exc}"[:500],
                                     "where": traceback.format_exc()[-1500:]}
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
