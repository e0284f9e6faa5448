"""One gloo rank, DS_ACCELERATOR=cpu (deepspeed 0.19.8): (a) fine-tuning from a weights-only load --
do the fp32 master weights follow the loaded 16-bit module at ZeRO stage 0 (bf16, fp16) and 1/2;
(b) an optimizer param group holding only frozen parameters at ZeRO-2 vs ZeRO-3.
argv[1]: scratch dir. Prints RESULT <json>."""
import json
import os
import sys
import traceback

import torch
import deepspeed

deepspeed.init_distributed(dist_backend="gloo")
ROOT = sys.argv[1]


def engine(stage, dtype, seed):
    torch.manual_seed(seed)
    m = torch.nn.Linear(16, 16)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": stage}, dtype: {"enabled": True}}
    if dtype == "fp16":
        cfg[dtype]["initial_scale_power"] = 4
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    eng, _, _, _ = deepspeed.initialize(model=m, optimizer=opt, config=cfg)
    return eng


def step(eng):
    dt = next(eng.module.parameters()).dtype
    loss = eng(torch.ones(1, 16, dtype=dt)).float().pow(2).sum()
    eng.backward(loss)
    eng.step()


def w(eng):
    return eng.module.weight.detach().float().clone()


def finetune(stage, dtype):
    d = os.path.join(ROOT, f"ft_{stage}_{dtype}")
    src = engine(stage, dtype, seed=0)
    step(src)
    src.save_checkpoint(d)
    saved = w(src)
    fresh = w(engine(stage, dtype, seed=1))
    out = {"optimizer": None}
    for name, kw in {"no_optim_states": dict(load_optimizer_states=False, load_lr_scheduler_states=False),
                     "module_only": dict(load_module_only=True)}.items():
        eng = engine(stage, dtype, seed=1)
        out["optimizer"] = type(eng.optimizer).__name__
        eng.load_checkpoint(d, **kw)
        loaded_ok = bool(torch.equal(w(eng), saved))
        step(eng)
        after = w(eng)
        out[name] = {"loaded": loaded_ok,
                     "after_step_near_saved": round(float((after - saved).abs().max()), 4),
                     "after_step_near_fresh": round(float((after - fresh).abs().max()), 4)}
        out[name]["reverted"] = out[name]["after_step_near_fresh"] < out[name]["after_step_near_saved"]
    return out


def frozen_group(stage):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
    for p in m[0].parameters():
        p.requires_grad_(False)
    groups = [{"params": [p]} for p in m.parameters()]  # one group per parameter, frozen ones included
    opt = torch.optim.SGD(groups, lr=1e-3)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": stage}, "bf16": {"enabled": True}}
    try:
        eng, _, _, _ = deepspeed.initialize(model=m, optimizer=opt, config=cfg)
        step(eng)
        return {"error": None, "optimizer": type(eng.optimizer).__name__}
    except Exception as e:  # noqa: BLE001
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return {"error": f"{type(e).__name__}: {e}", "file": tb.filename.split("site-packages/")[-1],
                "line": tb.line}


def filtered_groups(stage):
    """The fix: drop param groups without a trainable parameter before deepspeed.initialize."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
    for p in m[0].parameters():
        p.requires_grad_(False)
    groups = [{"params": [p]} for p in m.parameters()]
    groups = [g for g in groups if any(p.requires_grad for p in g["params"])]
    opt = torch.optim.SGD(groups, lr=1e-3)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": stage}, "bf16": {"enabled": True}}
    eng, _, _, _ = deepspeed.initialize(model=m, optimizer=opt, config=cfg)
    step(eng)
    return {"error": None}


def mixed_group(stage):
    """Frozen parameters inside a group that also holds trainable ones."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
    for p in m[0].parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": stage}, "bf16": {"enabled": True}}
    eng, _, _, _ = deepspeed.initialize(model=m, optimizer=opt, config=cfg)
    step(eng)
    return {"error": None}


res = {"finetune": {}, "frozen": {}, "filtered": {}, "mixed": {}}
for stage, dtype in [(0, "bf16"), (0, "fp16"), (1, "bf16"), (2, "bf16")]:
    try:
        res["finetune"][f"{stage}_{dtype}"] = finetune(stage, dtype)
    except Exception as e:  # noqa: BLE001
        res["finetune"][f"{stage}_{dtype}"] = {"error": f"{type(e).__name__}: {e}"[:300]}
for stage in (1, 2, 3):
    res["frozen"][str(stage)] = frozen_group(stage)
    res["filtered"][str(stage)] = filtered_groups(stage)
    res["mixed"][str(stage)] = mixed_group(stage)
print("RESULT " + json.dumps(res))
