"""DeepSpeed JSON rules: keys and values of the strict blocks - unknown keys, wrong types, out-of-range and
enum values (family ``deepspeed``, deepspeed 0.19.8; the docstring convention is in _ds.py). Removed,
deprecated and aliased keys are in deepspeed_legacy_keys.py (compiled only for a JSON that has one).
"""
from __future__ import annotations

import math

from .. import deepspeed as D
from ..core import Context, did_you_mean, rule
from ._ds import SRC_CFG, _num

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Dict, Optional, Tuple


def _blocks(ctx: Context):
    """Yield (name, fields, path, dict) for each strict block present as a mapping."""
    data = ctx.doc.data
    for name, (fields, path) in D.STRICT_BLOCKS.items():
        if name == "bf16" and "bf16" not in data and isinstance(data.get("bfloat16"), dict):
            path = ("bfloat16",)
        v = ctx.doc.get(path)
        if isinstance(v, dict):
            yield name, fields, path, v


@rule(id="ds-unknown-key-strict", severity="error", family="deepspeed",
      summary="unknown key in a strict (pydantic extra=forbid) block",
      source="deepspeed/runtime/config_utils.py::DeepSpeedConfigModel")
def unknown_key_strict(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true, "check_overflow": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true, "check_grad_overflow": false}}
    ```
    """
    for name, fields, path, blk in _blocks(ctx):
        names = set(fields) | {f.alias for f in fields.values() if f.alias}
        if name == "zero_optimization":
            names |= set(D.REMOVED_ZERO)  # reported by ds-removed-key
        for k in blk:
            if k in names:
                continue
            if blk[k] == "auto" and ctx.consumer == "deepspeed":
                continue  # "auto" is stripped before pydantic sees the key (ds-auto-dropped)
            cand = did_you_mean(k, sorted(names))
            yield ctx.report(path + (k,), f"unknown key {k!r} in '{'.'.join(path)}' (pydantic: extra inputs are "
                             "not permitted)", f"did you mean {cand!r}?" if cand else
                             f"remove it; valid keys: {', '.join(sorted(names))}")


def _check_value(f: D.F, v: Any) -> Optional[str]:
    """Return why pydantic (lax mode) rejects v for field f, or None."""
    if v is None:
        return None if f.optional else "null is not accepted"
    if f.no_bool and isinstance(v, bool):
        return f"{v!r} is a boolean (rejected by a field validator)"
    k = f.kind
    if k == "any":
        return None
    if k == "bool":
        return None if D.as_bool(v) is not None else f"{v!r} is not a boolean"
    if k == "int":
        if isinstance(v, float) and v == v and v not in (math.inf, -math.inf) and v != int(v):
            return f"{v!r} has a fractional part (int_from_float)"
        i = D.as_int(v)
        if i is None:
            return f"{v!r} is not an integer (int_parsing)"
        return _bounds(f, i)
    if k == "float":
        if isinstance(v, bool):
            return f"{v!r} is a boolean, not a number"
        x = D.as_float(v)
        if x is None:
            return f"{v!r} is not a number"
        if x != x or x in (math.inf, -math.inf):
            return f"{v!r} is not finite"
        return _bounds(f, x)
    if k == "str":
        return None if isinstance(v, str) else f"{v!r} is not a string"
    if k in ("dict", "model"):
        return None if isinstance(v, dict) else f"{v!r} is not a mapping"
    if k == "list":
        if not isinstance(v, list):
            return f"{v!r} is not a list"
        bad = [x for x in v if f.choices and x not in f.choices]
        return f"{bad[0]!r} is not one of {', '.join(map(repr, f.choices))}" if bad else None
    if k == "enum":
        for c in f.choices:
            if isinstance(c, int):
                i = D.as_int(v) if not (isinstance(v, float) and v != int(v)) else None
                if i == c:
                    return None
            elif v == c:
                return None
        return f"{v!r} is not one of {', '.join(map(repr, f.choices))}"
    return None


def _bounds(f: D.F, x: float) -> Optional[str]:
    if f.gt is not None and not x > f.gt:
        return f"{x!r} must be > {f.gt:g}"
    if f.ge is not None and not x >= f.ge:
        return f"{x!r} must be >= {f.ge:g}"
    if f.le is not None and not x <= f.le:
        return f"{x!r} must be <= {f.le:g}"
    if f.lt is not None and not x < f.lt:
        return f"{x!r} must be < {f.lt:g}"
    return None


@rule(id="ds-invalid-value", severity="error", family="deepspeed",
      summary="wrong type or out-of-range value in a strict block (stage 0-3, offload device, integer fields, bounds)",
      source="deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig (pydantic validation)")
def invalid_value(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 15099494.4}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 15099494}}
    ```
    """
    for name, fields, path, blk in _blocks(ctx):
        lookup: Dict[str, Tuple[str, D.F]] = {}
        for fname, f in fields.items():
            lookup[fname] = (fname, f)
            if f.alias:
                lookup[f.alias] = (fname, f)
        for k, v in blk.items():
            if k not in lookup:
                continue
            fname, f = lookup[k]
            if v == "auto":
                continue  # ds-auto-* rules
            if f.kind == "model":
                if v is not None and not isinstance(v, dict):
                    yield ctx.report(path + (k,), f"'{k}' must be a mapping, got {v!r}")
                continue
            why = _check_value(f, v)
            if why:
                yield ctx.report(path + (k,), f"'{'.'.join(path)}.{k}': {why}", _value_hint(f))
    # blocks that must be mappings (zero_optimization may also be the legacy true/false)
    for blk, null_ok in D.MAPPING_BLOCKS.items():
        if blk not in ctx.doc.data:
            continue
        v = ctx.doc.data[blk]
        if isinstance(v, dict) or (v is None and null_ok) or (blk == "zero_optimization" and isinstance(v, bool)):
            continue
        if blk == "bfloat16" and "bf16" in ctx.doc.data:
            continue  # ignored when bf16 is present
        example = {"fp16": '{"enabled": true}', "bf16": '{"enabled": true}', "bfloat16": '{"enabled": true}',
                   "zero_optimization": '{"stage": 2}', "optimizer": '{"type": "AdamW", "params": {"lr": 1e-4}}',
                   "scheduler": '{"type": "WarmupLR", "params": {}}'}.get(blk, "{...}")
        yield ctx.report((blk,), f"'{blk}' must be a mapping, got {v!r} (deepspeed fails while parsing the config)",
                         f"write \"{blk}\": {example}, or remove the key")
    if "timers" in ctx.doc.data and not isinstance(ctx.doc.data["timers"], (dict, list, str)):
        yield ctx.report(("timers",), f"'timers' must be a mapping, got {ctx.doc.data['timers']!r} (TypeError: "
                         "deepspeed tests \"throughput\" in it)", "write \"timers\": {\"throughput\": {...}}")
    wcb = ctx.doc.get(("wall_clock_breakdown",))
    if "wall_clock_breakdown" in ctx.doc.data and not isinstance(wcb, (bool, int)):
        yield ctx.report(("wall_clock_breakdown",), f"'wall_clock_breakdown' must be true/false, got {wcb!r} "
                         "(TypeError: it is or-ed with flops_profiler.enabled)", "write true or false")
    # DeepSpeedConfig._initialize_params: wall_clock_breakdown | flops_profiler_config.enabled, the
    # latter read with get_scalar_param - a string (even "false"), float or null raises TypeError
    fpb = ctx.doc.get(("flops_profiler",))
    if isinstance(fpb, dict) and "enabled" in fpb and not isinstance(fpb["enabled"], (bool, int)) \
            and not (fpb["enabled"] == "auto" and ctx.consumer != "deepspeed"):
        yield ctx.report(("flops_profiler", "enabled"), f"'flops_profiler.enabled' must be true/false, got "
                         f"{fpb['enabled']!r} (TypeError: deepspeed or-s it with wall_clock_breakdown)",
                         "write true or false without quotes")
    for k, kind in (("gradient_clipping", "number"), ("gradient_predivide_factor", "number"),
                    ("steps_per_print", "number")):
        v = ctx.doc.get((k,))
        if v is None or v == "auto":
            continue  # "auto": ds-auto-* rules
        if k == "steps_per_print" and ctx.consumer in ("accelerate", "transformers"):
            continue  # DeepSpeedPlugin overwrites it with inf
        if not _num(v) and not (isinstance(v, bool) and k == "steps_per_print"):
            yield ctx.report((k,), f"'{k}' must be a number, got {v!r} (read with dict.get; TypeError at the "
                             "first step)", "write a number without quotes")
    for blk in ("optimizer", "scheduler"):
        v = ctx.doc.get((blk,))
        if isinstance(v, dict) and "params" in v and v["params"] is not None and not isinstance(v["params"], dict):
            yield ctx.report((blk, "params"), f"'{blk}.params' must be a mapping of keyword arguments, got "
                             f"{v['params']!r}", "write {\"lr\": ...}")
    for name in ("tensorboard", "wandb", "csv_monitor", "comet", "comms_logger", "compile", "hybrid_engine",
                 "tensor_parallel", "weight_quantization"):
        if name in ctx.doc.data and not isinstance(ctx.doc.data[name], dict):
            yield ctx.report((name,), f"'{name}' must be a mapping, got {ctx.doc.data[name]!r}")


def _value_hint(f: D.F) -> str:
    if f.kind == "enum":
        return "use one of " + ", ".join(map(str, f.choices))
    if f.kind == "int":
        b = " >= 0" if f.ge is not None else (" > 0" if f.gt is not None else "")
        return f"write an integer literal{b} (e.g. 15099494, not 15099494.4 or \"1e9\")"
    if f.kind == "bool":
        return "write true or false"
    if f.kind == "float":
        lo = f.ge if f.ge is not None else f.gt
        return f"write a number" + (f" in [{lo:g}, {f.le:g}]" if f.le is not None and lo is not None else "")
    return ""


@rule(id="ds-bool-for-number", severity="warning", family="deepspeed",
      summary="true/false given for a numeric field of a strict block (pydantic reads it as 1/0)",
      source="deepspeed/runtime/config_utils.py::DeepSpeedConfigModel (pydantic lax int/float/enum)")
def bool_for_number(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 1}}
    ```

    Effect: cfg.zero_optimization_stage == 1
    """
    for name, fields, path, blk in _blocks(ctx):
        for k, v in blk.items():
            f = fields.get(k) or next((x for x in fields.values() if x.alias == k), None)
            if f is None or not isinstance(v, bool) or f.no_bool or f.kind not in ("int", "float", "enum"):
                continue
            if f.kind == "enum" and not all(isinstance(c, int) for c in f.choices):
                continue
            yield ctx.report(path + (k,), f"'{'.'.join(path)}.{k}' is the boolean {str(v).lower()}, which DeepSpeed "
                             f"reads as the number {int(v)}", f"write the number ({int(v)} if that is meant)")


@rule(id="ds-bool-string", severity="warning", family="deepspeed",
      summary="boolean written as a string (\"true\"/\"false\")",
      source="deepspeed/runtime/config_utils.py::DeepSpeedConfigModel (pydantic lax bool)")
def bool_string(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "activation_checkpointing": {"partition_activations": "false"}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "activation_checkpointing": {"partition_activations": false}}
    ```

    Effect: cfg.activation_checkpointing_config.partition_activations == "false"
    """
    for name, fields, path, blk in _blocks(ctx):
        for k, v in blk.items():
            f = fields.get(k)
            if f is None:
                f = next((x for x in fields.values() if x.alias == k), None)
            if f is not None and f.kind == "bool" and isinstance(v, str) and v != "auto" and D.as_bool(v) is not None:
                yield ctx.report(path + (k,), f"'{'.'.join(path)}.{k}' is the string {v!r}; DeepSpeed coerces it, "
                                 "but Accelerate/Transformers compare it as a string", f"write {v.lower()} without quotes")
    for blk, keys in D.LENIENT_BLOCKS.items():
        b = ctx.doc.get((blk,))
        if not isinstance(b, dict):
            continue
        for k, v in b.items():
            if (blk, k) == ("flops_profiler", "enabled"):
                continue  # any non-bool here is a TypeError (ds-invalid-value)
            if isinstance(v, str) and D.as_bool(v) is False and v.lower() in ("false", "no", "off"):
                yield ctx.report((blk, k), f"'{blk}.{k}' is the string {v!r}; this block is read with dict.get, "
                                 "so any non-empty string counts as true", "write false without quotes")
    for k in ("prescale_gradients", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
              "memory_breakdown", "dataloader_drop_last"):
        v = ctx.doc.get((k,))
        if isinstance(v, str) and D.as_bool(v) is not None:
            yield ctx.report((k,), f"'{k}' is the string {v!r}; read with dict.get, any non-empty string is true",
                             f"write {v.lower()} without quotes")


@rule(id="ds-unknown-key", severity="warning", family="deepspeed",
      summary="top-level key or key of a dict.get block that deepspeed never reads (silently ignored)",
      source=f"{SRC_CFG}::DeepSpeedConfig._initialize_params")
def unknown_key(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "comms_config": {"verbose": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "comms_logger": {"enabled": false}}
    ```

    Effect: not hasattr(cfg, "comms_config_") and cfg.comms_config.comms_logger_enabled is False
    """
    known = set(D.TOP_LEVEL_KEYS) | set(D.REMOVED_TOP_LEVEL) | set(D.TOP_LEVEL_TOLERATED)
    for k in ctx.doc.data:
        if k in known or str(k).startswith("_") or str(k).lower() in ("comment", "comments", "description"):
            continue  # "_comment" style annotations are ignored on purpose
        cand = did_you_mean(k, sorted(set(D.TOP_LEVEL_KEYS)))
        if k in ("comms_config",):
            cand = "comms_logger"
        elif k == "zenflow":  # read only as zero_optimization.zenflow (runtime/zero/config.py)
            cand = "zero_optimization.zenflow"
        elif k == "monitor_config":
            cand = "tensorboard / wandb / csv_monitor"
        yield ctx.report((k,), f"unknown top-level key {k!r} is silently ignored by deepspeed",
                         f"did you mean {cand!r}?" if cand else "remove it or fix its name")
    for blk, keys in D.LENIENT_BLOCKS.items():
        b = ctx.doc.get((blk,))
        if not isinstance(b, dict):
            continue
        for k in b:
            if k not in keys:
                new = _LENIENT_RENAMED.get((blk, k))
                if new:
                    yield ctx.report((blk, k), f"'{blk}.{k}' is not read by deepspeed (silently ignored)",
                                     f"{k!r} is the old name: rename it to {new!r}")
                    continue
                cand = did_you_mean(k, keys)
                yield ctx.report((blk, k), f"'{blk}.{k}' is not read by deepspeed (silently ignored)",
                                 f"did you mean {cand!r}?" if cand else f"known keys: {', '.join(keys)}")


# old key names still found in published configs; deepspeed/runtime/swap_tensor/aio_config.py
# reads only AIO_INTRA_OP_PARALLELISM ("intra_op_parallelism") since the aio handle rework
_LENIENT_RENAMED = {("aio", "thread_count"): "intra_op_parallelism"}


@rule(id="ds-invalid-enum-value", severity="error", family="deepspeed",
      summary="bad value of a dict.get-read option (communication_data_type, gradient_allreduce_op, "
              "torch_autocast.dtype, checkpoint.tag_validation, keep_in_fp32_modules, data_types dtypes)",
      source=f"{SRC_CFG}::get_communication_data_type")
def invalid_enum(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "communication_data_type": "fp8"}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "communication_data_type": "bf16"}
    ```
    """
    d = ctx.doc
    for k in ("communication_data_type", "seq_parallel_communication_data_type"):
        v = d.get((k,))
        if v is None or v == "auto" and ctx.consumer != "deepspeed":
            continue
        if not isinstance(v, str) or v.lower() not in ("fp32", "fp16", "bf16"):
            yield ctx.report((k,), f"invalid {k} {v!r} (ValueError)", "use fp32, fp16 or bf16")
    v = d.get(("log_level",))
    if v is not None and not (isinstance(v, str) and v.lower() in ("debug", "info", "warning", "error", "critical")):
        yield ctx.report(("log_level",), f"log_level {v!r} is not a logging level (ValueError at initialize)",
                         "use debug, info, warning, error or critical")
    v = d.get(("gradient_allreduce_op",))
    if v is not None and not (isinstance(v, str) and v.lower() in ("mean", "sum")):
        yield ctx.report(("gradient_allreduce_op",), f"invalid gradient_allreduce_op {v!r} (ValueError)",
                         "use mean or sum")
    v = d.get(("torch_autocast", "dtype"))
    if v is not None and D.dtype_canonical(v) is None:
        yield ctx.report(("torch_autocast", "dtype"), f"torch_autocast.dtype {v!r} is not a valid DtypeEnum",
                         "use bf16, fp16 or fp32")
    for k in ("grad_accum_dtype", "buffer_dtype"):
        v = d.get(("data_types", k))
        if v is not None and D.dtype_canonical(v) is None:
            yield ctx.report(("data_types", k), f"data_types.{k} {v!r} is not a valid DtypeEnum (fails at "
                             "initialize)", "use fp32, fp16 or bf16")
    v = d.get(("data_types", "keep_in_fp32_modules"))
    if v is not None and v != "auto" and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        yield ctx.report(("data_types", "keep_in_fp32_modules"), "data_types.keep_in_fp32_modules must be \"auto\" "
                         "or a list of module names (DeepSpeedConfigError)", "e.g. [\"lm_head\"]")
    ck = d.get(("checkpoint",))
    if isinstance(ck, dict):
        v = ck.get("tag_validation")
        if v is not None and not (isinstance(v, str) and v.upper() in ("WARN", "IGNORE", "FAIL")):
            yield ctx.report(("checkpoint", "tag_validation"), f"checkpoint.tag_validation {v!r} is not "
                             "Warn/Ignore/Fail (DeepSpeedConfigError)", "use Warn, Ignore or Fail")
        pw = ck.get("parallel_write")
        if isinstance(pw, dict) and "pipeline_stage" in pw and not isinstance(pw["pipeline_stage"], bool):
            yield ctx.report(("checkpoint", "parallel_write", "pipeline_stage"), "checkpoint.parallel_write."
                             "pipeline_stage must be a boolean (DeepSpeedConfigError)", "write true or false")
