"""Accelerate config + DeepSpeed JSON: mixed_precision in the Accelerate config against the JSON's
fp16/bf16 blocks (family ``cross``; ctx.doc, the docstring convention and the helpers are in
cross_file_rules.py). Its own module so that a config without mixed_precision does not compile it
(rules/__init__.py, NEEDS).
"""
from __future__ import annotations

from ..core import Context, rule
from .cross_file_rules import PLUGIN, _json

# The rule reports only when the Accelerate config sets mixed_precision: rules/__init__.py does not
# compile the module for any other document.
NEEDS = ("mixed_precision",)


@rule(id="xf-mixed-precision-conflict", severity="error", family="cross",
      summary="Accelerate mixed_precision is fp16/bf16 but the JSON enables the other dtype",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin.set_mixed_precision")
def mixed_precision_conflict(ctx: Context):
    """accelerate refuses ``mixed_precision: fp16`` when the JSON has ``bf16.enabled: true``
    (and the reverse); with a JSON file ``mixed_precision`` must come from the command line.

    Fails:

    ```yaml
    distributed_type: DEEPSPEED
    mixed_precision: fp16
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}
    ```
    """
    j = _json(ctx)
    if j is None:
        return
    mp = ctx.doc.get(("mixed_precision",))
    if mp not in ("fp16", "bf16", "fp8"):
        return
    other = "bf16" if mp == "fp16" else "fp16"
    blk = j.get((other,))
    if isinstance(blk, dict) and str(blk.get("enabled", "False")).lower() == "true":
        yield ctx.report((other, "enabled"), f"the Accelerate config sets mixed_precision {mp} but this DeepSpeed "
                         f"JSON enables {other} (ValueError in set_mixed_precision)",
                         f"set precision in one place: {other}.enabled false here, or drop mixed_precision",
                         doc=j)
