"""Two-process gloo jobs for tests/torch_distributed/test_defaults_and_generate.py.

Usage: python _jobs_defaults.py JOB OUTDIR  -> each rank writes OUTDIR/JOB.rankN.json.

  backend_none   init_process_group() with no backend on this CPU-only machine: which backend
                 config results, and whether a CPU collective works.
  fsdp2_generate a tiny language model whose embedding, final norm and head belong to the root
                 fully_shard group, blocks sharded on their own; `generate` calls the
                 submodules without the root forward (unlike Transformers 5.25, which calls self). Records the result without registration,
                 then after torch.distributed.fsdp.register_fsdp_forward_method(model, "generate"),
                 and the unsharded reference.
Ranks rendezvous through a FileStore in OUTDIR; every group has a short timeout.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

SHORT = datetime.timedelta(seconds=20)


class TinyLM(nn.Module):
    def __init__(self, vocab=32, dim=16, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            h = torch.tanh(b(h))
        return self.head(self.norm(h))

    @torch.no_grad()
    def generate(self, ids, steps=4):
        # a generate that calls the submodules, never self(...) (Transformers 5.25 calls self.__call__)
        for _ in range(steps):
            h = self.embed(ids)
            for b in self.blocks:
                h = torch.tanh(b(h))
            nxt = self.head(self.norm(h))[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
        return ids


def job_backend_none(rank, world, r):
    dist.init_process_group(init_method=f"file://{os.environ['PDT_STORE']}", rank=rank,
                            world_size=world, timeout=SHORT)          # no backend given
    r["accelerator"] = torch._C._get_accelerator().type
    r["backend"] = dist.get_backend()
    r["backend_config"] = str(dist.get_backend_config())
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    r["cpu_all_reduce"] = t.item()


def job_fsdp2_generate(rank, world, r):
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
    dist.init_process_group("gloo", init_method=f"file://{os.environ['PDT_STORE']}", rank=rank,
                            world_size=world, timeout=SHORT)
    torch.manual_seed(0)
    ref = TinyLM()
    model = TinyLM()
    model.load_state_dict(ref.state_dict())
    for b in model.blocks:
        fully_shard(b)
    fully_shard(model)
    prompt = torch.tensor([[1, 2, 3]])
    r["reference"] = ref.generate(prompt).tolist()
    r["root_param_type"] = type(model.embed.weight).__name__
    try:
        r["unregistered"] = {"ok": model.generate(prompt).tolist()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        r["unregistered"] = {"error": type(e).__name__, "msg": str(e)[:500]}
    register_fsdp_forward_method(model, "generate")
    try:
        r["registered"] = {"ok": model.generate(prompt).tolist()}
    except Exception as e:  # noqa: BLE001
        r["registered"] = {"error": type(e).__name__, "msg": str(e)[:500]}
    r["root_param_type_after"] = type(model.embed.weight).__name__


JOBS = {"backend_none": job_backend_none, "fsdp2_generate": job_fsdp2_generate}


def _rank(rank, world, job, outdir):
    r = {}
    try:
        JOBS[job](rank, world, r)
    except Exception:  # noqa: BLE001
        r["crash"] = traceback.format_exc()[-3000:]
    finally:
        with open(os.path.join(outdir, f"{job}.rank{rank}.json"), "w") as f:
            json.dump(r, f)
        if dist.is_initialized():
            dist.destroy_process_group()
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: a finished gloo rank can abort there (SIGABRT) under load


if __name__ == "__main__":
    job, outdir = sys.argv[1], sys.argv[2]
    os.environ["PDT_STORE"] = os.path.join(outdir, f"{job}.store")
    mp.spawn(_rank, args=(2, job, outdir), nprocs=2, join=True)
