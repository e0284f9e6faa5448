"""DeepSpeed JSON rules: ZeRO stages and offload - offload ignored below its stage, NVMe paths,
legacy stage spellings, gradient-norm and overlap settings (family ``deepspeed``, deepspeed 0.19.8; the
docstring convention is in _ds.py).
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule
from ._ds import SRC_ENGINE, SRC_ZERO, _stage


def _stage3_aliases():
    """The stage3_* aliases of the ZeRO block (the DeepSpeed tables, compiled only for a config that
    has a stage3_ key)."""
    from ..deepspeed import ZERO
    return {f.alias for f in ZERO.values() if f.alias}


@rule(id="ds-offload-ignored", severity="warning", family="deepspeed",
      summary="offload_param / nvme offload / stage3_* options at a ZeRO stage that ignores them; "
              "offload_optimizer at stage 0 (error: not ignored, it fails)",
      source=SRC_ZERO)
def offload_ignored(ctx: Context):
    """Options the configured ZeRO stage does not use as written. ``offload_param`` below stage 3
    and the ``stage3_*`` aliases are ignored; NVMe optimizer offload at stages 1-2 runs as CPU
    offload. ``offload_optimizer`` (cpu or nvme) at stage 0 is NOT ignored: the engine picks its
    CPU-optimizer path from the device alone (``engine.py::DeepSpeedEngine.zero_use_cpu_optimizer``),
    but stage 0 never moves parameters or master weights to the CPU. So a torch optimizer from the
    script is refused by ``deepspeed.initialize`` (``ZeRORuntimeException``; Accelerate first swaps
    torch Adam/AdamW for ``DeepSpeedCPUAdam``), and a DeepSpeed CPU optimizer (the ``optimizer``
    block's Adam/AdamW/Adagrad/Lion) asserts at its first step that the parameters are on ``cpu``
    (``ops/adam/cpu_adam.py::DeepSpeedCPUAdam.step``), which on a GPU they are not. This is an error;
    only with ``zero_force_ds_cpu_optimizer: false`` and no ``optimizer`` block does the script's
    optimizer run on the device, the offload unused (a warning).

    Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
    ```

    Effect: cfg.zero_optimization_stage == 2 and cfg.zero_config.offload_param.device == "cpu"
    """
    st = _stage(ctx)
    if st is None or st == 3:
        return
    z = ctx.doc.get(("zero_optimization",))
    if not isinstance(z, dict):
        return
    if D.offload_device(ctx.doc, "offload_param", ctx.consumer) in ("cpu", "nvme"):
        p = ("zero_optimization", "offload_param") if "offload_param" in z else ("zero_optimization", "cpu_offload_param")
        yield ctx.report(p, f"offload_param is only used by ZeRO stage 3; at stage {st} it is silently ignored",
                         "set stage 3 or remove offload_param")
    dev = D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer)
    if st in (1, 2) and dev == "nvme":
        yield ctx.report(("zero_optimization", "offload_optimizer", "device"), f"NVMe optimizer offload needs ZeRO "
                         f"stage 3; at stage {st} it is treated as CPU offload", "use device cpu or stage 3")
    if st == 0 and dev in ("cpu", "nvme"):
        p = ("zero_optimization", "offload_optimizer", "device") if isinstance(z.get("offload_optimizer"), dict) \
            else ("zero_optimization", "offload_optimizer")
        if ctx.doc.get(("zero_force_ds_cpu_optimizer",), True) is False and "optimizer" not in ctx.doc.data:
            yield ctx.report(p, "offload_optimizer at ZeRO stage 0 is unused: with zero_force_ds_cpu_optimizer "
                             "false the script's optimizer runs where the parameters are",
                             "set stage 1-3 to offload, or remove offload_optimizer")
        else:
            yield ctx.report(p, f"offload_optimizer ({dev}) at ZeRO stage 0 is not ignored, it fails: DeepSpeed "
                             "takes its CPU-optimizer path but stage 0 keeps the parameters on the device, so a "
                             "torch optimizer from the script is refused at deepspeed.initialize "
                             "(ZeRORuntimeException) and DeepSpeed's CPU optimizer asserts at the first step that "
                             "the parameters are on 'cpu'", "set stage 1-3 to offload the optimizer, or remove "
                             "offload_optimizer", severity="error")
    for k in z:
        if isinstance(k, str) and k.startswith("stage3_") and k in _stage3_aliases() and z[k] != "auto":
            yield ctx.report(("zero_optimization", k), f"'{k}' only applies to ZeRO stage 3 (stage is {st})",
                             "remove it or set stage 3", severity="info")


@rule(id="ds-nvme-path-missing", severity="error", family="deepspeed",
      summary="NVMe offload without nvme_path",
      source="deepspeed/runtime/zero/stage3.py::DeepSpeedZeroOptimizer_Stage3._configure_tensor_swapping")
def nvme_path_missing(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3,
     "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}}
    ```
    """
    st = _stage(ctx)
    for which in ("offload_param", "offload_optimizer"):
        if D.offload_device(ctx.doc, which, ctx.consumer) != "nvme":
            continue
        blk = ctx.doc.get(("zero_optimization", which), {})
        p = blk.get("nvme_path") if isinstance(blk, dict) else None
        if p is None or (p == "auto" and ctx.consumer == "deepspeed"):
            if st == 3 or st is None or which == "offload_param":
                yield ctx.report(("zero_optimization", which, "device"), f"{which}.device is nvme but nvme_path is "
                                 "not set (TypeError / AssertionError when ZeRO-3 sets up swapping)",
                                 "add \"nvme_path\": \"/path/to/local/nvme\"")
        elif p == "auto" and ctx.consumer in ("accelerate", "transformers"):
            yield ctx.report(("zero_optimization", which, "nvme_path"), "nvme_path \"auto\" is filled by Accelerate "
                             "with offload_*_nvme_path, default the string \"none\" (a relative directory)",
                             "write the NVMe mount path", severity="warning")


@rule(id="ds-partial-offload-stage", severity="error", family="deepspeed",
      summary="offload_optimizer.ratio < 1 (partial offload) below ZeRO stage 3",
      source="deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig.offload_ratio_check")
def partial_offload(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2,
     "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3,
     "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```
    """
    r = ctx.doc.get(("zero_optimization", "offload_optimizer", "ratio"))
    x = D.as_float(r) if r != "auto" else None
    st = _stage(ctx)
    if x is not None and x < 1 and st is not None and st != 3:
        yield ctx.report(("zero_optimization", "offload_optimizer", "ratio"), f"partial offload (ratio {r}) is only "
                         f"supported with ZeRO stage 3 (stage is {st}; ValidationError)",
                         "set stage 3 or ratio 1.0")


@rule(id="ds-compute-grad-norm", severity="error", family="deepspeed",
      summary="compute_grad_norm false outside ZeRO 1/2, or with gradient clipping / optimizer offload",
      source="deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.__init__")
def compute_grad_norm(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 2, "compute_grad_norm": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_clipping": 0, "optimizer": {"type": "AdamW",
     "params": {"lr": 0.001, "torch_adam": true}}, "zero_optimization": {"stage": 2, "compute_grad_norm": false}}
    ```
    """
    v = ctx.doc.get(("zero_optimization", "compute_grad_norm"))
    if D.as_bool(v) is not False:
        return
    p = ("zero_optimization", "compute_grad_norm")
    st = _stage(ctx)
    if st is None:
        return
    if st not in (1, 2):
        yield ctx.report(p, f"compute_grad_norm false is only supported with ZeRO stage 1 or 2 (stage {st}; "
                         "ValidationError)", "remove it or use stage 1/2")
        return
    gc = ctx.doc.get(("gradient_clipping",), 1.0)
    if gc != "auto" and (D.as_float(gc) or 0) > 0:
        yield ctx.report(p, f"compute_grad_norm false requires gradient_clipping 0 (it is {gc!r}; the default is "
                         "1.0) (ValueError)", "add \"gradient_clipping\": 0")
    if D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer) in ("cpu", "nvme"):
        yield ctx.report(p, "compute_grad_norm false does not support optimizer offload (ValueError)",
                         "remove offload_optimizer or compute_grad_norm")
    if isinstance(ctx.doc.get(("zero_optimization", "zenflow")), dict):
        yield ctx.report(p, "compute_grad_norm false does not support ZenFlow (ValueError)", "remove one of them")


@rule(id="ds-legacy-stage1", severity="error", family="deepspeed",
      summary="zero_optimization.legacy_stage1 true (removed)",
      source=f"{SRC_ENGINE}::_configure_zero_optimizer")
def legacy_stage1(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 1, "legacy_stage1": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 1}}
    ```
    """
    if D.as_bool(ctx.doc.get(("zero_optimization", "legacy_stage1"))) is True:
        yield ctx.report(("zero_optimization", "legacy_stage1"), "legacy_stage1 is not supported in deepspeed >= "
                         "0.5.9 (Exception at initialize)", "remove it")


@rule(id="ds-zero-legacy-bool", severity="warning", family="deepspeed",
      summary="zero_optimization given as true/false (legacy format)",
      source="deepspeed/runtime/zero/config.py::get_zero_config")
def zero_legacy_bool(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": true}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 1}}
    ```

    Effect: cfg.zero_optimization_stage == 1
    """
    v = ctx.doc.get(("zero_optimization",))
    if isinstance(v, bool):
        if ctx.consumer in ("accelerate", "transformers"):
            yield ctx.report(("zero_optimization",), f"\"zero_optimization\": {str(v).lower()} (legacy format) "
                             "fails in Accelerate's DeepSpeedPlugin, which reads it as a mapping (AttributeError)",
                             f"write {{\"stage\": {1 if v else 0}}}", severity="error")
        else:
            yield ctx.report(("zero_optimization",), f"\"zero_optimization\": {str(v).lower()} is the legacy "
                             f"format (means stage {1 if v else 0})", f"write {{\"stage\": {1 if v else 0}}}")


@rule(id="ds-unmanaged-grad-acc-overlap", severity="error", family="deepspeed",
      summary="managed_gradient_accumulation false with overlap_comm below ZeRO stage 2 (or with DeepCompile)",
      source=f"{SRC_ENGINE}::_do_sanity_check")
def unmanaged_grad_acc(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "managed_gradient_accumulation": false, "zero_optimization": {"stage": 1, "overlap_comm": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "managed_gradient_accumulation": false, "zero_optimization": {"stage": 2, "overlap_comm": true}}
    ```
    """
    if D.as_bool(ctx.doc.get(("managed_gradient_accumulation",))) is not False:
        return
    st = _stage(ctx)
    oc = ctx.doc.get(("zero_optimization", "overlap_comm"))
    overlap = (st == 3) if oc is None or oc == "auto" else D.as_bool(oc)
    if st is not None and st < 2 and overlap:
        yield ctx.report(("managed_gradient_accumulation",), "managed_gradient_accumulation false supports "
                         f"overlap_comm only with ZeRO stage 2 or 3 (stage {st}; AssertionError)",
                         "remove overlap_comm or use stage 2")
    if D.as_bool(ctx.doc.get(("compile", "deepcompile"))):
        yield ctx.report(("managed_gradient_accumulation",), "managed_gradient_accumulation false is not "
                         "supported with DeepCompile (AssertionError)", "remove one of them")
