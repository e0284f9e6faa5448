"""DeepSpeed JSON rules that depend on who reads the file: "auto" values (plain DeepSpeed drops or
refuses them; Accelerate and the Trainer fill some) and JSON syntax per consumer (family ``deepspeed``,
deepspeed 0.19.8; the docstring convention is in _ds.py). The rules only plain DeepSpeed or the Trainer
run are in deepspeed_consumers_plain.py, JSON syntax in deepspeed_json_syntax.py.
"""
from __future__ import annotations

from .. import deepspeed as D
from ..core import Context, rule

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Dict, Optional, Tuple


def _fields_for(path: Tuple) -> Optional[Dict[str, D.F]]:
    for name, (fields, p) in D.STRICT_BLOCKS.items():
        if tuple(path[:-1]) == p:
            return fields
    if tuple(path[:-1]) == ("bfloat16",):
        return D.BF16
    return None


@rule(id="ds-auto-unfillable", severity="error", family="deepspeed", consumers=("accelerate", "transformers"),
      summary="\"auto\" on a key that Accelerate / the Trainer cannot fill",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin.deepspeed_config_process")
def auto_unfillable(ctx: Context):
    """Oracle: consumer=accelerate

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2, "overlap_comm": "auto"}}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2, "overlap_comm": true}}
    ```
    """
    fillable = D.ACCELERATE_AUTO_KEYS if ctx.consumer == "accelerate" else D.TRANSFORMERS_AUTO_KEYS
    who = "Accelerate" if ctx.consumer == "accelerate" else "the Transformers Trainer"
    if ctx.consumer == "accelerate" and ctx.doc.get(("train_batch_size",)) == "auto" and \
            ctx.doc.get(("train_micro_batch_size_per_gpu",)) is None:
        yield ctx.report(("train_batch_size",), "train_batch_size \"auto\" is computed from "
                         "train_micro_batch_size_per_gpu, which is missing: Accelerate cannot fill it (ValueError)",
                         "add \"train_micro_batch_size_per_gpu\": \"auto\"")
    for path, dotted in D.iter_auto(ctx.doc.data):
        if dotted in fillable:
            continue
        alt = None
        f = _fields_for(path)
        if f and path[-1] in f and f[path[-1]].alias:
            alt = ".".join(map(str, path[:-1] + (f[path[-1]].alias,)))
        hint = (f"write a concrete value, or use the spelling {alt!r} which {who} fills" if alt and alt in fillable
                else "write a concrete value")
        yield ctx.report(path, f"'{dotted}': {who} cannot fill \"auto\" here (ValueError: not found in kwargs)", hint)


@rule(id="ds-accelerate-needs-zero-block", severity="error", family="deepspeed",
      consumers=("accelerate", "transformers"),
      summary="config without zero_optimization (Accelerate's DeepSpeedPlugin rejects it)",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin.__post_init__")
def accelerate_needs_zero(ctx: Context):
    """Oracle: consumer=accelerate

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 0}}
    ```
    """
    if "zero_optimization" not in ctx.doc.data:
        yield ctx.report((), "no \"zero_optimization\" block: Accelerate raises \"Please specify the ZeRO "
                         "optimization config in the DeepSpeed config\"", "add \"zero_optimization\": {\"stage\": 0} "
                         "(or the stage you want)")
