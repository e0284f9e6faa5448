"""DeepSpeed JSON rules: dtype options - dynamic loss-scale bounds, master weights, data_types
param/grad-accumulation dtypes, torch_autocast (family ``deepspeed``, deepspeed 0.19.8; the docstring
convention is in _ds.py). Split from deepspeed_precision.py so that a JSON without these keys does not
compile them (rules/__init__.py, NEEDS).
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule
from ._ds import SRC_CFG, SRC_ENGINE, _stage

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Optional

# Every rule here reports only when one of these keys is in the JSON (loss_scale_window/min_loss_scale,
# *_master_weights_and_grads, bf16_optimizer_states, data_types, torch_autocast): rules/__init__.py
# does not compile the module for any other document.
NEEDS = ("loss_scale", "master_weights", "bf16_optimizer_states", "data_types", "torch_autocast")


@rule(id="ds-dynamic-loss-scale-bounds", severity="error", family="deepspeed",
      summary="fp16 dynamic loss scaling with loss_scale_window or min_loss_scale <= 0",
      source="deepspeed/runtime/precision_config.py::DeepSpeedFP16Config._validate_dynamic_loss_scale_params")
def dynamic_loss_scale_bounds(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0, "min_loss_scale": 0}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0, "min_loss_scale": 1}}
    ```
    """
    if not D.enabled(ctx.doc, "fp16", ctx.consumer):
        return
    fp = ctx.doc.get(("fp16",), {})
    ls = D.as_float(fp.get("loss_scale", 0))
    if ls != 0:
        return
    for k in ("loss_scale_window", "min_loss_scale"):
        v = fp.get(k)
        if v is None or v == "auto":
            continue
        x = D.as_float(v)
        if x is not None and x <= 0:
            yield ctx.report(("fp16", k), f"'fp16.{k}' must be > 0 with dynamic loss scaling (loss_scale 0), got {v!r}",
                             "use a positive integer (min_loss_scale 1 is the default)")


@rule(id="ds-master-weights-need-zero", severity="error", family="deepspeed",
      summary="fp16/bf16 master-weight or optimizer-state options without ZeRO 1-3",
      source=f"{SRC_CFG}::DeepSpeedConfig._do_error_check")
def master_weights(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true},
     "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```
    """
    st = _stage(ctx)
    for blk, key in (("fp16", "fp16_master_weights_and_grads"), ("bf16", "bf16_master_weights_and_grads"),
                     ("bf16", "bf16_optimizer_states")):
        v = ctx.doc.get((blk, key))
        if D.as_bool(v) is not True:
            continue
        if st == 0:
            yield ctx.report((blk, key), f"'{blk}.{key}' requires ZeRO stage 1, 2 or 3 (AssertionError)",
                             "set zero_optimization.stage to 1-3 or remove the option")
        if key == "bf16_optimizer_states" and D.as_bool(ctx.doc.get(("bf16", "bf16_master_weights_and_grads"))) \
                is not True:
            yield ctx.report((blk, key), "'bf16.bf16_optimizer_states' requires bf16_master_weights_and_grads",
                             "add \"bf16_master_weights_and_grads\": true")


@rule(id="ds-param-dtype-mismatch", severity="error", family="deepspeed",
      summary="data_types.param_dtype does not match the fp16/bf16 mode",
      source=f"{SRC_ENGINE}::_assert_valid_mixed_precision_config")
def param_dtype(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true}, "data_types": {"param_dtype": "fp32"}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true}, "data_types": {"param_dtype": "bf16"}}
    ```
    """
    v = ctx.doc.get(("data_types", "param_dtype"))
    if v is None:
        return
    c = D.dtype_canonical(v)
    if c is None:
        yield ctx.report(("data_types", "param_dtype"), f"'data_types.param_dtype' {v!r} is not a valid DtypeEnum",
                         "use fp32, fp16 or bf16")
        return
    fp16, bf16 = D.enabled(ctx.doc, "fp16", ctx.consumer), D.enabled(ctx.doc, "bf16", ctx.consumer)
    if fp16 is None or bf16 is None:
        return
    mode = "fp16" if fp16 else ("bf16" if bf16 else "fp32")
    if c != mode:
        yield ctx.report(("data_types", "param_dtype"), f"data_types.param_dtype {v!r} conflicts with the precision "
                         f"mode ({mode}) (AssertionError at initialize)", f"set it to {mode!r} or remove it")


def _model_dtype(ctx: Context) -> Optional[str]:
    fp16, bf16 = D.enabled(ctx.doc, "fp16", ctx.consumer), D.enabled(ctx.doc, "bf16", ctx.consumer)
    if fp16 is None or bf16 is None:
        return None
    return "fp16" if fp16 else ("bf16" if bf16 else "fp32")


@rule(id="ds-grad-accum-dtype-without-zero", severity="error", family="deepspeed",
      summary="data_types.grad_accum_dtype differs from the model dtype without ZeRO",
      source=f"{SRC_ENGINE}::_do_optimizer_sanity_check")
def grad_accum_dtype(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}, "zero_optimization": {"stage": 1}}
    ```
    """
    v = ctx.doc.get(("data_types", "grad_accum_dtype"))
    c = D.dtype_canonical(v) if v is not None else None
    if c is None or _stage(ctx) != 0:
        return
    m = _model_dtype(ctx)
    if m is not None and c != m:
        yield ctx.report(("data_types", "grad_accum_dtype"), f"grad_accum_dtype {v!r} differs from the model dtype "
                         f"{m} and ZeRO is off (NotImplementedError: unsupported mix at initialize)",
                         f"use ZeRO stage 1-3, or set grad_accum_dtype to {m!r} / remove it")


@rule(id="ds-compute-grad-norm-bf16-stage1", severity="error", family="deepspeed",
      summary="compute_grad_norm false at ZeRO-1 with bf16 parameters and fp32 gradient accumulation",
      source=f"{SRC_ENGINE}::_do_optimizer_sanity_check")
def compute_grad_norm_bf16(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "gradient_clipping": 0, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"},
     "zero_optimization": {"stage": 1, "compute_grad_norm": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "gradient_clipping": 0, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "zero_optimization": {"stage": 1, "compute_grad_norm": false}}
    ```
    """
    if D.as_bool(ctx.doc.get(("zero_optimization", "compute_grad_norm"))) is not False or _stage(ctx) != 1:
        return
    if _model_dtype(ctx) != "bf16" or D.dtype_canonical(ctx.doc.get(("data_types", "grad_accum_dtype"))) != "fp32":
        return
    if D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer) == "cpu":
        return
    yield ctx.report(("zero_optimization", "compute_grad_norm"), "compute_grad_norm false is not supported at ZeRO "
                     "stage 1 with bf16 parameters and fp32 gradient accumulation (ValueError)",
                     "remove compute_grad_norm false, or use stage 2")


@rule(id="ds-autocast-quantized-weights", severity="error", family="deepspeed",
      summary="torch_autocast enabled together with zero_quantized_weights",
      source="deepspeed/runtime/torch_autocast.py::_validate_auto_cast_settings")
def autocast_quantized(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "torch_autocast": {"enabled": true}, "zero_optimization": {"stage": 3, "zero_quantized_weights": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "torch_autocast": {"enabled": true}, "zero_optimization": {"stage": 3}}
    ```
    """
    if D.as_bool(ctx.doc.get(("torch_autocast", "enabled"))) and \
            D.as_bool(ctx.doc.get(("zero_optimization", "zero_quantized_weights"))):
        yield ctx.report(("zero_optimization", "zero_quantized_weights"), "torch_autocast cannot be combined with "
                         "zero_quantized_weights (AssertionError at initialize)", "disable one of them")
