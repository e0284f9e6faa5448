"""DeepSpeed JSON rules: legacy keys - removed and deprecated keys, a field given together with its
alias, curriculum learning without metrics (family ``deepspeed``, deepspeed 0.19.8; the docstring
convention is in _ds.py). Split from deepspeed_keys.py so that a JSON with none of those keys does not
compile them (rules/__init__.py, SILENT_WHEN).
"""
from __future__ import annotations

from .. import deepspeed as D
from ..core import Context, rule
from ._ds import SRC_CFG, SRC_ZERO
from .deepspeed_keys import _blocks

# Each rule returns at once unless the JSON has a removed key, a deprecated zero_optimization key, a
# field alias in a strict block or a curriculum_learning block: rules/__init__.py does not compile the
# module for a JSON where _ds.no_legacy_keys is true.
SILENT_WHEN = "_ds.no_legacy_keys"


@rule(id="ds-removed-key", severity="error", family="deepspeed",
      summary="key removed in deepspeed 0.19 (rejected even when disabled)",
      source=f"{SRC_CFG}::_reject_removed_config_keys")
def removed_key(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "amp": {"enabled": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true}}
    ```
    """
    for k, fix in D.REMOVED_TOP_LEVEL.items():
        if k in ctx.doc.data:
            yield ctx.report((k,), f"'{k}' was removed in deepspeed 0.19; its presence raises DeepSpeedConfigError "
                                   "even when disabled", fix)
    z = ctx.doc.get(("zero_optimization",))
    if isinstance(z, dict):
        for k, fix in D.REMOVED_ZERO.items():
            if k in z:
                yield ctx.report(("zero_optimization", k),
                                 f"'zero_optimization.{k}' was removed in deepspeed 0.19 (DeepSpeedConfigError)", fix)


@rule(id="ds-alias-and-field", severity="error", family="deepspeed",
      summary="a field given both under its alias and its name (e.g. stage3_max_live_parameters + max_live_parameters)",
      source=SRC_ZERO)
def alias_and_field(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1000,
     "max_live_parameters": 2000}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3, "max_live_parameters": 2000}}
    ```
    """
    for name, fields, path, blk in _blocks(ctx):
        for fname, f in fields.items():
            if f.alias and f.alias in blk and fname in blk:
                yield ctx.report(path + (fname,), f"'{f.alias}' and '{fname}' are the same field; giving both is "
                                 "rejected (extra_forbidden)", f"keep only one of {f.alias!r} / {fname!r}")


@rule(id="ds-deprecated-with-replacement", severity="error", family="deepspeed",
      summary="deprecated key given together with its replacement",
      source="deepspeed/runtime/config_utils.py::DeepSpeedConfigModel._process_deprecated_field")
def deprecated_with_replacement(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2, "cpu_offload": true,
     "offload_optimizer": {"device": "cpu"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```
    """
    z = ctx.doc.get(("zero_optimization",))
    if not isinstance(z, dict):
        return
    for old, f in D.ZERO.items():
        if not f.deprecated or old not in z or " or " in f.deprecated:
            continue
        new = f.deprecated
        newf = D.ZERO.get(new)
        present = new in z or (newf is not None and newf.alias and newf.alias in z)
        if present:
            yield ctx.report(("zero_optimization", old), f"deprecated '{old}' and its replacement '{new}' are both "
                             "given (AssertionError: cannot provide both)", f"remove '{old}'")


@rule(id="ds-deprecated-key", severity="warning", family="deepspeed",
      summary="deprecated ZeRO key (still parsed, with a warning)",
      source="deepspeed/runtime/config_utils.py::DeepSpeedConfigModel._process_deprecated_field")
def deprecated_key(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2, "cpu_offload_use_pin_memory": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2}}
    ```

    Effect: cfg.zero_config.cpu_offload_use_pin_memory is True and cfg.zero_config.offload_optimizer is None
    """
    z = ctx.doc.get(("zero_optimization",))
    if not isinstance(z, dict):
        return
    for old, f in D.ZERO.items():
        if f.deprecated and old in z:
            new = f.deprecated
            if " or " not in new and (new in z or (D.ZERO.get(new) and D.ZERO[new].alias in z)):
                continue  # ds-deprecated-with-replacement
            extra = " (its value is NOT transferred)" if " or " in new else ""
            yield ctx.report(("zero_optimization", old), f"'{old}' is deprecated{extra}", f"use '{new}' instead")


@rule(id="ds-curriculum-without-metrics", severity="error", family="deepspeed",
      summary="data_efficiency curriculum learning enabled without curriculum_metrics",
      source="deepspeed/runtime/data_pipeline/config.py::get_curriculum_learning")
def curriculum_metrics(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "data_efficiency": {"enabled": true, "data_sampling": {"enabled": true,
     "curriculum_learning": {"enabled": true}}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "data_efficiency": {"enabled": true, "data_sampling": {"enabled": true,
     "curriculum_learning": {"enabled": false}}}}
    ```
    """
    p = ("data_efficiency", "data_sampling", "curriculum_learning")
    cl = ctx.doc.get(p)
    if isinstance(cl, dict) and cl.get("enabled") and "curriculum_metrics" not in cl:
        yield ctx.report(p + ("enabled",), "curriculum learning is enabled but curriculum_metrics is missing "
                         "(AssertionError at config parse)", "add curriculum_metrics, or disable it")
