"""Accelerate config + DeepSpeed JSON: the MS-AMP fp8 backend against ZeRO-3, and
gradient_accumulation_steps given in both files (family ``cross``; ctx.doc, the docstring convention
and the helpers are in cross_file_rules.py). Their own module so that a config naming neither does
not compile them (rules/__init__.py, NEEDS).
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule
from .cross_file_rules import PLUGIN, _json

# Every rule here reports only when the Accelerate config names the MS-AMP backend (fp8_config.backend
# MSAMP / MS-AMP) or deepspeed_config.gradient_accumulation_steps: rules/__init__.py does not compile
# the module for any other document.
NEEDS = ("msamp", "ms-amp", "gradient_accumulation_steps")


@rule(id="xf-msamp-zero3", severity="error", family="cross",
      summary="MS-AMP fp8 backend with ZeRO stage 3 in the JSON", source=PLUGIN)
def msamp_zero3(ctx: Context):
    """The fp8 backend only applies with mixed precision fp8, which next to a JSON file has to
    come from ``accelerate launch --mixed_precision fp8`` (the YAML key is refused by
    ``acc-ds-config-file-conflict``); DeepSpeedPlugin then raises NotImplementedError for
    ZeRO-3 read from the JSON.

    Fails:

    ```yaml
    distributed_type: DEEPSPEED
    mixed_precision: fp8
    num_processes: 1
    fp8_config:
      backend: MSAMP
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}}
    ```

    Passes:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    fp8_config:
      backend: TE
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```
    """
    j = _json(ctx)
    if j is None:
        return
    fp8 = ctx.doc.get(("fp8_config",))
    backend = fp8.get("backend") if isinstance(fp8, dict) else None
    if not (isinstance(backend, str) and backend.upper() in ("MSAMP", "MS-AMP")):
        return
    if ctx.doc.get(("mixed_precision",)) not in ("fp8", None):
        return
    st = D.zero_stage(j, "accelerate")
    if st == 3:
        yield ctx.report(("zero_optimization", "stage"), "MS-AMP (fp8_config.backend MSAMP) does not support ZeRO "
                         "stage 3 (NotImplementedError in DeepSpeedPlugin)", "use stage 0-2 or another fp8 backend",
                         doc=j)


@rule(id="xf-gradient-accumulation-mismatch", severity="error", family="cross",
      summary="gradient_accumulation_steps in the Accelerate config disagrees with the JSON",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin._deepspeed_config_checks")
def gas_mismatch(ctx: Context):
    """``deepspeed_config.gradient_accumulation_steps`` next to ``deepspeed_config_file`` is
    refused by the plugin (``acc-ds-config-file-conflict`` reports the YAML key); this rule
    points at the JSON value that disagrees with it, which is the one DeepSpeed would use.

    Fails:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
      gradient_accumulation_steps: 4
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8, "zero_optimization": {"stage": 2}}
    ```
    """
    j = _json(ctx)
    if j is None:
        return
    jv = j.get(("gradient_accumulation_steps",))
    yv = ctx.doc.get(("deepspeed_config", "gradient_accumulation_steps"))
    if jv is None or yv is None:
        return
    if jv == "auto" or D.as_int(yv) != D.as_int(jv):
        yield ctx.report(("gradient_accumulation_steps",), f"gradient_accumulation_steps is {jv!r} here but {yv!r} "
                         "in the Accelerate config (deepspeed_config.gradient_accumulation_steps); accelerate "
                         "refuses the pair", "keep the value only in the DeepSpeed JSON", doc=j)
