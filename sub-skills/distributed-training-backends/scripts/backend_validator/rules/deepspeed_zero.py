"""DeepSpeed JSON rules: ZeRO stages and offload - offload ignored below its stage, the legacy
true/false block (family ``deepspeed``, deepspeed 0.19.8; the docstring convention is in _ds.py). NVMe
paths, partial offload, gradient-norm, legacy_stage1 and overlap settings are in deepspeed_zero_options.py,
compiled only for a JSON that names one of them.
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule
from ._ds import SRC_ZERO, _stage


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
