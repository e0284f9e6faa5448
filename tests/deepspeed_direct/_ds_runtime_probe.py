"""Child process for test_ds_runtime.py: three run-time behaviours of deepspeed 0.19.8 on DeepSpeed's CPU
accelerator (gloo). Prints one line "RESULT <json>".

usage: python _ds_runtime_probe.py monitor WORKDIR      (1 rank: what the plain engine writes to csv_monitor,
                                                         what engine.backward returns)
       python _ds_runtime_probe.py cast WORKDIR         (1 rank: parameter / buffer dtypes after initialize
                                                         under bf16, keep_in_fp32_modules, torch_autocast)
       python _ds_runtime_probe.py unused WORKDIR       (1 rank: ZeRO-2 with offload_optimizer cpu and a torch AdamW
                                                         client optimizer, a Linear the loss never uses;
                                                         ignore_unused_parameters true, then false)
       python _ds_runtime_probe.py pipe WORKDIR VARIANT (2 ranks, 2 pipeline stages: train micro-batch 2,
                                                         eval batch 8; VARIANT = static | num_micro_batches |
                                                         reset | dynamic; static_small / dynamic_small: eval
                                                         batch 1)

The caller sets DS_ACCELERATOR=cpu, a private TORCH_EXTENSIONS_DIR, RANK / WORLD_SIZE / MASTER_*.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_probe as base  # noqa: E402


def _adamw(torch, params):
    return torch.optim.AdamW(params, lr=1e-3)


def monitor(torch, deepspeed, work):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
           "csv_monitor": {"enabled": True, "output_path": str(work), "job_name": "job"},
           "zero_optimization": {"stage": 0}}
    engine, *_ = deepspeed.initialize(model=model, optimizer=_adamw(torch, model.parameters()), config=cfg)
    losses, returned = [], []
    for i in range(4):                                     # 2 optimizer steps of 2 micro-batches
        x = torch.randn(1, 4, generator=torch.Generator().manual_seed(i))
        loss = engine(x).pow(2).mean()
        losses.append(loss.item())
        returned.append(engine.backward(loss).item())
        engine.step()
    files = sorted(str(p.relative_to(work)) for p in Path(work).rglob("*.csv"))
    return {"csv_files": files,
            "returned_over_loss": [round(r / lo, 6) for r, lo in zip(returned, losses)],
            "has_losses_attr_value": getattr(engine, "losses", "absent")}


def cast(torch, deepspeed, work):
    nn = torch.nn

    class MoE(nn.Module):
        def __init__(self, upcast=False, buf_dtype=torch.float32):
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.router = nn.Linear(4, 2, bias=False)
            self.router_weight = nn.Parameter(torch.zeros(2, 4, dtype=torch.float32))
            self.register_buffer("e_score_correction_bias", torch.zeros(2, dtype=buf_dtype))
            self.upcast = upcast

        def forward(self, x):
            h = self.proj(x)
            with torch.autocast(device_type="cpu", enabled=False):
                w = self.router_weight.float() if self.upcast else self.router_weight
                logits = torch.nn.functional.linear(h.float(), w)
            return h.float().sum() + logits.sum()

    out = {}
    base_cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 0}}
    keep = ["router", "router_weight", "e_score_correction_bias"]
    bf16 = {"bf16": {"enabled": True}}
    variants = {                                           # name: (config, upcast in forward[, buffer dtype])
        "bf16": (bf16, False),
        "bf16 keep list": ({**bf16, "data_types": {"keep_in_fp32_modules": keep}}, False),
        "bf16 buffer_dtype bf16": ({**bf16, "data_types": {"buffer_dtype": "bf16"}}, False),
        "bf16 buffer_dtype bf16 keep list": ({**bf16, "data_types": {"buffer_dtype": "bf16",
                                                                     "keep_in_fp32_modules": keep}}, False),
        "bf16 weight.float()": (bf16, True),
        # the buffer arrives in bf16 (a model loaded or built in bf16, or zero.Init): no buffer_dtype set
        "bf16 buffer arrives bf16": (bf16, False, torch.bfloat16),
        "bf16 buffer arrives bf16 keep list": ({**bf16, "data_types": {"keep_in_fp32_modules": keep}}, False,
                                               torch.bfloat16),
        "torch_autocast": ({"torch_autocast": {"enabled": True, "dtype": "bfloat16"}}, False),
    }
    for name, (extra, upcast, *buf) in variants.items():
        torch.manual_seed(0)
        model = MoE(upcast, *buf)
        cfg = {**base_cfg, **extra}
        engine, *_ = deepspeed.initialize(model=model, optimizer=_adamw(torch, model.parameters()), config=cfg)
        m = engine.module
        row = {"proj.weight": str(m.proj.weight.dtype), "router.weight": str(m.router.weight.dtype),
               "router_weight": str(m.router_weight.dtype),
               "e_score_correction_bias": str(m.e_score_correction_bias.dtype)}
        try:
            engine.backward(engine(torch.randn(1, 4).to(m.proj.weight.dtype)))
            engine.step()
            row["fp32 router forward"] = "ok"
        except Exception as e:  # noqa: BLE001 - the exception is the result
            row["fp32 router forward"] = f"{type(e).__name__}: {base._first(e)}"
        out[name] = row
    return out


def pipe(torch, deepspeed, work, variant):
    from deepspeed.pipe import PipelineModule
    nn = torch.nn
    torch.manual_seed(0)
    layers = [nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 1)]
    shapes = []

    class Spy(nn.Module):                                  # last layer of stage 0: records what it sends
        def forward(self, x):
            shapes.append(list(x.shape))
            return x
    layers.insert(2, Spy())
    model = PipelineModule(layers=layers, num_stages=2, loss_fn=nn.MSELoss(), partition_method="uniform",
                           dynamic_shape=variant.startswith("dynamic"))
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "steps_per_print": 1000}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=[p for p in model.parameters()], config=cfg)

    def it(bs):
        g = torch.Generator().manual_seed(bs)
        while True:
            yield torch.randn(bs, 4, generator=g), torch.randn(bs, 1, generator=g)

    res = {"stage": engine.stage_id}
    try:
        engine.train_batch(it(2))
        if variant == "reset":
            engine.reset_activation_shape()
        kw = {"num_micro_batches": 1} if variant == "num_micro_batches" else {}
        loss = engine.eval_batch(it(1 if variant.endswith("_small") else 8), **kw)
        res["eval"] = "ok"
        res["eval_loss_is_tensor"] = torch.is_tensor(loss)
        if torch.is_tensor(loss):
            res["eval_loss"] = float(loss)
        if variant == "reset":
            engine.reset_activation_shape()
        engine.train_batch(it(2))
        res["train_after_eval"] = "ok"
    except Exception as e:  # noqa: BLE001 - the exception is the result
        res["error"] = f"{type(e).__name__}: {base._first(e)}"
    res["sent_shapes"] = shapes
    return res


def unused(torch, deepspeed, work):
    class TwoLinears(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.used(x)

    res = {}
    for ignore in (True, False):
        torch.manual_seed(0)
        model = TwoLinears()
        cfg = {"train_micro_batch_size_per_gpu": 1, "zero_force_ds_cpu_optimizer": False,
               "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"},
                                     "ignore_unused_parameters": ignore}}
        try:
            engine, *_ = deepspeed.initialize(model=model, optimizer=_adamw(torch, model.parameters()), config=cfg)
            loss = engine(torch.randn(1, 4)).pow(2).mean()
            engine.backward(loss)
            engine.step()
            res[str(ignore).lower()] = "ok"
        except Exception as e:  # noqa: BLE001 - the exception is the result
            res[str(ignore).lower()] = f"{type(e).__name__}: {' '.join(str(e).split())}"
    return res


def main():
    mode, work = sys.argv[1], Path(sys.argv[2])
    torch, deepspeed = base._setup()
    if mode == "monitor":
        r = monitor(torch, deepspeed, work)
    elif mode == "cast":
        r = cast(torch, deepspeed, work)
    elif mode == "unused":
        r = unused(torch, deepspeed, work)
    else:
        r = pipe(torch, deepspeed, work, sys.argv[3])
    sys.stdout.write("RESULT " + json.dumps(r) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
