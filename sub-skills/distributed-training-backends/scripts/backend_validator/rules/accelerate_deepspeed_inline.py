"""Accelerate ``deepspeed_config`` rules about the settings of an inline block (no ``deepspeed_config_file``):
zero stage, offload devices, gradient accumulation and clipping, 16-bit save, zero3 init, NVMe paths,
and offload the chosen stage ignores (distributed_type DEEPSPEED, accelerate 1.15.0).

With ``deepspeed_config_file`` the JSON owns these settings (acc-ds-config-file-conflict in
accelerate_deepspeed.py reports the keys given beside it), and every rule here returns at once, so
rules/__init__.py does not import this module for such a document (SILENT_WHEN below), nor for one
DeepSpeed does not launch.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import fmt
from ._acc_ds import DS_ENV as ENV, DS_PLUGIN as PLUGIN, ds_eff as _ds, has_ds_file as _has_file

NEEDS = ("deepspeed",)
SILENT_WHEN = "_acc_ds.ds_config_file_given"


@rule(id="acc-ds-zero-stage-invalid", severity="error", family="accelerate",
      summary="deepspeed_config.zero_stage is not 0, 1, 2 or 3", source=PLUGIN)
def zero_stage(ctx):
    """The plugin reads the stage with ``int()`` and DeepSpeed accepts stages 0-3 only.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 4
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
    ```
    """
    e = _ds(ctx)
    if not e or _has_file(e) or not e.has("zero_stage") or e.get("zero_stage") is None:
        return ()
    v = e.get("zero_stage")
    n = S.as_int(v)
    if n is None or n not in (0, 1, 2, 3):
        ctx.report(e.path("zero_stage"), f"zero_stage {fmt(v)} is not 0, 1, 2 or 3",
                   "use 0-3 (3 shards parameters, 2 gradients+optimizer states)")
    return ()


@rule(id="acc-ds-offload-device-invalid", severity="error", family="accelerate",
      summary="offload_optimizer_device / offload_param_device is not none, cpu or nvme",
      source="deepspeed/runtime/zero/offload_config.py::OffloadDeviceEnum")
def offload_device(ctx):
    """accelerate passes the (lower-cased) device into the ZeRO config unchecked; DeepSpeed's
    config model accepts only none, cpu, nvme.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      offload_param_device: gpu
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      offload_param_device: cpu
    ```
    """
    e = _ds(ctx)
    if not e or _has_file(e):
        return ()
    for k in ("offload_optimizer_device", "offload_param_device"):
        if isinstance(e.get(k), str) and e.get(k).lower() == "auto":
            continue  # the launcher lower()s it; prepare() cannot fill it (acc-ds-offload-auto)
        if e.has(k) and e.get(k) is not None and str(e.get(k)).lower() not in S.DS_OFFLOAD_DEVICES:
            ctx.report(e.path(k), f"{k} {fmt(e.get(k))} is not none, cpu or nvme; DeepSpeed refuses the ZeRO config",
                       "use cpu (or nvme with an NVMe path in a DeepSpeed JSON)")
    return ()


@rule(id="acc-ds-offload-auto", severity="error", family="accelerate",
      summary="offload_optimizer_device / offload_param_device 'auto': nothing fills it, prepare() raises",
      source="accelerate/accelerator.py::Accelerator._prepare_deepspeed")
def offload_auto(ctx):
    """The plugin copies the device into ``zero_optimization.offload_*.device``. ``accelerator.prepare``
    then fills every ``"auto"`` leaf of the DeepSpeed config from the objects it was given, and it
    has no value for an offload device: ``deepspeed_config_process`` raises ValueError
    (``... not found in kwargs``) before DeepSpeed sees the config.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      offload_optimizer_device: auto
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      offload_optimizer_device: cpu
    ```
    """
    e = _ds(ctx)
    if not e or _has_file(e):
        return ()
    for k in ("offload_optimizer_device", "offload_param_device"):
        if isinstance(e.get(k), str) and e.get(k).lower() == "auto":
            ctx.report(e.path(k), f"{k} {fmt(e.get(k))} is never resolved: accelerator.prepare() fills \"auto\" values "
                       "of the DeepSpeed config and has none for an offload device, so it raises ValueError",
                       "write cpu, nvme or none explicitly")
    return ()


@rule(id="acc-ds-gradient-accumulation-invalid", severity="error", family="accelerate",
      summary="deepspeed_config.gradient_accumulation_steps is not an integer (e.g. auto)",
      source="accelerate/accelerator.py::Accelerator.__init__")
def gas_invalid(ctx):
    """``Accelerator()`` reads ``ACCELERATE_GRADIENT_ACCUMULATION_STEPS`` with ``int()``, so
    ``auto`` (valid only inside a DeepSpeed JSON) or ``2.0`` stops the script.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
      gradient_accumulation_steps: auto
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
      gradient_accumulation_steps: 4
    ```
    """
    e = _ds(ctx)
    if not e or _has_file(e) or not e.has("gradient_accumulation_steps"):
        return ()
    v = e.get("gradient_accumulation_steps")
    if v is not None and (S.as_int(v) is None):
        ctx.report(e.path("gradient_accumulation_steps"), f"gradient_accumulation_steps {fmt(v)} is not an "
                   "integer: Accelerator() fails reading it", "write an integer (auto only works inside a "
                   "DeepSpeed JSON)")
    return ()


@rule(id="acc-ds-gradient-clipping-invalid", severity="error", family="accelerate",
      summary="deepspeed_config.gradient_clipping is not a number", source=PLUGIN)
def clipping_invalid(ctx):
    """The plugin converts the exported value with ``float()`` unless it is ``auto``.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
      gradient_clipping: none
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
      gradient_clipping: 1.0
    ```
    """
    e = _ds(ctx)
    if not e or _has_file(e) or not e.has("gradient_clipping") or e.get("gradient_clipping") is None:
        return ()
    v = str(e.get("gradient_clipping")).lower()
    if v != "auto":
        try:
            float(v)
        except ValueError:
            ctx.report(e.path("gradient_clipping"), f"gradient_clipping {fmt(e.get('gradient_clipping'))} is not "
                       "a number; DeepSpeedPlugin fails converting it", "write a number such as 1.0, or remove it")
    return ()


@rule(id="acc-ds-zero3-save-not-true", severity="warning", family="accelerate",
      summary="zero3_save_16bit_model enabled with a word other than true (read as false)", source=PLUGIN)
def zero3_save(ctx):
    """Only the exact word ``true`` (any case) turns ``zero3_save_16bit_model`` on; ``yes``,
    ``on`` or ``1`` silently mean false.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      zero3_save_16bit_model: 'yes'
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      zero3_save_16bit_model: true
    ```
    """
    e = _ds(ctx)
    if e and not _has_file(e) and e.has("zero3_save_16bit_model"):
        v = e.get("zero3_save_16bit_model")
        if S.truth(v) is True and str(v).lower() != "true":
            ctx.report(e.path("zero3_save_16bit_model"), f"zero3_save_16bit_model {fmt(v)} is read as false (only "
                       "'true' enables it)", "write zero3_save_16bit_model: true")
    return ()


@rule(id="acc-ds-zero3-init-not-stage3", severity="warning", family="accelerate",
      summary="zero3_init_flag: true with a ZeRO stage other than 3 (turned off)", source=PLUGIN)
def zero3_init(ctx):
    """The plugin switches ``zero3_init_flag`` off (with a Python warning) unless the stage is 3;
    without ``zero_stage`` the stage is 2.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
      zero3_init_flag: true
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      zero3_init_flag: true
    ```
    """
    e = _ds(ctx)
    if not e or _has_file(e) or S.truth(e.get("zero3_init_flag")) is not True:
        return ()
    stage = S.as_int(e.get("zero_stage", 2)) if e.get("zero_stage") is not None else 2
    if stage is not None and stage != 3:
        ctx.report(e.path("zero3_init_flag"), f"zero3_init_flag is true but zero_stage is {stage}: the plugin "
                   "turns it off", "remove zero3_init_flag or use zero_stage: 3")
    return ()


@rule(id="acc-ds-nvme-path-dropped", severity="warning", family="accelerate",
      summary="NVMe offload from deepspeed_config: the nvme path is never exported (DeepSpeed gets 'none')",
      source=ENV)
def nvme_dropped(ctx):
    """The launcher exports no ``ACCELERATE_DEEPSPEED_OFFLOAD_*_NVME_PATH``, so the path in the
    accelerate config never reaches the plugin.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      offload_param_device: nvme
      offload_param_nvme_path: /local_nvme
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      offload_param_device: cpu
    ```
    """
    e = _ds(ctx)
    if not e or _has_file(e):
        return ()
    for what in ("optimizer", "param"):
        k = f"offload_{what}_nvme_path"
        dev = f"offload_{what}_device"
        if e.has(k) and e.get(k) not in (None, "none"):
            ctx.report(e.path(k), f"{k} is never passed on by accelerate launch; DeepSpeed gets nvme_path 'none'",
                       "put the NVMe offload settings in a DeepSpeed JSON (deepspeed_config_file)")
        elif str(e.get(dev)).lower() == "nvme":
            ctx.report(e.path(dev), f"{dev}: nvme without a DeepSpeed JSON: accelerate hands DeepSpeed the NVMe "
                       "path 'none' (the launcher exports no NVMe path)",
                       "configure NVMe offload in a DeepSpeed JSON (deepspeed_config_file) with nvme_path")
    return ()


# config key the plugin writes -> the deepspeed_config key of the Accelerate YAML it comes from
# (only the two cases whose effect the tests observe: offload_param below stage 3, NVMe optimizer
# offload at stage 1-2)
_YAML_KEY = {("zero_optimization", "offload_param"): "offload_param_device",
             ("zero_optimization", "offload_optimizer", "device"): "offload_optimizer_device"}


@rule(id="acc-ds-offload-ignored-by-stage", severity="warning", family="accelerate",
      summary="inline offload device the chosen zero_stage does not use as written (offload_param below stage 3; "
              "offload_optimizer at stage 0 is an error)",
      source="deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig")
def inline_offload_ignored(ctx: Context):
    """Without ``deepspeed_config_file`` the plugin writes ``offload_param_device`` and
    ``offload_optimizer_device`` into the ZeRO block it builds, whatever ``zero_stage`` is; DeepSpeed
    reads offload_param only at stage 3, runs NVMe optimizer offload as CPU offload at stages 1-2, and
    fails with optimizer offload at stage 0 (reported at error severity; see ds-offload-ignored)
    (the check of ds-offload-ignored, run on the config the plugin builds:
    consumer_model.accelerate_config).

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
      offload_param_device: cpu
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      offload_param_device: cpu
    ```
    """
    from ..core import REGISTRY, Context, Doc
    from .accelerate_schema import Effective
    e = Effective(ctx.doc)
    block = ctx.doc.get(("deepspeed_config",))
    if e.launcher != "deepspeed" or not isinstance(block, dict) or block.get("deepspeed_config_file") not in (None, "none"):
        return
    if all(block.get(k) in (None, "none") for k in _YAML_KEY.values()):
        # findings are reported on these keys only, and only for an offload device (cpu or nvme):
        # no need to build the plugin's config
        return
    st = block.get("zero_stage")
    if (type(st) is int and st == 3) or st == "3":
        # the plugin's ZeRO block gets stage int(str(zero_stage)) == 3, where ds-offload-ignored reports
        # nothing: no need to compile consumer_model and the DeepSpeed ZeRO rules (start time)
        return
    from .. import consumer_model as M
    try:
        cfg, _mp = M.accelerate_config({"deepspeed_config": block}, None)
    except M.Refused:
        return  # the plugin refuses: other acc-ds-* rules say why
    from . import load_rule
    load_rule("ds-offload-ignored")
    sub = Context(doc=Doc(cfg, kind="json", name=ctx.doc.name), options=ctx.options, consumer="accelerate")
    sub._rule = REGISTRY["ds-offload-ignored"]
    for _ in sub._rule.func(sub) or ():
        pass
    for f in sub.findings:
        key = _YAML_KEY.get(tuple(f.path))
        if key and key in block:
            yield ctx.report(("deepspeed_config", key), f"{key} {block[key]!r} goes into the ZeRO block the plugin "
                             f"builds, and {f.message}", f.hint.replace("remove offload_param", f"remove {key}")
                             .replace("remove offload_optimizer", f"remove {key}"),
                             severity="error" if f.severity == "error" else None)
