"""Child process for test_fx23_ds_runtime_w5.py (deepspeed 0.19.8, DS_ACCELERATOR=cpu, gloo).
Prints one line "RESULT <json>".

usage: python _fx23_w5_probe.py comm WORKDIR        (2 ranks) ZeRO-2 engines with bf16 / bf16 + "communication_data_type":
           "fp32" / no mixed precision: engine and optimizer communication_data_type, and the dtypes of the
           floating tensors handed to torch.distributed reductions during one backward + step.
       python _fx23_w5_probe.py flatten WORKDIR     (1 rank) ZeRO-2 bf16 init with accelerator.available_memory()
           forced to 0 and to 1 TiB: the order of empty_cache / available_memory calls and where the flat buffer
           was built.
       python _fx23_w5_probe.py nested WORKDIR      (1 rank) zero.Init inside zero.Init, then deepspeed.initialize.
       python _fx23_w5_probe.py stage0 WORKDIR      (1 rank) bf16 + ZeRO stage 0: save, then load into a fresh engine.
       python _fx23_w5_probe.py wrapper WORKDIR     (1 rank) ZeRO-3 with a wrapper that delegates unknown attributes to
           its child (as PEFT's ModulesToSaveWrapper does): whose hook classes each module holds; two steps.

The caller sets DS_ACCELERATOR=cpu, a private TORCH_EXTENSIONS_DIR, RANK / WORLD_SIZE / MASTER_*.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_probe as base  # noqa: E402


def _cfg(**extra):
    cfg = {"train_micro_batch_size_per_gpu": 2, "steps_per_print": 10**6, "zero_allow_untested_optimizer": True}
    cfg.update(extra)
    return cfg


def _engine(torch, deepspeed, cfg, model=None):
    torch.manual_seed(0)
    model = model or torch.nn.Sequential(torch.nn.Linear(64, 64))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    return engine


def _step(torch, engine, n=1):
    dt = next(engine.module.parameters()).dtype
    g = torch.Generator().manual_seed(1)
    for _ in range(n):
        x = torch.randn(2, 64, generator=g).to(dt)
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()
    return float(loss)


def comm(torch, deepspeed):
    import torch.distributed as tdist
    seen = []
    names = ("all_reduce", "reduce", "reduce_scatter_tensor", "reduce_scatter", "all_reduce_coalesced")
    for name in names:
        real = getattr(tdist, name, None)
        if real is None:
            continue

        def wrap(*a, _real=real, _name=name, **k):
            ts = [t for t in list(a) + list(k.values()) if isinstance(t, torch.Tensor)]
            seen.extend(f"{_name}:{t.dtype}" for t in ts if t.is_floating_point() and t.numel() > 1)
            return _real(*a, **k)
        setattr(tdist, name, wrap)
    res = {}
    for label, extra in (("bf16", {"bf16": {"enabled": True}}),
                         ("bf16_fp32", {"bf16": {"enabled": True}, "communication_data_type": "fp32"}),
                         ("none", {})):
        engine = _engine(torch, deepspeed, _cfg(zero_optimization={"stage": 2}, **extra))
        seen.clear()
        _step(torch, engine)
        res[label] = {"engine": str(engine.communication_data_type),
                      "optimizer": str(engine.optimizer.communication_data_type),
                      "param": str(next(engine.module.parameters()).dtype),
                      "reduced": sorted(set(seen))}
    try:
        _engine(torch, deepspeed, _cfg(zero_optimization={"stage": 2}, bf16={"enabled": True},
                                       communication_data_type="float32"))
        res["bad_value"] = "accepted"
    except Exception as e:  # noqa: BLE001 - the exception is the result
        res["bad_value"] = f"{type(e).__name__}: {e}"
    return res


def flatten(torch, deepspeed):
    import deepspeed.runtime.zero.stage_1_and_2 as s12
    from deepspeed.accelerator import get_accelerator
    acc = get_accelerator()
    real_empty = s12.empty_cache
    res = {}
    for label, avail in (("no_room", 0), ("room", 1 << 40)):
        calls = []

        def empty():
            calls.append("empty_cache")
            real_empty()

        def available(device_index=None, _a=avail):
            calls.append("available_memory")
            return _a
        s12.empty_cache = empty
        acc.available_memory = available
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 64)
        before = [p.detach().clone() for p in model.parameters()]
        engine = _engine(torch, deepspeed, _cfg(zero_optimization={"stage": 2}, bf16={"enabled": True}), model)
        opt = engine.optimizer
        flat = opt.bit16_groups_flat[0]
        params = list(engine.module.parameters())
        res[label] = {"calls": calls, "flat_numel": flat.numel(), "flat_dtype": str(flat.dtype),
                      "views_of_flat": all(p.data.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
                                           for p in params),
                      "values_kept": all(torch.equal(p.detach().float(), b.to(p.dtype).float())
                                         for p, b in zip(params, before)),
                      "cpu_data_left": any(hasattr(p, "cpu_data") for p in params)}
    s12.empty_cache = real_empty
    return res


def nested(torch, deepspeed):
    import deepspeed.runtime.zero.partition_parameters as pp
    cfg = _cfg(zero_optimization={"stage": 3})
    linear_init = torch.nn.Linear.__init__
    res = {}
    with deepspeed.zero.Init(config_dict_or_path=cfg):
        res["depth_outer"] = pp.zero_init_context
        with deepspeed.zero.Init(config_dict_or_path=cfg):
            res["depth_inner"] = pp.zero_init_context
            m1 = torch.nn.Linear(64, 64)
        res["depth_after_inner"] = pp.zero_init_context
        res["patched_after_inner"] = torch.nn.Linear.__init__ is not linear_init
    res["depth_after_outer"] = pp.zero_init_context
    res["restored_after_outer"] = torch.nn.Linear.__init__ is linear_init
    res["m1_local_numel"] = m1.weight.numel()
    res["m1_ds_shape"] = list(m1.weight.ds_shape)
    model = torch.nn.Sequential(m1)
    engine = _engine(torch, deepspeed, cfg, model)
    res["engine"] = type(engine).__name__
    res["loss"] = _step(torch, engine, 2)
    return res


def stage0(torch, deepspeed, work):
    cfg = _cfg(zero_optimization={"stage": 0}, bf16={"enabled": True})
    engine = _engine(torch, deepspeed, cfg)
    res = {"wrapper": type(engine.optimizer).__name__,
           "has_restore_from_bit16": hasattr(engine.optimizer, "_restore_from_bit16_weights")}
    _step(torch, engine, 3)
    res["saved_steps"] = sorted({int(float(s["step"])) for s in engine.optimizer.optimizer.state.values()})
    engine.save_checkpoint(str(work), tag="t")
    res["files"] = sorted(os.listdir(os.path.join(work, "t")))
    fresh = _engine(torch, deepspeed, cfg)
    path, _ = fresh.load_checkpoint(str(work), tag="t")
    res["load_path_returned"] = path is not None
    st = fresh.optimizer.optimizer.state
    res["optimizer_state_steps"] = sorted({int(float(s["step"])) for s in st.values()})
    res["weights_equal"] = all(torch.equal(a, b) for a, b in zip(engine.module.parameters(),
                                                                    fresh.module.parameters()))
    return res


def wrapper(torch, deepspeed):
    nn = torch.nn

    class Delegating(nn.Module):
        """Unknown attributes are looked up on the wrapped child, like peft's ModulesToSaveWrapper."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.inner, name)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), Delegating(nn.Linear(64, 64)))
    cfg = _cfg(zero_optimization={"stage": 3, "stage3_param_persistence_threshold": 0})
    engine = _engine(torch, deepspeed, cfg, model)
    w = engine.module[1]
    res = {"own": {k: k in w.__dict__ for k in ("pre_bwd_fn", "post_bwd_fn", "ds_grads_remaining")},
           "child_own": {k: k in w.inner.__dict__ for k in ("pre_bwd_fn", "post_bwd_fn", "ds_grads_remaining")},
           "distinct_classes": w.__dict__.get("post_bwd_fn") is not w.inner.__dict__.get("post_bwd_fn")}
    res["loss"] = _step(torch, engine, 2)
    res["own_counter_after_steps"] = "ds_grads_remaining" in w.__dict__
    return res


def main():
    mode, work = sys.argv[1], sys.argv[2]
    torch, deepspeed = base._setup()
    r = {"comm": lambda: comm(torch, deepspeed), "flatten": lambda: flatten(torch, deepspeed),
         "nested": lambda: nested(torch, deepspeed), "stage0": lambda: stage0(torch, deepspeed, work),
         "wrapper": lambda: wrapper(torch, deepspeed)}[mode]()
    sys.stdout.write("RESULT " + json.dumps(r) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
