"""One rank of the Accelerator method matrix (_acc_methods_matrix.py): builds an Accelerator for SETUP,
prepares a tiny MLP, AdamW and two dataloaders, then calls the public methods users call in a loop in a
fixed order. For each call it records the result (a JSON summary) or the exception class and first line,
and the gloo collectives this rank issued during the call (torch profiler `gloo:*` events, so DDP's C++
reducer and FSDP2's collectives count like Python callers). Writes OUT/rank<r>.json.

usage: python _acc_methods_probe.py SETUP OUT      (SETUP: single, multi_cpu, ds_z2, ds_z3, fsdp2)

accelerate 1.15.0, torch 2.13.0, deepspeed 0.19.8. The caller sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR/PORT (2-process setups), DS_ACCELERATOR=cpu and a private TORCH_EXTENSIONS_DIR.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import warnings
from pathlib import Path

SETUP, OUT = sys.argv[1], Path(sys.argv[2])
for k in [k for k in os.environ if k.startswith(("ACCELERATE_", "FSDP_"))]:
    del os.environ[k]
os.environ.setdefault("DS_ACCELERATOR", "cpu")
if SETUP.startswith("ds_"):
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
warnings.simplefilter("ignore")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from accelerate import Accelerator, DeepSpeedPlugin, FullyShardedDataParallelPlugin, PartialState  # noqa: E402
from accelerate.state import AcceleratorState  # noqa: E402
from accelerate.utils import broadcast, broadcast_object_list  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))


def torch_fsdp2_layers(out):
    """Plain torch, no Accelerate: fully_shard on two Linear layers and on the root, which keeps the last
    Linear as its own parameters. backward, a no_grad forward, SGD step, next forward: which of
    model.parameters() are still the optimizer's tensors, and whether the next forward used the stepped
    weights (compared with a forward computed by hand from the optimizer's parameters)."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.ReLU(),
                            torch.nn.Linear(8, 2))
    fully_shard(m[0])
    fully_shard(m[2])
    fully_shard(m)
    o = torch.optim.SGD(m.parameters(), lr=0.5)
    held = list(o.param_groups[0]["params"])
    names = [n for n, _ in m.named_parameters()]
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(RANK))
    m(x).pow(2).mean().backward()
    x1 = torch.ones(2, 4)
    with torch.no_grad():
        m(x1)
    same = {n: p is q for n, p, q in zip(names, m.parameters(), held)}
    o.step()
    w = [q.full_tensor() for q in held]
    with torch.no_grad():
        y = m(x1)
        h = torch.relu(torch.relu(x1 @ w[0].T + w[1]) @ w[2].T + w[3])
        ok = bool(torch.allclose(y, h @ w[4].T + w[5]))
    (out / f"rank{RANK}.json").write_text(json.dumps({"parameters() are the optimizer's": same,
                                                      "next forward uses stepped weights": ok}, sort_keys=True))
    sys.stdout.flush()
    os._exit(0)


if SETUP == "torch_fsdp2_layers":
    torch_fsdp2_layers(OUT)
res: dict = {}
logs: list = []


class _H(logging.Handler):
    def emit(self, r):
        logs.append(f"{r.levelname}: {r.getMessage()}"[:300])


logging.getLogger("accelerate").addHandler(_H(level=logging.WARNING))


def summ(v):
    """A JSON summary of a returned value: tensors by shape/dtype (+ values when small)."""
    if isinstance(v, torch.Tensor):
        loc = v.to_local() if hasattr(v, "to_local") else v
        d = {"T": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
        if loc.numel() <= 16:
            d["v"] = [round(float(x), 4) for x in loc.detach().float().flatten().tolist()]
        if loc is not v:
            d["local"] = list(loc.shape)
        return d
    if isinstance(v, (list, tuple)):
        return {"list" if isinstance(v, list) else "tuple": [summ(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": {str(k): summ(x) for k, x in v.items()}}
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return round(v, 4)
    return {"type": type(v).__name__}


def call(name, fn):
    """Run fn under the profiler; record value or exception, and the gloo collectives issued."""
    out = {}
    prof = profile(activities=[ProfilerActivity.CPU])
    try:
        with prof:
            try:
                out = {"ok": True, "v": fn()}
            except Exception as e:  # noqa: BLE001 - the exception is the result
                out = {"ok": False, "err": type(e).__name__, "msg": str(e).strip().splitlines()[0][:300]}
                if os.environ.get("PROBE_TRACEBACK"):
                    import traceback
                    out["tb"] = traceback.format_exc()[-2500:]
        coll: dict = {}
        for e in prof.events():
            if e.name.startswith("gloo:"):
                op = e.name.split(":", 1)[1]
                coll[op] = coll.get(op, 0) + 1
        out["coll"] = coll
    except Exception as e:  # noqa: BLE001 - profiler trouble must not lose the result
        out.setdefault("ok", False)
        out["coll_error"] = repr(e)[:200]
    res[name] = out
    return out


# ------------------------------------------------------------------------------------------ the run
kw = {"gradient_accumulation_steps": 2}
if SETUP in ("single", "multi_cpu"):
    kw["cpu"] = True
elif SETUP.startswith("ds_"):
    stage = int(SETUP[-1])
    # On a host without an accelerator device _prepare_backend finds no backend for a non-cpu state, so
    # Accelerator() alone reports num_processes 1 while deepspeed.init_distributed has joined 2 ranks;
    # naming gloo through PartialState first gives the real world size (DS_ACCELERATOR=cpu).
    PartialState(backend="gloo")
    kw["deepspeed_plugin"] = DeepSpeedPlugin(zero_stage=stage, gradient_accumulation_steps=2,
                                             gradient_clipping=0.1)
elif SETUP == "fsdp2":
    kw["cpu"] = True
acc = Accelerator(**kw)
if SETUP == "fsdp2":
    # accelerate 1.15.0 makes FSDP only for accelerator device types (state.py: MULTI_CPU is not in the
    # list), so `--use_fsdp` on CPU runs plain DDP. To run FSDP2's own code paths on CPU the state is set
    # to FSDP with a version-2 plugin after Accelerator() (the process group is gloo as for MULTI_CPU).
    # AcceleratorState.__init__ copies its type into PartialState too (state.py), as done here.
    from accelerate.utils import DistributedType
    AcceleratorState._shared_state["distributed_type"] = DistributedType.FSDP
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    AcceleratorState._shared_state["fsdp_plugin"] = FullyShardedDataParallelPlugin(fsdp_version=2)
W = acc.num_processes
res["state"] = {"distributed_type": str(acc.distributed_type).split(".")[-1], "num_processes": W,
                "process_index": acc.process_index, "device": str(acc.device)}

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.AdamW(model.parameters(), lr=0.1)
train_dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 2)),
                                       batch_size=2)
eval_dl = torch.utils.data.DataLoader(torch.arange(13), batch_size=2)
held = {}


def _prepare():
    held["p"] = acc.prepare(model, opt, train_dl, eval_dl)
    return [type(x).__name__ for x in held["p"]]


prep = call("prepare", _prepare)
if not prep["ok"]:
    (OUT / f"rank{RANK}.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    sys.exit(0)
model, opt, train_dl, eval_dl = held.pop("p")

def fingerprint():
    """Sum of the full parameters, read without a forward: a no_grad forward between backward and step
    drops the gradients of a root-only FSDP2 module (torch 2.13.0, seen while writing this probe)."""
    params = list(model.parameters())
    ctx = contextlib.nullcontext()
    if SETUP == "ds_z3":
        import deepspeed
        ctx = deepspeed.zero.GatheredParameters(params)
    with torch.no_grad(), ctx:
        return round(sum(float((p.full_tensor() if hasattr(p, "full_tensor") else p).double().sum())
                         for p in params), 5)


def batch(k):
    g = torch.Generator().manual_seed(100 * RANK + k)
    return torch.randn(2, 4, generator=g), torch.randn(2, 2, generator=g)


def loss_of(k):
    x, y = batch(k)
    return torch.nn.functional.mse_loss(model(x).float(), y)


# rank facts and printing
def _print():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        acc.print("hello")
    return buf.getvalue().count("hello")


call("print", _print)
call("is_main_process", lambda: [acc.is_main_process, acc.is_local_main_process, acc.process_index])

# gather family
call("gather(1-D tensor)", lambda: summ(acc.gather(torch.tensor([10. * RANK, 10. * RANK + 1]))))
call("gather(0-dim tensor)", lambda: summ(acc.gather(torch.tensor(1. + 2 * RANK))))
call("gather(float)", lambda: summ(acc.gather(1.0 + RANK)))
call("gather(dict of tensors)", lambda: summ(acc.gather({"a": torch.tensor([RANK]), "b": torch.ones(1, 2)})))


def eval_loop(fn):
    got = []
    for b in eval_dl:
        got.extend(fn(b))
    return got


call("gather in eval loop", lambda: {"n": len(g := eval_loop(lambda b: acc.gather(b).tolist())), "values": g})
call("gather_for_metrics in eval loop",
     lambda: {"n": len(g := eval_loop(lambda b: acc.gather_for_metrics(b).tolist())), "values": g})
call("gather_for_metrics(list, use_gather_object=True) in eval loop",
     lambda: {"n": len(g := eval_loop(lambda b: acc.gather_for_metrics(b.tolist(), use_gather_object=True))),
              "values": g})
call("gather_for_metrics(list of str) outside a loop", lambda: acc.gather_for_metrics([f"r{RANK}"]))
call("gather_for_metrics(tensor) outside a loop", lambda: summ(acc.gather_for_metrics(torch.tensor([RANK]))))


# reduce, pad, broadcast
call("reduce(t)", lambda: summ(acc.reduce(torch.tensor([1. + 2 * RANK]))))
call("reduce(t, 'mean')", lambda: summ(acc.reduce(torch.tensor([1. + 2 * RANK]), reduction="mean")))
call("reduce(t, 'max')", lambda: summ(acc.reduce(torch.tensor([1. + 2 * RANK]), reduction="max")))
call("reduce(float)", lambda: summ(acc.reduce(1.0 + RANK)))
call("pad_across_processes(len 2+rank)", lambda: summ(acc.pad_across_processes(torch.ones(2 + RANK))))
call("pad_across_processes(pad_first=True)",
     lambda: summ(acc.pad_across_processes(torch.ones(2 + RANK), pad_first=True, pad_index=-1)))
call("pad_across_processes(bool len 2+rank)", lambda: summ(acc.pad_across_processes(torch.ones(2 + RANK) > 0)))
call("utils.broadcast(t, from_process=0)", lambda: summ(broadcast(torch.tensor([float(RANK)]), from_process=0)))
call("utils.broadcast_object_list([obj])", lambda: broadcast_object_list([f"from rank {RANK}"]))


def split(items, **k):
    with acc.split_between_processes(items, **k) as share:
        return summ(share)


call("split_between_processes(list of 5)", lambda: split(list(range(5))))
call("split_between_processes(list of 5, apply_padding=True)", lambda: split(list(range(5)), apply_padding=True))
call("split_between_processes(dict)", lambda: split({"a": [0, 1, 2], "b": torch.arange(3)}))
call("split_between_processes(list of 1)", lambda: split(["only"]))
call("wait_for_everyone", lambda: summ(acc.wait_for_everyone()))

# trigger
call("set_trigger on rank 1", lambda: summ(acc.set_trigger() if RANK == 1 or W == 1 else None))
call("check_trigger", lambda: acc.check_trigger())
call("check_trigger again", lambda: acc.check_trigger())

# backward, clipping, step
res["sync_gradients outside accumulate"] = acc.sync_gradients
res["distributed_type after prepare"] = str(acc.distributed_type).split(".")[-1]
def changed(name, fn):
    """call() with the model's fingerprint compared before and after, outside the profiled region."""
    before = fingerprint()
    r = call(name, fn)
    if r["ok"]:
        r["v"] = {"returns": r["v"], "weights changed": fingerprint() != before}
    return r


changed("backward", lambda: summ(acc.backward(loss_of(0))))
call("clip_grad_norm_", lambda: summ(acc.clip_grad_norm_(model.parameters(), 1.0)))
call("clip_grad_value_", lambda: summ(acc.clip_grad_value_(model.parameters(), 0.5)))
changed("optimizer.step", lambda: summ(opt.step()))
call("optimizer_step_was_skipped", lambda: acc.optimizer_step_was_skipped)
call("optimizer.zero_grad", lambda: summ(opt.zero_grad()))
res["fingerprint after step"] = fingerprint()


def no_sync():
    with acc.no_sync(model):
        acc.backward(loss_of(1))


changed("no_sync + backward", no_sync)
opt.zero_grad()


def micro_step(k):
    with acc.accumulate(model):
        acc.backward(loss_of(2 + k))
        opt.step()
        opt.zero_grad()
    return {"sync_gradients": acc.sync_gradients}


changed("accumulate, micro-step 1 of 2", lambda: micro_step(0))
changed("accumulate, micro-step 2 of 2", lambda: micro_step(1))
res["fingerprint after accumulate"] = fingerprint()



def grads_held():
    return sum(p.grad is not None for p in model.parameters())


def eval_forward_between_backward_and_step():
    """backward (outside accumulate), then a no_grad forward as a mid-step evaluation would do, then
    optimizer.step(), then one more no_grad forward. Records how many of model.parameters() hold a .grad
    before and after the first forward, whether model.parameters() are still the tensors the optimizer
    holds, and (DDP, FSDP2, one process) whether the step changed the optimizer's parameters and whether
    the next forward used the stepped weights (output compared with a forward computed by hand from the
    optimizer's parameters after the step). DeepSpeed's optimizer holds flat partitions: not compared."""
    opt.zero_grad()
    acc.backward(loss_of(5))
    before = grads_held()
    x = torch.ones(2, 4)
    with torch.no_grad():
        model(x)
    after = grads_held()
    out = {"grads before": before, "grads after": after, "params": len(list(model.parameters()))}
    if not SETUP.startswith("ds_"):
        held = list(opt.optimizer.param_groups[0]["params"])
        full = lambda: [(q.full_tensor() if hasattr(q, "full_tensor") else q).detach().clone() for q in held]  # noqa: E731
        out["parameters() are the optimizer's"] = all(p is q for p, q in zip(model.parameters(), held))
        w0 = full()
        opt.step()
        w1 = full()
        out["optimizer params stepped"] = any(not torch.equal(u, v) for u, v in zip(w0, w1))
        with torch.no_grad():
            y = model(x)
        ref = torch.relu(x @ w1[0].T + w1[1]) @ w1[2].T + w1[3]
        out["next forward uses stepped weights"] = bool(torch.allclose(y, ref))
    opt.zero_grad()
    return out


call("no_grad forward between backward and step", eval_forward_between_backward_and_step)


def main_process_first():
    with acc.main_process_first():
        pass


call("main_process_first", main_process_first)


def join():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with acc.join_uneven_inputs([model], even_batches=False):
            pass
    return [str(x.message).splitlines()[0][:200] for x in w if "oin" in str(x.message)]


call("join_uneven_inputs", join)

# autocast
def autocast():
    with acc.autocast() as ctx:
        return {"context": type(ctx).__name__, "matmul dtype": str((torch.ones(2, 2) @ torch.ones(2, 2)).dtype)}


call("autocast", autocast)

# model access and saving
call("unwrap_model", lambda: type(acc.unwrap_model(model)).__name__)


def state_dict():
    sd = acc.get_state_dict(model)
    if sd is None:
        return None
    return {"keys": len(sd), "shapes": sorted({tuple(summ(t)["T"]) for t in sd.values()})}


call("get_state_dict", state_dict)
call("get_state_dict(unwrap=False) keys", lambda: sorted(acc.get_state_dict(model, unwrap=False) or {})[:2])


def plain_state_dict():
    t = acc.unwrap_model(model).state_dict()["0.weight"]
    d = summ(t)
    d.pop("v", None)
    loc = t.to_local() if hasattr(t, "to_local") else t
    d["local numel"] = loc.numel()
    d["all zero"] = bool((loc == 0).all()) if loc.numel() else None
    return d


if SETUP != "ds_z3":
    # not recorded under ZeRO-3: parameters this small sit below stage3_param_persistence_threshold and
    # stay gathered once used, so the result would depend on the calls before it, not on ZeRO-3
    call("unwrap_model(model).state_dict()", plain_state_dict)
SAVE = OUT / "saved"
SAVE.mkdir(parents=True, exist_ok=True)


def with_files(name, fn, listing):
    """call(), then a barrier outside the profiled region (a rank that raised meets the others there),
    then the files every rank sees."""
    r = call(name, fn)
    acc.wait_for_everyone()
    if r["ok"]:
        r["v"] = listing()
    return r


def save_model(sub="model"):
    with_files("save_model" + ("" if sub == "model" else ", gather16"),
               lambda: acc.save_model(model, str(SAVE / sub)),
               lambda: sorted(os.listdir(SAVE / sub)) if (SAVE / sub).exists() else [])


save_model()
if SETUP == "ds_z3":
    # the same two calls with the engine's stage3_gather_16bit_weights_on_model_save switched on
    # (what DeepSpeedPlugin(zero3_save_16bit_model=True) or the JSON key sets)
    model._config.zero_config.gather_16bit_weights_on_model_save = True
    call("get_state_dict, gather16", state_dict)
    save_model("model16")
with_files("save(obj, path per rank)", lambda: acc.save({"rank": RANK}, str(SAVE / f"obj_rank{RANK}.pt")),
           lambda: sorted(p.name for p in SAVE.glob("obj_rank*.pt")))



def free():
    m, o = acc.free_memory(model, opt)
    return {"returns": [m, o], "_models": len(acc._models), "engine": getattr(acc, "deepspeed_engine_wrapped", "-")
            is not None if SETUP.startswith("ds_") else "-"}


call("free_memory(model, optimizer)", free)
# Python objects and nested containers (1 process and MULTI_CPU only; last, so its loader leaves the
# rows above unchanged): a prepared loader over range(9) with
# batch 5, so on 2 ranks the only batch is uneven (rank 1 gets 5-8 plus sample 0 again); one entry per batch.
if SETUP in ("single", "multi_cpu"):
    from accelerate.utils import gather_object
    obj_dl = acc.prepare(torch.utils.data.DataLoader(range(9), batch_size=5))

    def per_batch(fn):
        return [summ(fn([int(i) for i in b], b)) for b in obj_dl]

    def p_r(ids):
        return [f"p{i}" for i in ids], [f"r{i}" for i in ids]

    OBJ_CALLS = {
        "obj: gather_object(list of str)": lambda ids, b: gather_object([f"s{i}" for i in ids]),
        "obj: gather_for_metrics(list of str)": lambda ids, b: acc.gather_for_metrics([f"s{i}" for i in ids]),
        "obj: gather_object(tuple of lists)": lambda ids, b: gather_object(p_r(ids)),
        "obj: gather_for_metrics(tuple of lists)": lambda ids, b: acc.gather_for_metrics(p_r(ids)),
        "obj: gather_for_metrics(dict of lists)": lambda ids, b: acc.gather_for_metrics(dict(zip("pr", p_r(ids)))),
        "obj: gather_for_metrics(list of dicts)": lambda ids, b: acc.gather_for_metrics([{"id": i} for i in ids]),
        "obj: gather(list of tensors)": lambda ids, b: acc.gather([b, b * 10]),
        "obj: gather_for_metrics(list of tensors)": lambda ids, b: acc.gather_for_metrics([b, b * 10]),
        "obj: gather_for_metrics(tensor, use_gather_object=True)":
            lambda ids, b: acc.gather_for_metrics(b, use_gather_object=True),
        "obj: gather(list of str)": lambda ids, b: acc.gather([f"s{i}" for i in ids]),
        "obj: pad_across_processes(list of str)": lambda ids, b: acc.pad_across_processes([f"s{i}" for i in ids]),
    }
    for _name, _fn in OBJ_CALLS.items():
        call(_name, lambda _fn=_fn: per_batch(_fn))
    call("obj: gather_object(str)", lambda: summ(gather_object(f"s{RANK}")))
    call("obj: gather_object(int)", lambda: summ(gather_object(RANK)))

res["accelerate warnings"] = sorted(set(logs))
(OUT / f"rank{RANK}.json").write_text(json.dumps(res, indent=1, sort_keys=True))
acc.end_training()
sys.stdout.flush()
os._exit(0)
