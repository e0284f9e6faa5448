"""Child process for test_ds_behaviour_changes.py: the pinned deepspeed 0.19.8 side of DeepSpeed
behaviours that changed across releases (references/deepspeed-behaviour-changes.md). One gloo rank
on DeepSpeed's CPU accelerator; prints one line "RESULT <json>".

usage: python _ds_changes_probe.py CASE     (CASE: import_start_method | warmup_decay_init |
       late_module_zero3 | bf16_stage0 | trace_cache)

The caller sets DS_ACCELERATOR=cpu and a private TORCH_EXTENSIONS_DIR.
"""
from __future__ import annotations

import contextlib
import io
import json
import multiprocessing as mp
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def import_start_method():
    import deepspeed  # noqa: F401
    return {"start_method": mp.get_start_method(allow_none=True)}


def warmup_decay_init():
    """WarmupDecayLR built on an AdamW with lr 1e-3 (no engine): what lr param_groups hold at once."""
    import torch
    from deepspeed.runtime.lr_schedules import WarmupDecayLR, WarmupCosineLR
    out = {}
    for name, make in (("WarmupDecayLR", lambda o: WarmupDecayLR(o, total_num_steps=100, warmup_min_lr=0.0,
                                                                   warmup_max_lr=1e-4, warmup_num_steps=10)),
                       ("WarmupCosineLR", lambda o: WarmupCosineLR(o, total_num_steps=100, warmup_num_steps=10))):
        opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
        make(opt)
        out[name] = opt.param_groups[0]["lr"]
    return out


def warmup_groups():
    """WarmupCosineLR on an AdamW with two param groups (lr 1e-3 and 2e-3): the lr of each group at
    construction (0.19.0+ fills every group, PR #7969); and WarmupCosineLR / WarmupLR built on an
    optimizer whose lr is already the warmup start 0.0 (the pre-0.15.3 workaround): lrs of steps 1-6."""
    import torch
    from deepspeed.runtime.lr_schedules import WarmupCosineLR, WarmupLR
    m = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW([{"params": [m.weight], "lr": 1e-3}, {"params": [m.bias], "lr": 2e-3}])
    WarmupCosineLR(opt, total_num_steps=100, warmup_num_steps=10)
    out = {"cosine_two_groups_at_init": [g["lr"] for g in opt.param_groups]}
    for name, make in (("cosine_opt_lr0", lambda o: WarmupCosineLR(o, total_num_steps=100, warmup_num_steps=4)),
                       ("warmuplr_opt_lr0", lambda o: WarmupLR(o, warmup_min_lr=0.0, warmup_max_lr=1e-3,
                                                              warmup_num_steps=4, warmup_type="linear"))):
        opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.0)
        sch = make(opt)
        lrs = []
        for _ in range(6):
            lrs.append(opt.param_groups[0]["lr"])   # the lr this optimizer step would use
            opt.step()
            sch.step()
        out[name] = lrs
    return out


def _engine(model, cfg, optimizer=None):
    from _ds_probe import _setup
    torch, deepspeed = _setup()
    base = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 10**9,
            "zero_allow_untested_optimizer": True}
    base.update(cfg)
    if optimizer is None:
        base.setdefault("optimizer", {"type": "SGD", "params": {"lr": 0.1}})
        eng, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=base)
    else:
        eng, opt, _, _ = deepspeed.initialize(model=model, optimizer=optimizer(model), config=base)
    return torch, eng


def _first(e):
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


def late_module_zero3():
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.a(x)
            if hasattr(self, "late"):
                y = self.late(y)
            return y.sum()

    torch, eng = _engine(Net(), {"zero_optimization": {"stage": 3}})
    eng.module.late = torch.nn.Linear(4, 4)        # attached after deepspeed.initialize
    out = {"late_params_type_before": type(eng.module.late._parameters).__name__}
    try:
        loss = eng(torch.randn(2, 4))
        out["forward"] = "ok"
    except Exception as e:  # noqa: BLE001
        out["forward"] = _first(e)
        return out
    out["late_params_type_after"] = type(eng.module.late._parameters).__name__
    w = eng.module.late.weight
    out["late_has_ds_id"] = hasattr(w, "ds_id")
    out["late_numel"] = w.numel()
    opt_ids = {id(p) for g in eng.optimizer.optimizer.param_groups for p in g["params"]} \
        if hasattr(eng.optimizer, "optimizer") else set()
    out["late_in_inner_optimizer"] = id(w) in opt_ids
    try:
        eng.backward(loss)
        eng.step()
        out["step"] = "ok"
    except Exception as e:  # noqa: BLE001
        out["step"] = _first(e)
    return out


def bf16_stage0():
    """bf16 with ZeRO stage 0 and a client torch AdamW (FP16_UnfusedOptimizer): after one engine.step()
    are the grads cleared, what loss scale the wrapper holds, and stage 0 vs stage 1 first-step norms."""
    import torch
    torch.manual_seed(0)
    res = {}
    for stage in (0, 1):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
        if stage == 0:
            torch_, eng = _engine(model, {"bf16": {"enabled": True}, "zero_optimization": {"stage": 0}},
                                  optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3))
        else:
            eng, _, _, _ = __import__("deepspeed").initialize(
                model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3),
                config={"train_micro_batch_size_per_gpu": 2, "steps_per_print": 10**9,
                        "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}})
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 8, generator=g).to(torch.bfloat16)
        norms = []
        for _ in range(3):
            loss = eng(x).float().pow(2).mean()
            eng.backward(loss)
            eng.step()
            norms.append(float(eng.get_global_grad_norm()))
        row = {"optimizer": type(eng.optimizer).__name__, "norms": norms}
        if stage == 0:
            row["grads_after_step"] = [None if p.grad is None else float(p.grad.abs().sum())
                                       for p in eng.module.parameters()]
            lsc = eng.optimizer.loss_scale_config
            row["cur_scale"] = float(lsc.cur_scale)
            row["use_grad_scaling"] = bool(lsc.use_grad_scaling)
        res[f"stage{stage}"] = row
    return res


def trace_cache():
    """ZeRO-3 with submodule order changing between forwards: is 'Invalidate trace cache' printed,
    with log_trace_cache_warnings at its default and set true."""
    import torch
    import deepspeed

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4)
            self.swap = False

        def forward(self, x):
            if self.swap:
                return self.a(self.b(x)).sum()
            return self.b(self.a(x)).sum()

    out = {}
    for flag in (None, True):
        zero = {"stage": 3}
        if flag is not None:
            zero["log_trace_cache_warnings"] = flag
        if flag is None:
            torch, eng = _engine(Net(), {"zero_optimization": zero})
        else:
            eng, _, _, _ = deepspeed.initialize(model=Net(), model_parameters=None, config={
                "train_micro_batch_size_per_gpu": 2, "steps_per_print": 10**9,
                "zero_allow_untested_optimizer": True, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": zero})
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            for swap in (False, False, True, True, False):
                eng.module.swap = swap
                with torch.no_grad():
                    eng(torch.randn(2, 4))
        lines = [ln for ln in buf.getvalue().splitlines() if "Invalidate trace cache" in ln]
        out["default" if flag is None else "true"] = lines
        out["config_default"] = eng._config.zero_config.log_trace_cache_warnings if flag is None \
            else out.get("config_default")
    return out


if __name__ == "__main__":
    res = globals()[sys.argv[1]]()
    print("RESULT " + json.dumps(res), flush=True)
