"""torch.compile + DDP on 1 gloo rank (torch 2.13.0 CPU) for test_compile_ddp.py.

Usage: python _compile_ddp_job.py OUTFILE. Shows (1) DDP reads torch._dynamo.config.optimize_ddp once, in
__init__ (_use_python_reducer, the AccumulateGrad hooks), and (2) how many graphs the compiler backend
receives for one DDP forward under each mode: "ddp_optimizer" splits at the bucket boundaries, "no_optimization"
compiles one graph. The backend is a counting eager backend: no C compiler needed.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import torch
import torch._dynamo
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    """A user-defined module: Dynamo starts tracing at its forward (torch.nn's own frames, e.g. Sequential.forward,
    are skipped as top-level frames when DDP.forward, itself not traced, calls them)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(512, 512) for _ in range(4))   # 4 x 1.03 MB of parameters

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def model():
    torch.manual_seed(0)
    return Net()


def graphs_per_forward(mode, build=None, cap_mb=1):
    torch._dynamo.reset()
    torch._dynamo.config.optimize_ddp = mode
    ddp = DDP((build or model)(), bucket_cap_mb=cap_mb)   # 1 MB buckets (DDPOptimizer needs >= the 1 MB first bucket)
    seen = []

    def backend(gm, example_inputs):
        seen.append(len([n for n in gm.graph.nodes if n.op == "call_module" or n.op == "call_function"]))
        return gm.forward

    out = torch.compile(ddp, backend=backend)(torch.ones(2, 512))
    out.sum().backward()
    return len(seen)


def main(outfile):
    warnings.simplefilter("ignore")
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    r = {"torch": torch.__version__, "default": torch._dynamo.config.optimize_ddp}
    before = DDP(model())
    torch._dynamo.config.optimize_ddp = "python_reducer"
    r["built_before_set"] = {"use_python_reducer": before._use_python_reducer, "hooks": len(before._accum_grad_hooks)}
    after = DDP(model())
    r["built_after_set"] = {"use_python_reducer": after._use_python_reducer, "hooks": len(after._accum_grad_hooks)}
    torch._dynamo.config.optimize_ddp = "bogus"
    try:
        DDP(model())
        r["bogus"] = "accepted"
    except Exception as e:  # noqa: BLE001
        r["bogus"] = f"{type(e).__name__}: {e}"
    r["graphs"] = {str(m): graphs_per_forward(m) for m in (True, "ddp_optimizer", False, "no_optimization")}
    r["sequential_graphs"] = graphs_per_forward(True, lambda: nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)]))
    try:
        r["small_cap"] = graphs_per_forward(True, cap_mb=0.3)
    except Exception as e:  # noqa: BLE001
        r["small_cap"] = f"{type(e).__name__}: {str(e).splitlines()[-1]}"
    with open(outfile, "w") as f:
        json.dump(r, f, indent=1)
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
