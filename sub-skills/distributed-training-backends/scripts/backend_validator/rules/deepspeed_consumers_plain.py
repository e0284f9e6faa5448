"""DeepSpeed JSON rules for the consumers other than Accelerate: "auto" values that plain DeepSpeed
drops or refuses, and numbers written as strings that the Trainer's fill refuses (family ``deepspeed``,
deepspeed 0.19.8; the docstring convention is in _ds.py). Split from deepspeed_consumers.py so that a
check whose consumer is Accelerate does not compile them (rules/__init__.py, CONSUMERS).
"""
from __future__ import annotations

from .. import deepspeed as D
from ..core import Context, rule
from ._ds import SRC_CFG, _INT_PARAMS, _NUM_PARAMS
from .deepspeed_consumers import _fields_for

# Every rule here names its consumers, all of them among these: rules/__init__.py does not compile the
# module for a check with any other consumer (core.run_rules would not run its rules there).
CONSUMERS = ("deepspeed", "transformers")


def _auto_sites(ctx: Context):
    for path, dotted in D.iter_auto(ctx.doc.data):
        if dotted in D.DEEPSPEED_NATIVE_AUTO:
            continue
        yield path, dotted


@rule(id="ds-auto-dropped", severity="warning", family="deepspeed", consumers=("deepspeed",),
      summary="\"auto\" in a strict block: plain DeepSpeed drops it and the default applies",
      source="deepspeed/runtime/config_utils.py::DeepSpeedConfigModel.__init__")
def auto_dropped(ctx: Context):
    """Oracle: consumer=deepspeed

    Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": "auto"}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2}}
    ```

    Effect: cfg.zero_optimization_stage == 0
    """
    for path, dotted in _auto_sites(ctx):
        if path[0] not in D.STRICT_BLOCKS and path[0] != "bfloat16":
            continue
        fields = _fields_for(path)
        f = fields.get(path[-1]) if fields else None
        if f is None and fields:
            f = next((x for x in fields.values() if x.alias == path[-1]), None)
        default = "the default" if f is None else f"the default {f.default!r}"
        extra = " - ZeRO is OFF" if dotted == "zero_optimization.stage" else ""
        yield ctx.report(path, f"'{dotted}': \"auto\" is silently dropped by plain DeepSpeed; {default} applies{extra}",
                         "write the value, or run through Accelerate / the Trainer which fill \"auto\"")


@rule(id="ds-auto-unsupported", severity="error", family="deepspeed", consumers=("deepspeed",),
      summary="\"auto\" outside the strict blocks: plain DeepSpeed fails on it",
      source=f"{SRC_CFG}::DeepSpeedConfig._set_batch_related_parameters")
def auto_unsupported(ctx: Context):
    """Oracle: consumer=deepspeed

    Fails:

    ```json
    {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 8}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8}
    ```
    """
    for path, dotted in _auto_sites(ctx):
        if path[0] in D.STRICT_BLOCKS or path[0] == "bfloat16":
            continue
        if path[0] in ("optimizer", "scheduler") and (len(path) < 2 or path[1] not in ("params", "type")):
            continue  # other keys of these blocks are never read (ds-unknown-key)
        if len(path) == 3 and path[1] == "params" and path[2] not in _NUM_PARAMS | _INT_PARAMS | {
                "betas", "warmup_num_steps"}:
            yield ctx.report(path, f"'{dotted}': \"auto\" is passed to the constructor as the string 'auto'",
                             "write a concrete value", severity="warning")
            continue
        if path[0] in ("optimizer", "scheduler", "train_batch_size", "train_micro_batch_size_per_gpu",
                       "gradient_accumulation_steps", "gradient_clipping", "communication_data_type",
                       "seq_parallel_communication_data_type", "gradient_allreduce_op", "gradient_predivide_factor",
                       "steps_per_print"):
            yield ctx.report(path, f"'{dotted}': \"auto\" is not filled by plain DeepSpeed and fails (TypeError / "
                             "ValueError at init or at the first step)",
                             "write a concrete value, or launch through Accelerate / the Trainer")
        else:
            yield ctx.report(path, f"'{dotted}': \"auto\" is kept as a string by plain DeepSpeed (a truthy value)",
                             "write a concrete value", severity="warning")


@rule(id="ds-transformers-string-number", severity="error", family="deepspeed", consumers=("transformers",),
      summary="a value the Trainer compares with TrainingArguments is a string (\"8\" is not 8)",
      source="transformers/integrations/deepspeed.py::HfTrainerDeepSpeedConfig.fill_match")
def transformers_string_number(ctx: Context):
    """Oracle: consumer=transformers

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": "8", "gradient_accumulation_steps": "auto",
     "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": "auto",
     "zero_optimization": {"stage": 2}}
    ```
    """
    for dotted in D.TRANSFORMERS_MATCHED_KEYS:
        path = tuple(dotted.split("."))
        v = ctx.doc.get(path)
        if isinstance(v, str) and v != "auto":
            yield ctx.report(path, f"'{dotted}' is the string {v!r}; the Trainer compares it with the "
                             "TrainingArguments value and reports a mismatch", "write the number/boolean without "
                             "quotes, or \"auto\"")
        elif isinstance(v, bool) and not dotted.endswith(".enabled"):
            # fill_match: ds_val != hf_val - true equals only the number 1
            yield ctx.report(path, f"'{dotted}' is the boolean {str(v).lower()}; the Trainer compares it with the "
                             "TrainingArguments number and reports a mismatch (unless that number is 1)",
                             "write the number, or \"auto\"")
