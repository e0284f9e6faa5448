"""DeepSpeed JSON rules: precision - fp16 and bf16 both enabled (family ``deepspeed``, deepspeed 0.19.8;
the docstring convention is in _ds.py). Loss scaling, master weights and data_types dtypes are in
deepspeed_dtypes.py, compiled only for a JSON that has one of those keys.
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule
from ._ds import SRC_CFG


@rule(id="ds-fp16-and-bf16", severity="error", family="deepspeed",
      summary="fp16 and bf16 both enabled",
      source=f"{SRC_CFG}::DeepSpeedConfig._initialize_params")
def fp16_and_bf16(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "fp16": {"enabled": true}, "bf16": {"enabled": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "fp16": {"enabled": false}, "bf16": {"enabled": true}}
    ```
    """
    if D.enabled(ctx.doc, "fp16", ctx.consumer) and D.enabled(ctx.doc, "bf16", ctx.consumer):
        yield ctx.report(("bf16", "enabled") if "bf16" in ctx.doc.data else ("bfloat16",),
                         "fp16 and bf16 are both enabled (AssertionError: cannot both be enabled)",
                         "enable only one of them")
