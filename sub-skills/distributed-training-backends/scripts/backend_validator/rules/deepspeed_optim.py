"""DeepSpeed JSON rules: optimizer and scheduler blocks - removed and unknown types, parameters,
wrapping, ZeRO compatibility (family ``deepspeed``, deepspeed 0.19.8; the docstring convention is in _ds.py).
"""
from __future__ import annotations

from .. import deepspeed as D
from ..core import Context, did_you_mean, rule
from ._ds import SRC_CFG, SRC_ENGINE, _INT_PARAMS, _NUM_PARAMS, _num, _stage

# Every rule here reads the top-level "optimizer" or "scheduler" block and reports nothing without one
# (rules/__init__.py: "=word" is a whole key, so offload_optimizer alone does not load this module).
NEEDS = ("=optimizer", "=scheduler")


@rule(id="ds-removed-optimizer", severity="error", family="deepspeed",
      summary="optimizer type removed in deepspeed 0.19 (1-bit Adam/LAMB, 0/1 Adam)",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def removed_optimizer(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"lr": 0.001}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if isinstance(t, str) and t.lower() in D.REMOVED_OPTIMIZERS:
        yield ctx.report(("optimizer", "type"), f"optimizer type {t!r} was removed in deepspeed 0.19 "
                         "(\"is not a supported DeepSpeed Optimizer\")", D.REMOVED_OPTIMIZERS[t.lower()])


@rule(id="ds-unknown-optimizer", severity="error", family="deepspeed",
      summary="optimizer type that is neither a DeepSpeed optimizer nor a torch.optim class",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def unknown_optimizer(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "sgd", "params": {"lr": 0.1}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
     "zero_optimization": {"stage": 0}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if t is None or t == "auto" or not isinstance(ctx.doc.get(("optimizer",)), dict):
        return
    if not isinstance(t, str):
        yield ctx.report(("optimizer", "type"), f"optimizer type must be a string, got {t!r}")
        return
    if t.lower() in D.REMOVED_OPTIMIZERS or t.lower() in D.DS_OPTIMIZERS or t in D.TORCH_OPTIMIZERS:
        return
    cand = did_you_mean(t, D.TORCH_OPTIMIZERS + ("Adam", "AdamW", "Lamb", "Lion", "Adagrad", "Muon"))
    hint = f"did you mean {cand!r}? " if cand else ""
    yield ctx.report(("optimizer", "type"), f"{t!r} is not a supported DeepSpeed optimizer (DeepSpeed names are "
                     "case-insensitive, torch.optim class names are case-sensitive)",
                     hint + "use one of Adam, AdamW, Adagrad, Lamb, Lion, Muon or a torch.optim class name")


@rule(id="ds-unknown-scheduler", severity="error", family="deepspeed",
      summary="scheduler type that is neither a DeepSpeed nor a torch.optim.lr_scheduler class",
      source="deepspeed/runtime/engine.py::_scheduler_from_config")
def unknown_scheduler(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLinearLR", "params": {"warmup_num_steps": 10}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}}
    ```
    """
    t = ctx.doc.get(("scheduler", "type"))
    if t is None or t == "auto" or not isinstance(ctx.doc.get(("scheduler",)), dict):
        return
    if isinstance(t, str) and (t in D.DS_SCHEDULERS or t in D.TORCH_SCHEDULERS):
        return
    cand = did_you_mean(t, D.DS_SCHEDULERS + D.TORCH_SCHEDULERS)
    yield ctx.report(("scheduler", "type"), f"DeepSpeed does not recognize LR scheduler {t!r} (names are "
                     "case-sensitive)", (f"did you mean {cand!r}? " if cand else "")
                     + "use WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest or a torch scheduler")


@rule(id="ds-scheduler-warmup-type", severity="warning", family="deepspeed",
      summary="warmup_type other than 'log' / 'linear' (the scheduler logs a warning and uses 'log')",
      source="deepspeed/runtime/lr_schedules.py::WarmupLR.__init__ / WarmupCosineLR.__init__")
def scheduler_warmup_type(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "warmup_type": "cosine"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "warmup_type": "linear"}}}
    ```

    Effect: __import__("deepspeed.runtime.lr_schedules", fromlist=["WarmupLR"]).WarmupLR(__import__("torch").optim.SGD([__import__("torch").zeros(1, requires_grad=True)], lr=0.1), **cfg.scheduler_params).warmup_type == "log"
    """
    sch = ctx.doc.get(("scheduler",))
    if not isinstance(sch, dict) or sch.get("type") not in ("WarmupLR", "WarmupDecayLR", "WarmupCosineLR"):
        return
    wt = ctx.doc.get(("scheduler", "params", "warmup_type"))
    if wt is None or wt == "auto" or wt in ("log", "linear"):
        return
    yield ctx.report(("scheduler", "params", "warmup_type"), f"warmup_type {wt!r} is not 'log' or 'linear': "
                     f"{sch['type']} logs a warning and warms up with 'log'", "use \"log\" or \"linear\" "
                     "(lower-case)")


@rule(id="ds-scheduler-params", severity="error", family="deepspeed",
      summary="scheduler params that the scheduler constructor rejects (unknown, missing, non-integer steps)",
      source="deepspeed/runtime/lr_schedules.py::WarmupLR.__init__")
def scheduler_params(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100, "warmup_max_lr": 0.001}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100, "warmup_num_steps": 10}}}
    ```
    """
    t = ctx.doc.get(("scheduler", "type"))
    params = ctx.doc.get(("scheduler", "params"))
    if isinstance(t, str) and (t in D.DS_SCHEDULERS or t in D.TORCH_SCHEDULERS) and params is None:
        yield ctx.report(("scheduler",), f"scheduler {t!r} without \"params\": deepspeed calls the constructor "
                         "with **None (TypeError at initialize)", "add \"params\": {} (or the scheduler's values)")
        return
    if not isinstance(t, str) or t not in D.SCHEDULER_PARAMS or not isinstance(params, dict):
        return
    allowed = D.SCHEDULER_PARAMS[t]
    for k in params:
        if k not in allowed:
            cand = did_you_mean(k, allowed)
            yield ctx.report(("scheduler", "params", k), f"{t} has no parameter {k!r} (TypeError: unexpected "
                             "keyword argument)", f"did you mean {cand!r}?" if cand else
                             f"{t} accepts: {', '.join(allowed)}")
    for k in D.SCHEDULER_REQUIRED.get(t, ()):
        if k not in params:
            yield ctx.report(("scheduler", "params"), f"{t} requires scheduler.params.{k} (TypeError at init)",
                             f"add \"{k}\"")
    if "warmup_num_steps" in params and "warmup_num_steps" in allowed:
        v = params["warmup_num_steps"]
        raw = ctx.doc.scalars.get(("scheduler", "params", "warmup_num_steps"))
        ok = isinstance(v, int) and v > 0  # isinstance(True, int): deepspeed accepts true as 1
        if not ok and ctx.consumer == "deepspeed" and isinstance(v, float) and v > 0 and v == int(v) and raw:
            ok = True  # hjson reads 1e3 / 100.0 as the int 100
        if v == "auto" and ctx.consumer in ("accelerate", "transformers"):
            ok = True
        if not ok:
            yield ctx.report(("scheduler", "params", "warmup_num_steps"),
                             f"warmup_num_steps must be a positive integer, got {v!r} (ValueError)",
                             "write a positive integer literal such as 100")


@rule(id="ds-optimizer-without-type", severity="error", family="deepspeed",
      summary="optimizer block without type (fails at the first step); scheduler without type is ignored",
      source=f"{SRC_CFG}::get_optimizer_name")
def optimizer_without_type(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"params": {"lr": 0.001}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}
    ```
    """
    o = ctx.doc.get(("optimizer",))
    if isinstance(o, dict) and o.get("type") is None:
        yield ctx.report(("optimizer",), "optimizer block without \"type\": deepspeed ignores it and the first "
                         "step() fails unless the code passes an optimizer", "add \"type\": \"AdamW\" (or remove "
                         "the block)")
    s = ctx.doc.get(("scheduler",))
    if isinstance(s, dict) and s.get("type") is None:
        yield ctx.report(("scheduler",), "scheduler block without \"type\" is silently ignored",
                         "add \"type\": \"WarmupLR\" (or remove the block)", severity="warning")


@rule(id="ds-max-grad-norm-in-optimizer", severity="error", family="deepspeed",
      summary="max_grad_norm inside optimizer.params",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def max_grad_norm(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "max_grad_norm": 1.0}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}
    ```
    """
    if ctx.doc.has(("optimizer", "params", "max_grad_norm")) and ctx.doc.has(("optimizer", "type")):
        yield ctx.report(("optimizer", "params", "max_grad_norm"), "'max_grad_norm' is not an optimizer parameter "
                         "(ValueError when deepspeed builds the optimizer)", "remove it and set top-level "
                         "\"gradient_clipping\"")


@rule(id="ds-lamb-needs-dynamic-loss-scale", severity="error", family="deepspeed",
      summary="lamb optimizer with a static fp16 loss scale",
      source=f"{SRC_ENGINE}::_do_sanity_check")
def lamb_dynamic(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "Lamb", "params": {"lr": 0.001}},
     "fp16": {"enabled": false, "loss_scale": 128}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "Lamb", "params": {"lr": 0.001}},
     "fp16": {"enabled": false, "loss_scale": 0}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if not (isinstance(t, str) and t.lower() == "lamb"):
        return
    ls = ctx.doc.get(("fp16", "loss_scale"), 0)
    x = D.as_float(ls) if ls != "auto" else 0
    if x not in (0, None):
        yield ctx.report(("fp16", "loss_scale"), f"the lamb optimizer requires dynamic loss scaling (fp16.loss_scale 0),"
                         f" got {ls!r} (AssertionError at initialize)", "set fp16.loss_scale to 0")


@rule(id="ds-untested-optimizer-zero", severity="error", family="deepspeed",
      summary="optimizer outside ZeRO's tested list without zero_allow_untested_optimizer",
      source=f"{SRC_ENGINE}::_do_optimizer_sanity_check")
def untested_optimizer(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": {"stage": 1}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": {"stage": 1},
     "zero_allow_untested_optimizer": true}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if not isinstance(t, str) or t == "auto":
        return
    if t.lower() in D.REMOVED_OPTIMIZERS:
        return
    if not (t.lower() in D.DS_OPTIMIZERS or t in D.TORCH_OPTIMIZERS):
        return  # ds-unknown-optimizer
    if t.lower() in D.ZERO_TESTED_OPTIMIZERS:
        return
    st = _stage(ctx)
    if not st:
        return
    if D.as_bool(ctx.doc.get(("zero_allow_untested_optimizer",))) is True:
        return
    yield ctx.report(("optimizer", "type"), f"optimizer {t!r} is not in ZeRO's tested list; with ZeRO stage {st} "
                     "deepspeed asserts unless zero_allow_untested_optimizer is true",
                     "add \"zero_allow_untested_optimizer\": true")


@rule(id="ds-torch-scheduler-wrapped-optimizer", severity="error", family="deepspeed",
      summary="torch.optim.lr_scheduler type in the config while ZeRO or fp16/bf16 wraps the optimizer",
      source="deepspeed/runtime/engine.py::_scheduler_from_config")
def torch_scheduler_wrapped(ctx: Context):
    """A torch scheduler named in the config is built on DeepSpeed's wrapped optimizer (ZeRO,
    fp16/bf16 wrappers), which is not a ``torch.optim.Optimizer`` (deepspeedai/DeepSpeed#6992).

    Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "StepLR", "params": {"step_size": 10}}, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}, "zero_optimization": {"stage": 2}}
    ```
    """
    t = ctx.doc.get(("scheduler", "type"))
    if not (isinstance(t, str) and t in D.TORCH_SCHEDULERS and t not in D.DS_SCHEDULERS):
        return
    st = _stage(ctx)
    wrapped = []
    if st:
        wrapped.append(f"ZeRO stage {st}")
    for blk in ("fp16", "bf16"):
        if D.enabled(ctx.doc, blk, ctx.consumer):
            wrapped.append(blk)
    if wrapped:
        yield ctx.report(("scheduler", "type"), f"torch scheduler {t!r} gets DeepSpeed's wrapped optimizer "
                         f"({', '.join(wrapped)}), which is not a torch.optim.Optimizer (TypeError at initialize)",
                         "use a DeepSpeed scheduler (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle) or build "
                         "the torch scheduler in code on the optimizer deepspeed.initialize returns")


@rule(id="ds-optimizer-param-unknown", severity="error", family="deepspeed",
      summary="optimizer.params key that no optimizer class deepspeed may build for the type accepts",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def optimizer_param_unknown(ctx: Context):
    """The params are passed as keyword arguments to the optimizer constructor.

    Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decays": 0.01}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.01}}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    params = ctx.doc.get(("optimizer", "params"))
    if not isinstance(t, str) or not isinstance(params, dict):
        return
    key = t.lower() if t.lower() in D.OPTIMIZER_PARAMS else t
    allowed = D.OPTIMIZER_PARAMS.get(key)
    if allowed is None:
        return
    for k in params:
        if k in allowed or k == "max_grad_norm":
            continue
        cand = did_you_mean(k, allowed)
        yield ctx.report(("optimizer", "params", k), f"optimizer {t!r} does not take {k!r} (TypeError: unexpected "
                         "keyword argument)", f"did you mean {cand!r}?" if cand else
                         f"accepted: {', '.join(allowed)}")


@rule(id="ds-param-value-type", severity="error", family="deepspeed",
      summary="optimizer / scheduler parameter of the wrong type (lr as a string, betas not a pair ...)",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def param_value_type(ctx: Context):
    """The params go unchanged to the optimizer / scheduler constructors.

    Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": 0.9}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.999]}}}
    ```
    """
    for blk in ("optimizer", "scheduler"):
        params = ctx.doc.get((blk, "params"))
        if not isinstance(params, dict):
            continue
        for k, v in params.items():
            if v == "auto":
                continue
            p = (blk, "params", k)
            if v is None:
                if k in _NUM_PARAMS or k == "betas":
                    yield ctx.report(p, f"'{blk}.params.{k}' is null (the constructor gets None and fails)",
                                     "remove the key to use the default, or give a value")
                continue
            if k in _NUM_PARAMS and not isinstance(v, (int, float)):
                yield ctx.report(p, f"'{blk}.params.{k}' must be a number, got {v!r} (TypeError in the "
                                 "constructor)", "write a number without quotes")
            elif k in _INT_PARAMS and (isinstance(v, bool) or not _num(v) or v != int(v)):
                yield ctx.report(p, f"'{blk}.params.{k}' must be an integer, got {v!r}", "write an integer")
            elif k == "betas" and not (isinstance(v, list) and len(v) == 2 and all(_num(x) for x in v)):
                yield ctx.report(p, f"'{blk}.params.betas' must be a pair of numbers, got {v!r}",
                                 "e.g. [0.9, 0.999]")
