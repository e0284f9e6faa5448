"""Probe for test_register_sharding.py: DTensor's register_sharding with a Tensor keyword argument.

Run under torchrun with 2 gloo ranks on CPU. Ops are defined with torch.library (schema
`scale(Tensor x, *, Tensor w) -> Tensor`; torch.library.custom_op refuses kwarg-only Tensors), each
in its own namespace so every case registers a fresh strategy. Prints one line "RESULT {json}" on rank 0:
  missing_kwarg  strategy gives placements for x only   -> error, its cause
  with_kwarg     strategy gives placements for x and w  -> placements, values equal torch's
  no_meta        op without a Meta kernel               -> error, its cause
  dim_min        strategy registered for aten.min.dim_min, called with min=/min_indices= DTensors:
                 whether the strategy ran, values equal torch.min
"""
import json

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.experimental import register_sharding

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2,))
libs = []
calls = []


def make_op(ns, meta=True):
    lib = torch.library.Library(ns, "DEF")
    lib.define("scale(Tensor x, *, Tensor w) -> Tensor")
    lib.impl("scale", lambda x, *, w: x * w, "CPU")
    if meta:
        lib.impl("scale", lambda x, *, w: torch.empty_like(x), "Meta")
    libs.append(lib)
    return getattr(torch.ops, ns).scale.default


def case(ns, placements_for_w, meta=True):
    op = make_op(ns, meta)

    @register_sharding(op)
    def strategy(x, *, w):
        calls.append(ns)
        return [([Shard(0)], [Shard(0)] + [Shard(0)] * placements_for_w),
                ([Replicate()], [Replicate()] + [Replicate()] * placements_for_w)]

    fx, fw = torch.arange(8.0).reshape(4, 2), torch.full((4, 2), 3.0)
    x, w = distribute_tensor(fx, mesh, [Shard(0)]), distribute_tensor(fw, mesh, [Shard(0)])
    try:
        y = op(x, w=w)
        return {"ok": True, "strategy_ran": ns in calls, "placements": [str(p) for p in y.placements],
                "equal": bool(torch.equal(y.full_tensor(), fx * fw))}
    except Exception as e:  # noqa: BLE001 - the probe reports what the call raised
        cause = e.__cause__ or e.__context__
        return {"ok": False, "strategy_ran": ns in calls, "error": type(e).__name__, "message": str(e)[:300],
                "cause": type(cause).__name__ if cause else None, "cause_message": str(cause)[:300] if cause else None}


out = {"missing_kwarg": case("pdt_rs_a", 0), "with_kwarg": case("pdt_rs_b", 1), "no_meta": case("pdt_rs_c", 1, meta=False)}

aten = torch.ops.aten


@register_sharding(aten.min.dim_min)
def dim_min_strategy(x, dim, keepdim=False, *, min=None, min_indices=None):
    calls.append("dim_min")
    return [([Shard(0), Shard(0)], [Shard(0), None, None, Shard(0), Shard(0)])]


torch.manual_seed(0)
full = torch.randn(6, 4)
xs = distribute_tensor(full, mesh, [Shard(0)])
vals = distribute_tensor(torch.empty(6), mesh, [Shard(0)])
idx = distribute_tensor(torch.empty(6, dtype=torch.long), mesh, [Shard(0)])
v, i = aten.min.dim_min(xs, 1, False, min=vals, min_indices=idx)
ref = torch.min(full, 1)
out["dim_min"] = {"strategy_ran": "dim_min" in calls, "placements": [str(p) for p in v.placements],
                  "equal": bool(torch.equal(v.full_tensor(), ref.values) and torch.equal(i.full_tensor(), ref.indices))}
if dist.get_rank() == 0:
    print("RESULT " + json.dumps(out), flush=True)
dist.barrier()
dist.destroy_process_group()
