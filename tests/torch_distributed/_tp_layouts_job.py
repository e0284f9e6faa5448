"""2-rank gloo job for test_tp_layouts.py (torch 2.13.0 CPU): what the tensor-parallel styles of
torch.distributed.tensor.parallel do with a plain tensor vs a DTensor input, and what they return.

Usage: python _tp_layouts_job.py OUTDIR  -> OUTDIR/rankN.json. Ranks meet through a FileStore in
OUTDIR; the group has a short timeout so a failure cannot hang. Mesh: init_device_mesh("cpu", (2,)).
x is the same [B, T, C] = [2, 4, 8] tensor on both ranks (seeded); its sequence slice for rank r is
x.chunk(2, dim=1)[r]. Every case is compared with the same modules run unsharded on the full x.
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from _autograd_ddp_ignore_jobs import WORLD, cap  # noqa: E402 - the sibling job's 2-rank world and result capture

B, T, C, V = 2, 4, 8, 6


def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, T, C, generator=g)


def describe(t):
    from torch.distributed.tensor import DTensor
    if isinstance(t, DTensor):
        return {"type": "DTensor", "shape": list(t.shape), "local": list(t.to_local().shape),
                "placements": [str(p) for p in t.placements]}
    return {"type": "Tensor", "shape": list(t.shape)}


def comms(mode):
    return {str(k).split(".")[-1]: v for k, v in mode.get_comm_counts().items()}


def run(model, inp, ref_out):
    """Forward the parallelized model under CommDebugMode; report the output and whether its
    full value equals the unsharded reference."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    mode = CommDebugMode()
    with mode:
        out = model(inp)
    full = out.full_tensor() if isinstance(out, DTensor) else out
    res = describe(out)
    res["comms"] = comms(mode)
    res["matches_reference"] = list(full.shape) == list(ref_out.shape) and torch.allclose(full, ref_out, atol=1e-5)
    res["local_is"] = which_piece(out.to_local() if isinstance(out, DTensor) else out, ref_out)
    return res


def which_piece(local, ref_out):
    """Which piece of the unsharded reference this rank's local result is (by value)."""
    rank = dist.get_rank()
    pieces = {"full": ref_out,
              "vocab_shard": ref_out.chunk(WORLD, dim=-1)[rank],
              "sequence_shard": ref_out.chunk(WORLD, dim=1)[rank],
              "sequence_and_vocab_shard": ref_out.chunk(WORLD, dim=1)[rank].chunk(WORLD, dim=-1)[rank],
              # vocab slice s taken from rank s's own sequence rows: what gathering the vocab dim of
              # per-rank sequence shards that were declared Replicate() produces
              "mixed_rows": torch.cat([ref_out.chunk(WORLD, dim=1)[s].chunk(WORLD, dim=-1)[s] for s in range(WORLD)], dim=-1)}
    for name, p in pieces.items():
        if list(p.shape) == list(local.shape) and torch.allclose(p, local, atol=1e-5):
            return name
    return "none"


def mesh():
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cpu", (WORLD,))


def sequence_parallel_inputs(rank):
    """SequenceParallel on a LayerNorm fed three ways."""
    from torch.distributed.tensor import Replicate, distribute_tensor
    from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module
    m = mesh()
    x = data()
    torch.manual_seed(1)
    ln = nn.LayerNorm(C)
    ref = ln(x).detach()
    out = {}
    for name, inp, want in (("plain_full", x, None),
                            ("plain_slice", x.chunk(WORLD, dim=1)[rank], ref),
                            ("dtensor_replicate", lambda: distribute_tensor(x, m, [Replicate()]), ref)):
        mod = parallelize_module(copy.deepcopy(ln), m, SequenceParallel())
        i = inp() if callable(inp) else inp
        if want is None:
            with torch.no_grad():
                o = mod(i)
            out[name] = describe(o)
        else:
            with torch.no_grad():
                out[name] = run(mod, i, want)
    return out


def colwise_inputs(rank):
    """ColwiseParallel (output_layouts=Replicate()) on a Linear: full plain input, a plain
    sequence slice declared Replicate() (the default) or Shard(1), and a Shard(1) DTensor declared
    Replicate()."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
    m = mesh()
    x = data()
    torch.manual_seed(2)
    lin = nn.Linear(C, V)
    ref = lin(x).detach()
    sl = x.chunk(WORLD, dim=1)[rank]
    cases = {
        "default_plain_full": (ColwiseParallel(), x),
        "default_local_out_plain_full": (ColwiseParallel(output_layouts=Shard(-1)), x),
        "replicate_plain_slice": (ColwiseParallel(output_layouts=Replicate()), sl),
        "shard1_plain_slice": (ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()), sl),
        "replicate_dtensor_shard1": (ColwiseParallel(output_layouts=Replicate()),
                                     lambda: distribute_tensor(x, m, [Shard(1)])),
        "shard1_dtensor_shard1": (ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
                                  lambda: distribute_tensor(x, m, [Shard(1)])),
    }
    out = {}
    for name, (style, inp) in cases.items():
        mod = parallelize_module(copy.deepcopy(lin), m, style)
        i = inp() if callable(inp) else inp
        with torch.no_grad():
            out[name] = cap(lambda: run(mod, i, ref))
    out["default_repr"] = repr(ColwiseParallel())
    return out


def rowwise_plain_full(rank):
    """RowwiseParallel's default input_layouts is Shard(-1): a full plain input is read as this
    rank's feature slice."""
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module
    m = mesh()
    x = data()
    torch.manual_seed(3)
    lin = nn.Linear(C, V)
    ref = lin(x).detach()
    mod = parallelize_module(copy.deepcopy(lin), m, RowwiseParallel())
    with torch.no_grad():
        full = cap(lambda: run(mod, x, ref))
        sliced = cap(lambda: run(mod, x.chunk(WORLD, dim=-1)[rank], ref))
    from torch.distributed.tensor import Replicate
    decl = parallelize_module(copy.deepcopy(lin), m, RowwiseParallel(input_layouts=Replicate()))
    with torch.no_grad():
        declared = cap(lambda: run(decl, x, ref))
    return {"plain_full": full, "plain_feature_slice": sliced, "replicate_plain_full": declared,
            "default_repr": repr(RowwiseParallel())}


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(C)
        self.output = nn.Linear(C, V)

    def forward(self, h):
        return self.output(self.norm(h))


def lm_head(rank):
    """The torchtitan tail: norm under SequenceParallel, output under ColwiseParallel, the norm's
    input a per-rank sequence slice. Vary the output's input_layouts and the norm's use_local_output."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, SequenceParallel, parallelize_module
    m = mesh()
    x = data()
    torch.manual_seed(4)
    head = Head()
    ref = head(x).detach()
    sl = x.chunk(WORLD, dim=1)[rank]
    seen = {}
    out = {}
    for name, sp_local, in_layout, out_layout, local_out in (
            ("shard1_replicate_out", False, Shard(1), Replicate(), True),
            ("shard1_loss_parallel", False, Shard(1), Shard(-1), False),
            ("replicate_decl_dtensor_in", False, Replicate(), Replicate(), True),
            ("replicate_decl_loss_parallel", False, Replicate(), Shard(-1), False),
            ("shard1_sp_local_output", True, Shard(1), Replicate(), True),
            ("replicate_decl_sp_local_output", True, Replicate(), Replicate(), True)):
        mod = parallelize_module(copy.deepcopy(head), m, {
            "norm": SequenceParallel(use_local_output=sp_local),
            "output": ColwiseParallel(input_layouts=in_layout, output_layouts=out_layout,
                                      use_local_output=local_out)})
        mod.output.register_forward_pre_hook(lambda _m, args, n=name: seen.__setitem__(n, describe(args[0])))
        with torch.no_grad():
            r = cap(lambda: run(mod, sl, ref))
        out[name] = {"result": r, "linear_input": seen.get(name)}
    # what the norm hands on, seen from outside the output module
    mod = parallelize_module(copy.deepcopy(head), m, {"norm": SequenceParallel()})
    with torch.no_grad():
        out["norm_default_output"] = describe(mod.norm(sl))
    return out


class Block(nn.Module):
    """embedding -> norm -> MLP (w1, relu, w2) + residual -> norm -> output."""

    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(16, C)
        self.attention_norm = nn.LayerNorm(C)
        self.w1 = nn.Linear(C, 12)
        self.w2 = nn.Linear(12, C)
        self.norm = nn.LayerNorm(C)
        self.output = nn.Linear(C, V)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        h = h + self.w2(torch.relu(self.w1(self.attention_norm(h))))
        return self.output(self.norm(h))


def sp_plan(rank):
    """The standard sequence-parallel plan, end to end, against the unsharded model."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)
    m = mesh()
    torch.manual_seed(5)
    model = Block()
    tokens = torch.randint(0, 16, (B, T), generator=torch.Generator().manual_seed(6))
    ref = model(tokens).detach()
    mod = parallelize_module(copy.deepcopy(model), m, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "attention_norm": SequenceParallel(),
        "w1": ColwiseParallel(input_layouts=Shard(1)),
        "w2": RowwiseParallel(output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    seen = {}
    for n in ("tok_embeddings", "attention_norm", "w1", "w2", "norm", "output"):
        sub = getattr(mod, n)
        sub.register_forward_pre_hook(lambda _m, args, n=n: seen.__setitem__(n + "/in", describe(args[0])))
        sub.register_forward_hook(lambda _m, args, o, n=n: seen.__setitem__(n + "/out", describe(o)))
    mode = CommDebugMode()
    with torch.no_grad(), mode:
        y = mod(tokens)
    return {"seen": seen, "out": describe(y), "comms": comms(mode),
            "matches_reference": torch.allclose(y, ref, atol=1e-5)}


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=30))
    r = {"torch": torch.__version__}
    for fn in (sequence_parallel_inputs, colwise_inputs, rowwise_plain_full, lm_head, sp_plan):
        r[fn.__name__] = cap(lambda: fn(rank))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=WORLD, join=True)
