"""DeepSpeed JSON rules that depend on who reads the file: "auto" values (plain DeepSpeed drops or
refuses them; Accelerate and the Trainer fill some) and JSON syntax per consumer (family ``deepspeed``,
deepspeed 0.19.8; the docstring convention is in _ds.py).
"""
from __future__ import annotations

from .. import deepspeed as D
from ..core import Context, rule
from ._ds import SRC_CFG, _INT_PARAMS, _NUM_PARAMS

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Dict, Optional, Tuple


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


def _fields_for(path: Tuple) -> Optional[Dict[str, D.F]]:
    for name, (fields, p) in D.STRICT_BLOCKS.items():
        if tuple(path[:-1]) == p:
            return fields
    if tuple(path[:-1]) == ("bfloat16",):
        return D.BF16
    return None


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


_STRICT_REJECTS = ("comment", "trailing-comma", "missing-comma", "unquoted-key", "single-quoted-string",
                   "quoteless-string", "multiline-string", "root-braces-omitted", "bom")


@rule(id="ds-json-syntax", severity="error", family="deepspeed",
      summary="HJSON syntax (comments, trailing commas ...) that a strict-JSON consumer rejects",
      source="accelerate/utils/deepspeed.py::HfDeepSpeedConfig.__init__ (json.load)")
def json_syntax(ctx: Context):
    """Oracle: consumer=accelerate

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": 8, // per device
     "zero_optimization": {"stage": 2},}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 2}}
    ```
    """
    seen = set()
    for kind, line, col in ctx.doc.lenient_features:
        if ctx.consumer == "deepspeed":
            if kind != "nan-infinity":
                continue
            msg = "NaN/Infinity is not valid HJSON (deepspeed's hjson loader reads it as a string or fails)"
        else:
            if kind not in _STRICT_REJECTS or kind in seen:
                continue
            seen.add(kind)
            msg = (f"{kind.replace('-', ' ')} is HJSON, not JSON: {ctx.consumer} reads the file with json.load and "
                   "fails (plain deepspeed would accept it)")
        yield ctx.report((), msg, "remove it to make the file strict JSON", line=line, col=col)


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
