"""Child process for _ds_protocol.py (deepspeed 0.19.8, torch 2.13.0, DS_ACCELERATOR=cpu, gloo).

usage: python _ds_protocol_probe.py backward  (2 ranks: RANK / WORLD_SIZE / MASTER_* from the caller)
       python _ds_protocol_probe.py groups    (one process; deepspeed.comm replaced by a recorder)
       python _ds_protocol_probe.py loads     (one process, one gloo rank)

Prints one line "RESULT <json>" and leaves with os._exit(0).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_probe as base  # noqa: E402

# ------------------------------------------------------------------------------- backward protocol

METHODS = ["engine.backward(loss)", "loss.backward()", "out.backward(out_grad)", "engine.scale(loss).backward()",
           "engine.backward(out)"]


def _bw(torch, engine, how, x, other=None):
    out = engine(x)
    loss = out.float().pow(2).mean()
    if other is not None:   # a second, plain torch model in the same loss
        loss = loss + other(x.float()).pow(2).mean()
    if how == "engine.backward(loss)":
        engine.backward(loss)
    elif how == "loss.backward()":
        loss.backward()
    elif how == "out.backward(out_grad)":   # the vector-Jacobian form of the same loss
        out.backward((2 * out.detach().float() / out.numel()).to(out.dtype))
    elif how == "engine.scale(loss).backward()":
        engine.scale(loss).backward()
    elif how == "engine.backward(out)":
        engine.backward(out)


def backward_case(torch, deepspeed, stage, prec, how):
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
           "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True, "steps_per_print": 10 ** 9}
    if prec == "bf16":
        cfg["bf16"] = {"enabled": True}
    model = base._model(torch)
    engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), config=cfg)
    dt = next(engine.module.parameters()).dtype
    out = {"optimizer": base._name(engine.optimizer), "torch_style": engine._support_torch_style_backward}
    rank = int(os.environ["RANK"])
    torch.manual_seed(7)
    other = torch.nn.Linear(4, 1)
    try:
        for i in range(2):   # one accumulation window: 2 micro-batches, step() after each
            g = torch.Generator().manual_seed(100 + i + 10 * rank)
            x = torch.randn(2, 4, generator=g).to(dt)
            want = torch.autograd.grad(other(x.float()).pow(2).mean(), other.weight)[0]
            other.zero_grad()
            _bw(torch, engine, how, x, other if how in ("engine.backward(loss)", "loss.backward()") else None)
            if other.weight.grad is not None and i == 0:
                out["other_grad_ratio"] = round(float(other.weight.grad.sum() / want.sum()), 3)
            engine.step()
        out["ok"] = True
    except Exception as e:  # noqa: BLE001 - the exception is the result
        out.update(ok=False, error=type(e).__name__, message=base._first(e))
    with deepspeed.zero.GatheredParameters(list(engine.module.parameters()), modifier_rank=None):
        out["weights"] = torch.cat([p.detach().float().reshape(-1) for p in engine.module.parameters()])
    out["global_steps"] = engine.global_steps
    return out


def run_backward():
    torch, deepspeed = base._setup()
    res = {}
    for stage in (0, 1, 2, 3):
        for prec in ("fp32", "bf16"):
            ref = None
            for how in METHODS:
                r = backward_case(torch, deepspeed, stage, prec, how)
                w = r.pop("weights")
                other = w.clone()
                torch.distributed.broadcast(other, src=1)
                r["ranks_equal"] = bool(torch.equal(w, other))
                if ref is None:
                    ref = w
                    w0 = base._model(torch)
                    r["moved"] = not torch.allclose(w, torch.cat([p.detach().reshape(-1) for p in w0.parameters()]))
                r["same_as_engine_backward"] = bool(torch.allclose(w, ref, atol=1e-6 if prec == "fp32" else 1e-2))
                res[f"z{stage}|{prec}|{how}"] = r
                torch.distributed.barrier()
    res["moe"] = moe_real(torch, deepspeed)
    return res


def moe_real(torch, deepspeed):
    """A real MoE layer through deepspeed.initialize at this world size: the groups it made."""
    import deepspeed.utils.groups as g
    from deepspeed.moe.layer import MoE
    out = {}
    for ep in (1, 2):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), MoE(hidden_size=4, expert=torch.nn.Linear(4, 4),
                                                              num_experts=2, ep_size=ep))
        cfg = {"train_batch_size": 2, "zero_optimization": {"stage": 0}, "steps_per_print": 10 ** 9}
        deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), config=cfg)
        name = f"ep_size_{ep}"
        out[str(ep)] = {"expert_parallel": list(g._get_expert_parallel_group_ranks(name)),
                        "expert_data_parallel": list(g._get_expert_data_parallel_group_ranks(name))}
    return out


# ------------------------------------------------------------------------------- MoE process groups

class _Recorder:
    """Stands in for deepspeed.comm inside deepspeed.utils.groups and deepspeed.inference.engine: records
    the rank list of every new_group call for a given world size and rank."""

    def __init__(self, world, rank=0):
        self.world, self.rank, self.made = world, rank, []

    def is_initialized(self):
        return True

    def get_world_size(self, group=None):
        return self.world

    def get_rank(self, group=None):
        return self.rank

    def new_group(self, ranks=None, **_):
        self.made.append(list(ranks))
        return ("group", tuple(ranks))


def _err(e):
    return {"error": type(e).__name__, "message": base._first(e)}


def run_groups():
    base.clean_env()
    import torch
    import deepspeed.inference.engine as ie
    import deepspeed.utils.groups as g
    from deepspeed.moe.layer import MoE
    res = {"train": {}, "infer": {}, "layer": {}}
    for world in (1, 2, 4, 8):
        for ep in (1, 2, 3, 4, 8):
            for dbe in (False, True):
                rec = _Recorder(world)
                g.dist = rec
                g._EXPERT_PARALLEL_GROUP.clear()
                g._EXPERT_DATA_PARALLEL_GROUP.clear()
                g._EXPERT_PARALLEL_GROUP_RANKS.clear()
                g._EXPERT_DATA_PARALLEL_GROUP_RANKS.clear()
                try:
                    g._create_expert_and_data_parallel(ep, use_data_before_expert_parallel_=dbe)
                    # the first `ep` new_group calls are the expert-data-parallel groups
                    n_edp = ep   # one pipeline stage (no mpu): ep expert-data-parallel groups first
                    r = {"expert_data_parallel": rec.made[:ep], "expert_parallel": rec.made[n_edp:]}
                except Exception as e:  # noqa: BLE001
                    r = _err(e)
                res["train"][f"{world}|{ep}|{dbe}"] = r
            rec = _Recorder(world)
            ie.dist = rec
            self = type("E", (), {})()
            try:
                ie.InferenceEngine._create_ep_parallel_group(self, ep)
                made = rec.made
                n_ep = max(world // ep, 0)
                r = {"ep": made[:n_ep], "expert_mp": made[n_ep:]}
            except Exception as e:  # noqa: BLE001
                r = _err(e)
            res["infer"][f"{world}|{ep}"] = r
    for n, ep in ((8, 2), (8, 3), (2, 4), (1, 1)):
        try:
            m = MoE(hidden_size=4, expert=torch.nn.Linear(4, 4), num_experts=n, ep_size=ep)
            res["layer"][f"{n}|{ep}"] = {"num_local_experts": m.num_local_experts, "group": m.expert_group_name}
        except Exception as e:  # noqa: BLE001
            res["layer"][f"{n}|{ep}"] = _err(e)
    from deepspeed.inference.config import DeepSpeedInferenceConfig
    c = DeepSpeedInferenceConfig(moe={"enabled": True, "ep_size": 2, "num_experts": [8]})
    res["config"] = {"ep_size": c.moe.ep_size, "moe_experts": c.moe.moe_experts,
                     "default": [DeepSpeedInferenceConfig().moe.ep_size, DeepSpeedInferenceConfig().moe.moe_experts]}
    return res


# ------------------------------------------------------------------------------- through Accelerate

def run_accelerate():
    """accelerator.backward(loss) vs loss.backward() in an Accelerate loop under DeepSpeed, one rank."""
    import importlib
    base.clean_env()
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    import torch
    import deepspeed  # noqa: F401
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DeepSpeedPlugin
    res = {}
    for stage in (0, 1, 2, 3):
        for how in ("accelerator.backward(loss)", "loss.backward()"):
            AcceleratorState._reset_state(True)
            acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=stage, gradient_accumulation_steps=1))
            model = base._model(torch)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            dl = torch.utils.data.DataLoader(torch.randn(4, 4, generator=torch.Generator().manual_seed(3)), batch_size=2)
            model, opt, dl = acc.prepare(model, opt, dl)
            with deepspeed.zero.GatheredParameters(list(model.module.parameters()), modifier_rank=None):
                w0 = [p.detach().clone() for p in model.module.parameters()]
            try:
                for x in dl:
                    loss = model(x).pow(2).mean()
                    acc.backward(loss) if how.startswith("accelerator") else loss.backward()
                    opt.step()
                    opt.zero_grad()
                with deepspeed.zero.GatheredParameters(list(model.module.parameters()), modifier_rank=None):
                    changed = any(not torch.equal(a, b) for a, b in zip(w0, model.module.parameters()))
                r = {"ok": True, "weights_changed": changed, "global_steps": model.global_steps}
            except Exception as e:  # noqa: BLE001
                r = {"ok": False, **_err(e)}
            res[f"z{stage}|{how}"] = r
    return res


# ------------------------------------------------------------------------------- what loads when

def run_loads():
    import atexit
    base.clean_env()
    reg = []
    real_register = atexit.register

    def register(f, *a, **k):
        name = f"{getattr(f, '__module__', None)}.{getattr(f, '__qualname__', '?')}"
        if name.startswith(("deepspeed", "triton")):   # torch's own exit hooks are not DeepSpeed's
            reg.append(name)
        return real_register(f, *a, **k)
    atexit.register = register

    def ds_mods():
        return sorted(m for m in sys.modules if m.startswith(("deepspeed.ops.", "triton")) and
                      not m.startswith("deepspeed.ops.op_builder"))

    import torch
    import torch.distributed as tdist
    import deepspeed
    res = {"import": {"ops": ds_mods(), "atexit": list(reg),
                      "matmul_ext": "deepspeed.ops.transformer.inference.triton.matmul_ext" in sys.modules,
                      "triton": "triton" in sys.modules}}
    loads = []
    from deepspeed.ops.op_builder.builder import OpBuilder
    from unittest import mock

    def load(self, verbose=True):   # record, never compile
        loads.append(self.NAME)
        return mock.MagicMock(name=self.NAME)
    OpBuilder.load = load
    import importlib
    dct = importlib.import_module("deepspeed.comm.torch")
    real_shm = dct.build_shm_op
    calls = []

    def shm():
        calls.append(1)
        b = deepspeed.accelerator.get_accelerator().create_op_builder("ShareMemCommBuilder")
        return None if b is None else (loads.append(b.NAME) or None)
    dct.build_shm_op = shm
    tdist.init_process_group("gloo", rank=0, world_size=1)
    deepspeed.init_distributed(dist_backend="gloo")
    res["init_distributed"] = {"builders": list(loads), "build_shm_op_called": bool(calls)}
    del real_shm
    feats = [("stage 0, client SGD", {}, "client SGD"), ("stage 1, client SGD", {"stage": 1}, "client SGD"),
             ("stage 2, client SGD", {"stage": 2}, "client SGD"), ("stage 3, client SGD", {"stage": 3}, "client SGD"),
             ("stage 2, config Adam", {"stage": 2}, "Adam"), ("stage 2, config AdamW", {"stage": 2}, "AdamW"),
             ("stage 2, config Adam + offload_optimizer cpu", {"stage": 2, "offload": "cpu"}, "Adam"),
             ("stage 3, config Adam + offload_optimizer cpu", {"stage": 3, "offload": "cpu"}, "Adam"),
             ("stage 2, config Adagrad + offload_optimizer cpu", {"stage": 2, "offload": "cpu"}, "Adagrad"),
             ("stage 2, config Lion", {"stage": 2}, "Lion"),
             ("stage 2, config Lion + offload_optimizer cpu", {"stage": 2, "offload": "cpu"}, "Lion"),
             ("stage 0, config Lamb", {}, "Lamb"),
             ("stage 3, zero_quantized_weights", {"stage": 3, "extra": {"zero_quantized_weights": True}}, "client SGD"),
             ("stage 3, zero_quantized_gradients", {"stage": 3, "extra": {"zero_quantized_gradients": True}},
              "client SGD"),
             ("stage 3, config Adam + offload_optimizer nvme",
              {"stage": 3, "extra": {"offload_optimizer": {"device": "nvme", "nvme_path": "nvme"}}}, "Adam")]
    for label, z, opt in feats:
        del loads[:]
        n_reg = len(reg)
        cfg = {"train_batch_size": 1, "zero_optimization": {"stage": z.get("stage", 0)},
               "zero_allow_untested_optimizer": True, "steps_per_print": 10 ** 9}
        if z.get("offload"):
            cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
        cfg["zero_optimization"].update(z.get("extra", {}))
        if opt != "client SGD":
            cfg["optimizer"] = {"type": opt, "params": {"lr": 0.01}}
        model = base._model(torch)
        client = torch.optim.SGD(model.parameters(), lr=0.01) if opt == "client SGD" else None
        try:
            engine, *_ = deepspeed.initialize(model=model, optimizer=client, config=cfg)
            opt_name = base._name(getattr(engine.optimizer, "optimizer", engine.optimizer))
            r = {"ok": True, "optimizer": opt_name}
        except Exception as e:  # noqa: BLE001
            r = {"ok": False, **_err(e)}
        r["builders"] = sorted(set(loads))
        r["atexit"] = reg[n_reg:]
        res[label] = r
    res["end"] = {"matmul_ext": "deepspeed.ops.transformer.inference.triton.matmul_ext" in sys.modules,
                  "triton": "triton" in sys.modules, "HAS_TRITON": bool(deepspeed.HAS_TRITON)}
    return res


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    mode = sys.argv[1]
    res = {"backward": run_backward, "groups": run_groups, "loads": run_loads,
           "accelerate": run_accelerate}[mode]()
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
