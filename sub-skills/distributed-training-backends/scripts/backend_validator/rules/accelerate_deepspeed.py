"""Accelerate ``deepspeed_config`` block rules (distributed_type DEEPSPEED, accelerate 1.15.0).

These look only at the Accelerate file; the rules about an inline block's settings are in
accelerate_deepspeed_inline.py. The DeepSpeed JSON that
``deepspeed_config_file`` names is checked by the deepspeed/cross rule families; the multi-node hostfile
and launcher rules are in accelerate_multinode.py (compiled only when num_machines > 1).
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import fmt, report_unknown
from ._acc_ds import DS_PLUGIN as PLUGIN, ds_eff as _ds, has_ds_file as _has_file

# Imported only for a document that mentions DeepSpeed: distributed_type DEEPSPEED or a deepspeed_config block
# (rules/__init__.py): every rule here reports nothing on any other document. The rules about the
# settings an inline block gives (without deepspeed_config_file) are in accelerate_deepspeed_inline.py.
NEEDS = ("deepspeed",)


@rule(id="acc-ds-unknown-key", severity="warning", family="accelerate",
      summary="unknown key in deepspeed_config (silently ignored)",
      source="accelerate/commands/launch.py::_validate_launch_command")
def ds_unknown(ctx):
    """``deepspeed_config`` keys are copied verbatim onto the launch arguments; unknown ones
    (``deepspeed_zero_stage``, ``offload_optimizer``) are never read.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_zero_stage: 3
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
    ```
    """
    b = ctx.doc.data.get("deepspeed_config")
    if isinstance(b, dict):
        report_unknown(ctx, "deepspeed_config", [k for k in b if k not in S.DEEPSPEED_KEYS], S.DEEPSPEED_KEYS,
                       "ignored by accelerate launch", strip=("deepspeed_",))
    return ()


@rule(id="acc-ds-config-file-conflict", severity="error", family="accelerate",
      summary="deepspeed_config_file together with keys the JSON must own (incl. top-level mixed_precision)",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin._deepspeed_config_checks")
def ds_file_conflict(ctx):
    """With ``deepspeed_config_file`` the plugin refuses the accelerate-side copies of
    gradient_accumulation_steps, gradient_clipping, zero_stage, offload devices / NVMe paths,
    zero3_save_16bit_model - and a top-level ``mixed_precision`` of any value, even ``'no'``.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    mixed_precision: bf16
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: ds_config.json
      zero3_init_flag: true
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: ds_config.json
      zero3_init_flag: true
    ```
    """
    e = _ds(ctx)
    if not e or not _has_file(e):
        return ()
    b = ctx.doc.data.get("deepspeed_config")
    # the file path may come from another block (accelerate copies every nested key onto the launch args)
    for k in (b if isinstance(b, dict) else {}):
        if str(k).lower() in S.DS_FILE_EXCLUSIVE:
            ctx.report(("deepspeed_config", k), f"{k} is set next to deepspeed_config_file; DeepSpeedPlugin refuses "
                       "the combination", f"move {k} into the DeepSpeed JSON and delete it here")
    d = ctx.doc.data
    if d.get("mixed_precision") is not None or ("mixed_precision" not in d and d.get("fp16")):
        path = ("mixed_precision",) if "mixed_precision" in d else ("fp16",)
        ctx.report(path, "mixed_precision in the accelerate config next to deepspeed_config_file (any value, even "
                   "'no'): DeepSpeedPlugin refuses the combination",
                   "delete mixed_precision here; set fp16/bf16 'enabled' in the JSON (or pass --mixed_precision)")
    return ()


@rule(id="acc-ds-config-file-not-path", severity="error", family="accelerate",
      summary="deepspeed_config.deepspeed_config_file is a number, boolean, list or mapping instead of a path",
      source="accelerate/utils/deepspeed.py::HfDeepSpeedConfig.__init__")
def ds_config_file_not_path(ctx):
    """The launcher exports ``str(value)``; ``HfDeepSpeedConfig`` finds no such file, then reads the
    text as JSON or base64: ``12`` becomes an int (``.get`` fails), ``{}`` an empty config (no ZeRO
    section), ``true`` or a mapping's Python repr nothing at all. The DeepSpeed settings belong in a
    JSON file whose path goes here.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: {zero_optimization: {stage: 2}}
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```
    """
    e = _ds(ctx)
    if not e or not e.has("deepspeed_config_file"):
        return ()
    v = e.get("deepspeed_config_file")
    if v is not None and not isinstance(v, str):
        ctx.report(e.path("deepspeed_config_file"), f"deepspeed_config_file is {fmt(v)} ({type(v).__name__}), "
                   "not a path: DeepSpeedPlugin cannot build a config from it",
                   "write the DeepSpeed settings to a JSON file and give its path (quoted if it looks like a number)")
    return ()


@rule(id="acc-ds-bool-value", severity="error", family="accelerate",
      summary="deepspeed_config.zero3_init_flag is not a truth word", source=PLUGIN)
def ds_bool(ctx):
    """``zero3_init_flag`` is parsed with ``str_to_bool``.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
      zero3_init_flag: enabled
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
    if e and e.has("zero3_init_flag") and e.get("zero3_init_flag") is not None \
            and not S.is_truth_word(e.get("zero3_init_flag")):
        ctx.report(e.path("zero3_init_flag"), f"zero3_init_flag {fmt(e.get('zero3_init_flag'))} is not a truth "
                   "word; DeepSpeedPlugin fails parsing it", "use true or false")
    return ()
