"""Child process for _ds_matrix.py: runs deepspeed.initialize / save_checkpoint / load_checkpoint on
DeepSpeed's CPU accelerator (gloo) and prints one line "RESULT <json>".

usage: python _ds_probe.py init CASES_JSON
       python _ds_probe.py ckpt CASES_JSON WORKDIR          (RANK / WORLD_SIZE / MASTER_* from the caller)

deepspeed 0.19.8, torch 2.13.0. The caller sets DS_ACCELERATOR=cpu and a private TORCH_EXTENSIONS_DIR.
"""
from __future__ import annotations

import glob
import json
import logging
import os
import sys
import warnings


def clean_env():
    """No Accelerate/DeepSpeed variables from the caller; a one-rank world unless a launcher set one."""
    for k in list(os.environ):
        if k.startswith("ACCELERATE_") or k.startswith("DEEPSPEED_"):
            del os.environ[k]
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    for k, v in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(k, v)
    os.environ.setdefault("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"])
    warnings.simplefilter("ignore")


def _setup():
    clean_env()
    import torch
    import torch.distributed as tdist
    tdist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    # the shared-memory allreduce is a CPU speed-up JIT-compiled on first use (~2 min); not part of this
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    _stub_ops()
    return torch, deepspeed


STUBBED = []
REAL_OPS = False


def _stub_ops():
    """FusedAdam and DeepSpeedCPUAdam JIT-compile a C++ op on first use (more than 5 minutes on the
    shared 2-core machine). Their builders' load() is replaced by a stub so that initialize picks and
    constructs the same classes; rows that needed an op say so and run no step (the op is fake)."""
    from unittest import mock
    from deepspeed.ops.op_builder.builder import OpBuilder
    real = OpBuilder.load

    def load(self, verbose=True):
        if REAL_OPS and self.name == "cpu_adam":
            return real(self, verbose)
        if self.name in ("fused_adam", "cpu_adam", "cpu_adagrad", "cpu_lion"):
            STUBBED.append(self.name)
            return mock.MagicMock(name=self.name)
        return real(self, verbose)
    OpBuilder.load = load


class _Catch(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.msgs = []

    def emit(self, record):
        m = record.getMessage().strip().splitlines()[0] if record.getMessage().strip() else ""
        if m and m not in self.msgs:
            self.msgs.append(m)


def _first(e: BaseException) -> str:
    """First line of the message; for an empty message (bare assert) the deepspeed source line that raised."""
    s = str(e).strip().splitlines()
    if s:
        return s[0]
    import traceback
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "deepspeed" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"(no message) deepspeed/{f.filename.split('/deepspeed/', 1)[-1]} {f.name}: {f.line}"


def _model(torch, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _config(c):
    cfg = {"train_batch_size": c.get("train_batch_size", int(os.environ["WORLD_SIZE"])),
           "zero_optimization": {"stage": c["stage"]}, "steps_per_print": 10 ** 9}
    if c.get("offload") == "cpu":
        cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    if c.get("prec") == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif c.get("prec") == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8}
    if c.get("opt") in ("Adam", "AdamW", "SGD"):
        cfg["optimizer"] = {"type": c["opt"], "params": {"lr": 0.01, **c.get("optparams", {})}}
    if c.get("sched"):
        cfg["scheduler"] = {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.01,
                                                           "warmup_num_steps": 10}}
    for k, v in c.get("top", {}).items():
        cfg[k] = v
    for k, v in c.get("zero", {}).items():
        cfg["zero_optimization"][k] = v
    return cfg


def _client(torch, c, params):
    kind = c.get("opt")
    if kind == "client AdamW":
        return torch.optim.AdamW(params, lr=0.01)
    if kind == "client SGD":
        return torch.optim.SGD(params, lr=0.01)
    if kind == "client AdamW subclass":
        class MyAdamW(torch.optim.AdamW):
            pass
        return MyAdamW(params, lr=0.01)
    return None


def _name(o):
    return type(o).__name__ if o is not None else "None"


def _step(torch, engine, n=1):
    dt = next(engine.module.parameters()).dtype
    for i in range(n):
        g = torch.Generator().manual_seed(100 + i + 10 * int(os.environ["RANK"]))
        x = torch.randn(engine.train_micro_batch_size_per_gpu(), 4, generator=g).to(dt)
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()


def init_case(torch, deepspeed, c):
    catch = _Catch()
    for name in ("DeepSpeed", "deepspeed"):
        logging.getLogger(name).addHandler(catch)
    from deepspeed.utils import logger as dslogger
    dslogger.addHandler(catch)
    dslogger.setLevel(logging.WARNING)
    global REAL_OPS
    REAL_OPS = bool(c.get("real_ops"))
    out = {}
    STUBBED.clear()
    try:
        model = _model(torch)
        params = list(model.parameters())
        kw = {"model": model, "config": _config(c), "model_parameters": params}
        opt = _client(torch, c, params)
        if opt is not None:
            kw["optimizer"] = opt
        engine, optimizer, _, sched = deepspeed.initialize(**kw)
        out["ops"] = sorted(set(STUBBED))
        if c.get("show"):
            out["shown"] = {k: repr(eval(k, {"engine": engine})) for k in c["show"]}  # noqa: S307 (fixed strings)
        out.update(ok=True, engine_optimizer=_name(engine.optimizer), basic=_name(getattr(engine, "basic_optimizer", None)),
                   inner=_name(getattr(engine.optimizer, "optimizer", None)),
                   param_dtype=str(next(engine.module.parameters()).dtype).replace("torch.", ""))
        if not out["ops"]:
            try:
                _step(torch, engine)
                out["step"] = "ok"
            except Exception as e:  # noqa: BLE001
                out["step"] = f"{type(e).__name__}: {_first(e)}"
        engine.destroy() if hasattr(engine, "destroy") else None
    except BaseException as e:  # noqa: BLE001
        out.update(ok=False, error=type(e).__name__, message=_first(e))
    finally:
        for name in ("DeepSpeed", "deepspeed"):
            logging.getLogger(name).removeHandler(catch)
        dslogger.removeHandler(catch)
    out["warnings"] = [m for m in catch.msgs if "torch.distributed.reduce_op" not in m]
    return out


def run_init(cases):
    torch, deepspeed = _setup()
    return {c["id"]: init_case(torch, deepspeed, c) for c in cases}


# --------------------------------------------------------------------------- checkpoints

def _layout(root):
    files = []
    for p in sorted(glob.glob(os.path.join(root, "**"), recursive=True)):
        if os.path.isfile(p):
            rel = os.path.relpath(p, root)
            if "__pycache__" not in rel:
                files.append(rel)
    return files


def _engine(torch, deepspeed, c, seed=0):
    model = _model(torch, seed)
    params = list(model.parameters())
    kw = {"model": model, "config": _config(c), "model_parameters": params}
    opt = _client(torch, c, params)
    if opt is not None:
        kw["optimizer"] = opt
    engine, *_ = deepspeed.initialize(**kw)
    return engine


def _weights(torch, deepspeed, engine):
    stage = engine.zero_optimization_stage()
    ps = list(engine.module.parameters())
    if stage == 3:
        with deepspeed.zero.GatheredParameters(ps):
            return [p.detach().float().clone() for p in ps]
    return [p.detach().float().clone() for p in ps]


def _opt_step_count(engine):
    """Adam's per-parameter step in the optimizer state the engine holds (None if no state)."""
    o = engine.optimizer
    inner = getattr(o, "optimizer", o)
    for st in getattr(inner, "state", {}).values():
        if "step" in st:
            s = st["step"]
            return int(s.item()) if hasattr(s, "item") else int(s)
    return None


def ckpt_case(torch, deepspeed, c, work):
    """c: {id, save: case, load: case or None, load_kw, steps, save_ws, tag}. Returns facts."""
    rank = int(os.environ["RANK"])
    ws = int(os.environ["WORLD_SIZE"])
    d = os.path.join(work, c["dir"])
    out = {}
    if c.get("phase") in ("save", None):
        eng = _engine(torch, deepspeed, c["save"])
        _step(torch, eng, c.get("steps", 2))
        kw = {"client_state": {"epoch": 7}} if c.get("client_state", True) else {}
        if c.get("tag"):
            kw["tag"] = c["tag"]
        eng.save_checkpoint(d, **kw)
        out["saved_step"] = eng.global_steps
        if c.get("show"):
            out["shown"] = {k: repr(eval(k, {"engine": eng})) for k in c["show"]}  # noqa: S307 (fixed strings)
        out["saved_opt_step"] = _opt_step_count(eng)
        out["saved_lr"] = eng.get_lr()[0] if eng.lr_scheduler is not None else None
        out["saved_sched_iter"] = getattr(eng.lr_scheduler, "last_batch_iteration", None)
        w = _weights(torch, deepspeed, eng)
        if rank == 0:
            torch.save(w, os.path.join(work, c["dir"] + ".weights.pt"))
        tdist = torch.distributed
        tdist.barrier()
        if rank == 0:
            out["files"] = _layout(d)
            latest = os.path.join(d, "latest")
            out["latest"] = open(latest).read().strip() if os.path.exists(latest) else None
        eng.destroy() if hasattr(eng, "destroy") else None
    if c.get("phase") in ("load", None) and c.get("load"):
        lc = c["load"]
        try:
            eng = _engine(torch, deepspeed, lc, seed=1)
            before = _weights(torch, deepspeed, eng)
            path, client = eng.load_checkpoint(d, **c.get("load_kw", {}))
            saved = torch.load(os.path.join(work, c["dir"] + ".weights.pt"))
            after = _weights(torch, deepspeed, eng)
            out["load"] = {
                "ok": True, "path": os.path.relpath(path, work) if path else None,
                "client_state": {k: v for k, v in (client or {}).items() if k == "epoch"},
                "weights_restored": all(torch.allclose(a, b) for a, b in zip(after, saved)),
                "weights_changed": not all(torch.allclose(a, b) for a, b in zip(after, before)),
                "global_steps": eng.global_steps,
                "opt_step": _opt_step_count(eng),
                "lr": eng.get_lr()[0] if eng.lr_scheduler is not None else None,
                "sched_iter": getattr(eng.lr_scheduler, "last_batch_iteration", None),
            }
            try:
                _step(torch, eng)
                out["load"]["step_after"] = "ok"
            except Exception as e:  # noqa: BLE001
                out["load"]["step_after"] = f"{type(e).__name__}: {_first(e)}"
        except BaseException as e:  # noqa: BLE001
            out["load"] = {"ok": False, "error": type(e).__name__, "message": _first(e)[:300]}
    if c.get("fp32") and rank == 0:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
        try:
            sd = get_fp32_state_dict_from_zero_checkpoint(d)
            saved = torch.load(os.path.join(work, c["dir"] + ".weights.pt"))
            out["fp32"] = {"ok": True, "keys": list(sd), "dtype": str(next(iter(sd.values())).dtype).replace("torch.", ""),
                           "equal": all(torch.allclose(a.float(), b) for a, b in zip(sd.values(), saved))}
        except BaseException as e:  # noqa: BLE001
            out["fp32"] = {"ok": False, "error": type(e).__name__, "message": _first(e)[:300]}
    return out


def run_ckpt(cases, work):
    torch, deepspeed = _setup()
    res = {}
    for c in cases:
        res[c["id"]] = ckpt_case(torch, deepspeed, c, work)
        print("CASE " + json.dumps(res[c["id"]], sort_keys=True), flush=True)
        torch.distributed.barrier()
    return res


if __name__ == "__main__":
    mode, cases = sys.argv[1], json.loads(sys.argv[2])
    res = run_init(cases) if mode == "init" else run_ckpt(cases, sys.argv[3])
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)
    # Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
    # finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
    # destroy_process_group()). Every file is closed and stdout flushed first.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
