"""Two-process gloo jobs for tests/torch_distributed/test_defaults_and_generate.py.

Usage: python _jobs_defaults.py JOB OUTDIR  -> each rank writes OUTDIR/JOB.rankN.json.

  backend_none   init_process_group() with no backend on this CPU-only machine: which backend
                 config results, and whether a CPU collective works.
  fsdp2_generate a tiny language model whose embedding, final norm and head belong to the root
                 fully_shard group, blocks sharded on their own; `generate` calls the
                 submodules without the root forward (unlike Transformers 5.25, which calls self). Records the result without registration,
                 then after torch.distributed.fsdp.register_fsdp_forward_method(model, "generate"),
                 and the unsharded reference.
  fsdp1         (one spawn, each case on a fresh FSDP1 model and its own new_group)
                 generate: a seq2seq-shaped toy (encoder = embedding + wrapped Block + norm, wrapped
                 decoder Block, head; ModuleWrapPolicy({Block})) after one training step, for
                 use_orig_params False and True: calling the inner module directly, after a root
                 forward, inside summon_full_params(recurse=False, writeback=False), and inside the
                 default recursive summon_full_params(writeback=False) (last: it can fail at exit).
                 tied: sync_module_states=True with rank 0 holding a real tied model (head.weight is
                 emb.weight) and rank 1 a meta one: param_init_fn=to_empty(recurse=False) alone
                 (last: the broadcast lists differ), re-tied inside param_init_fn, materialised and
                 re-tied before wrapping, and Accelerate's ensure_weights_retied around to_empty.
                 to_empty ties: Module.to_empty on a whole meta tied model, and FSDP2 fully_shard then to_empty.
                 The CPU-placement check of sync_module_states is bypassed (a GPU-only guard).
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


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.l(x))


class _Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.blk, self.norm = nn.Embedding(16, 8), _Block(), nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.blk(self.emb(x)))


class _Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.dec, self.head = _Enc(), _Block(), nn.Linear(8, 16)

    def forward(self, x):
        return self.head(self.dec(self.encoder(x)))


class _Tied(nn.Module):
    _tied_weights_keys = ["head.weight"]          # what ensure_weights_retied reads

    def __init__(self):
        super().__init__()
        self.emb, self.mid = nn.Embedding(16, 8), nn.Linear(8, 8)
        self.head = nn.Linear(8, 16, bias=False)
        self.tie()

    def tie(self):
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.mid(self.emb(x)))


def _try(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": type(e).__name__, "msg": str(e)[:300]}


def _fsdp1_generate(rank, r):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    x = torch.arange(4)
    for uop in (False, True):
        for case in ("direct", "own_units", "root_forward_first", "summon_recurse_false", "summon_recursive"):
            torch.manual_seed(0)
            ref, net = _Seq2Seq(), _Seq2Seq()
            net.load_state_dict(ref.state_dict())
            units = {_Block, _Enc, nn.Linear} if case == "own_units" else {_Block}   # own_units: the root owns nothing
            model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy(units), device_id=torch.device("cpu"),
                         use_orig_params=uop, process_group=dist.new_group([0, 1]))
            model(x).sum().backward()              # a training step: the root is resharded after backward
            inner = model.module                   # what accelerator.unwrap_model returns

            def gen():                             # what generate does: encoder, then the inner forward
                inner.encoder(x)
                return inner(x)

            with torch.no_grad():
                want = ref(x)
                if case in ("direct", "own_units"):
                    res = _try(lambda: torch.allclose(gen(), want, atol=1e-6))
                elif case == "root_forward_first":
                    model(x)
                    res = _try(lambda: torch.allclose(gen(), want, atol=1e-6))
                else:
                    def summoned():
                        # recurse=False as the page advises; the recursive case exactly as Seq2SeqTrainer calls it
                        kw = {"recurse": False, "writeback": False} if case == "summon_recurse_false" else {}
                        with FSDP.summon_full_params(model, **kw):
                            out = gen()
                        return torch.allclose(out, want, atol=1e-6)
                    res = _try(summoned)
            if res.get("ok") and case.startswith("summon"):
                res["train_step_after"] = _try(lambda: bool(model(x).sum().backward() is None))
            r.setdefault("generate", {})[f"uop={uop}:{case}"] = res


def _fsdp1_tied(rank, r):
    import torch.distributed.fsdp._init_utils as IU
    from accelerate.utils import ensure_weights_retied
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    IU._check_module_states_for_sync_module_states = lambda *a, **k: None   # GPU-placement guard only
    orig = IU._sync_params_and_buffers
    for mode in ("retie_in_param_init_fn", "materialise_and_tie_before", "accelerate_ensure_weights_retied",
                 "to_empty_only"):
        torch.manual_seed(rank)
        res = {}
        if rank == 0:
            m, fn = _Tied(), None
        else:
            with torch.device("meta"):
                m = _Tied()
            res["meta_unique_params"] = len(list(m.parameters()))
            plain = (lambda mod: mod.to_empty(device="cpu", recurse=False))
            if mode == "to_empty_only":
                fn = plain
            elif mode == "accelerate_ensure_weights_retied":
                fn = ensure_weights_retied(plain, m, torch.device("cpu"))
            elif mode == "retie_in_param_init_fn":
                def fn(mod, m=m):
                    mod.to_empty(device="cpu", recurse=False)
                    if not any(p.is_meta for p in m.parameters()):
                        m.tie()
            else:
                m.to_empty(device="cpu")
                m.tie()
                fn = None
        res["params_before_wrap"] = len(list(m.parameters()))

        r.setdefault("tied", {})[mode] = res

        def spy(pg, states, bs, src, res=res, m=m):
            res["broadcast_numels"] = [t.numel() for t in states]
            res["tied_at_broadcast"] = m.head.weight is m.emb.weight   # after param_init_fn, before flattening
            _dump(rank, r)
            return orig(pg, states, bs, src)
        IU._sync_params_and_buffers = spy
        built = {}

        def ctor(m=m, fn=fn, built=built):
            built["w"] = FSDP(m, param_init_fn=fn, sync_module_states=True, device_id=torch.device("cpu"),
                              process_group=dist.new_group([0, 1]))
            return True
        res["ctor"] = _try(ctor)                   # the constructor and the first forward recorded apart
        _dump(rank, r)                             # to_empty_only: gloo aborts the process in the forward
        if "w" in built:
            res["result"] = _try(lambda: round(built["w"](torch.arange(4)).sum().item(), 4))
    IU._sync_params_and_buffers = orig


def _to_empty_ties(r):
    """Whether a tied model is still tied after to_empty: plain Module.to_empty, and FSDP2 after fully_shard."""
    from torch.distributed.fsdp import fully_shard
    with torch.device("meta"):
        plain, sharded = _Tied(), _Tied()
    plain.to_empty(device="cpu")
    fully_shard(sharded)                         # one group holds both (fsdp2-and-dcp.md, tied parameters)
    sharded.to_empty(device="cpu")
    r["to_empty_ties"] = {"module_to_empty": [plain.head.weight is plain.emb.weight, len(list(plain.parameters()))],
                          "fsdp2_to_empty": [sharded.head.weight is sharded.emb.weight,
                                             len(list(sharded.parameters()))]}


def _write_json(path, r):
    """Atomic: a rank killed mid-write (the fsdp1 job's gloo abort takes the other rank down) leaves the old file."""
    with open(path + ".tmp", "w") as f:
        json.dump(r, f)
    os.replace(path + ".tmp", path)


def _dump(rank, r):
    _write_json(os.path.join(os.path.dirname(os.environ["PDT_STORE"]), f"fsdp1.rank{rank}.json"), r)


def job_fsdp1(rank, world, r):
    dist.init_process_group("gloo", init_method=f"file://{os.environ['PDT_STORE']}", rank=rank,
                            world_size=world, timeout=SHORT)
    _fsdp1_generate(rank, r)
    _to_empty_ties(r)
    _fsdp1_tied(rank, r)


JOBS = {"backend_none": job_backend_none, "fsdp2_generate": job_fsdp2_generate, "fsdp1": job_fsdp1}


def _rank(rank, world, job, outdir):
    r = {}
    try:
        JOBS[job](rank, world, r)
    except Exception:  # noqa: BLE001
        r["crash"] = traceback.format_exc()[-3000:]
    finally:
        _write_json(os.path.join(outdir, f"{job}.rank{rank}.json"), r)
        if dist.is_initialized():
            dist.destroy_process_group()
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: a finished gloo rank can abort there (SIGABRT) under load


if __name__ == "__main__":
    job, outdir = sys.argv[1], sys.argv[2]
    os.environ["PDT_STORE"] = os.path.join(outdir, f"{job}.store")
    mp.spawn(_rank, args=(2, job, outdir), nprocs=2, join=True)
