"""DeepSpeed JSON rules (family ``deepspeed``), deepspeed 0.19.8.

Docstring convention (parsed by tests/validator_ds): a ``Fails:`` and a
``Passes:`` fenced ```json block; an optional ``Oracle:`` line with
``consumer=<name>`` and/or ``world_size=<n>`` applied to both examples; for
warnings an optional ``Effect:`` line, a Python expression over ``cfg`` (the
``DeepSpeedConfig`` the real consumer built from the failing example) that is
true when the value was silently dropped or changed.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

from .. import deepspeed as D
from ..core import Context, did_you_mean, rule

SRC_CFG = "deepspeed/runtime/config.py"
SRC_ZERO = "deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig"
SRC_ENGINE = "deepspeed/runtime/engine.py"


def _blocks(ctx: Context):
    """Yield (name, fields, path, dict) for each strict block present as a mapping."""
    data = ctx.doc.data
    for name, (fields, path) in D.STRICT_BLOCKS.items():
        if name == "bf16" and "bf16" not in data and isinstance(data.get("bfloat16"), dict):
            path = ("bfloat16",)
        v = ctx.doc.get(path)
        if isinstance(v, dict):
            yield name, fields, path, v


def _stage(ctx: Context) -> Optional[int]:
    return D.zero_stage(ctx.doc, ctx.consumer)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------- removed / unsupported
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


@rule(id="ds-removed-optimizer", severity="error", family="deepspeed",
      summary="optimizer type removed in deepspeed 0.19 (1-bit Adam/LAMB, 0/1 Adam)",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def removed_optimizer(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"lr": 0.001}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if isinstance(t, str) and t.lower() in D.REMOVED_OPTIMIZERS:
        yield ctx.report(("optimizer", "type"), f"optimizer type {t!r} was removed in deepspeed 0.19 "
                         "(\"is not a supported DeepSpeed Optimizer\")", D.REMOVED_OPTIMIZERS[t.lower()])


@rule(id="ds-unknown-optimizer", severity="error", family="deepspeed",
      summary="optimizer type that is neither a DeepSpeed optimizer nor a torch.optim class",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def unknown_optimizer(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "sgd", "params": {"lr": 0.1}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
     "zero_optimization": {"stage": 0}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if t is None or t == "auto" or not isinstance(ctx.doc.get(("optimizer",)), dict):
        return
    if not isinstance(t, str):
        yield ctx.report(("optimizer", "type"), f"optimizer type must be a string, got {t!r}")
        return
    if t.lower() in D.REMOVED_OPTIMIZERS or t.lower() in D.DS_OPTIMIZERS or t in D.TORCH_OPTIMIZERS:
        return
    cand = did_you_mean(t, D.TORCH_OPTIMIZERS + ("Adam", "AdamW", "Lamb", "Lion", "Adagrad", "Muon"))
    hint = f"did you mean {cand!r}? " if cand else ""
    yield ctx.report(("optimizer", "type"), f"{t!r} is not a supported DeepSpeed optimizer (DeepSpeed names are "
                     "case-insensitive, torch.optim class names are case-sensitive)",
                     hint + "use one of Adam, AdamW, Adagrad, Lamb, Lion, Muon or a torch.optim class name")


@rule(id="ds-unknown-scheduler", severity="error", family="deepspeed",
      summary="scheduler type that is neither a DeepSpeed nor a torch.optim.lr_scheduler class",
      source="deepspeed/runtime/engine.py::_scheduler_from_config")
def unknown_scheduler(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLinearLR", "params": {"warmup_num_steps": 10}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}}
    ```
    """
    t = ctx.doc.get(("scheduler", "type"))
    if t is None or t == "auto" or not isinstance(ctx.doc.get(("scheduler",)), dict):
        return
    if isinstance(t, str) and (t in D.DS_SCHEDULERS or t in D.TORCH_SCHEDULERS):
        return
    cand = did_you_mean(t, D.DS_SCHEDULERS + D.TORCH_SCHEDULERS)
    yield ctx.report(("scheduler", "type"), f"DeepSpeed does not recognize LR scheduler {t!r} (names are "
                     "case-sensitive)", (f"did you mean {cand!r}? " if cand else "")
                     + "use WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest or a torch scheduler")


@rule(id="ds-scheduler-warmup-type", severity="warning", family="deepspeed",
      summary="warmup_type other than 'log' / 'linear' (the scheduler logs a warning and uses 'log')",
      source="deepspeed/runtime/lr_schedules.py::WarmupLR.__init__ / WarmupCosineLR.__init__")
def scheduler_warmup_type(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "warmup_type": "cosine"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "warmup_type": "linear"}}}
    ```

    Effect: __import__("deepspeed.runtime.lr_schedules", fromlist=["WarmupLR"]).WarmupLR(__import__("torch").optim.SGD([__import__("torch").zeros(1, requires_grad=True)], lr=0.1), **cfg.scheduler_params).warmup_type == "log"
    """
    sch = ctx.doc.get(("scheduler",))
    if not isinstance(sch, dict) or sch.get("type") not in ("WarmupLR", "WarmupDecayLR", "WarmupCosineLR"):
        return
    wt = ctx.doc.get(("scheduler", "params", "warmup_type"))
    if wt is None or wt == "auto" or wt in ("log", "linear"):
        return
    yield ctx.report(("scheduler", "params", "warmup_type"), f"warmup_type {wt!r} is not 'log' or 'linear': "
                     f"{sch['type']} logs a warning and warms up with 'log'", "use \"log\" or \"linear\" "
                     "(lower-case)")


@rule(id="ds-scheduler-params", severity="error", family="deepspeed",
      summary="scheduler params that the scheduler constructor rejects (unknown, missing, non-integer steps)",
      source="deepspeed/runtime/lr_schedules.py::WarmupLR.__init__")
def scheduler_params(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100, "warmup_max_lr": 0.001}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100, "warmup_num_steps": 10}}}
    ```
    """
    t = ctx.doc.get(("scheduler", "type"))
    params = ctx.doc.get(("scheduler", "params"))
    if isinstance(t, str) and (t in D.DS_SCHEDULERS or t in D.TORCH_SCHEDULERS) and params is None:
        yield ctx.report(("scheduler",), f"scheduler {t!r} without \"params\": deepspeed calls the constructor "
                         "with **None (TypeError at initialize)", "add \"params\": {} (or the scheduler's values)")
        return
    if not isinstance(t, str) or t not in D.SCHEDULER_PARAMS or not isinstance(params, dict):
        return
    allowed = D.SCHEDULER_PARAMS[t]
    for k in params:
        if k not in allowed:
            cand = did_you_mean(k, allowed)
            yield ctx.report(("scheduler", "params", k), f"{t} has no parameter {k!r} (TypeError: unexpected "
                             "keyword argument)", f"did you mean {cand!r}?" if cand else
                             f"{t} accepts: {', '.join(allowed)}")
    for k in D.SCHEDULER_REQUIRED.get(t, ()):
        if k not in params:
            yield ctx.report(("scheduler", "params"), f"{t} requires scheduler.params.{k} (TypeError at init)",
                             f"add \"{k}\"")
    if "warmup_num_steps" in params and "warmup_num_steps" in allowed:
        v = params["warmup_num_steps"]
        raw = ctx.doc.scalars.get(("scheduler", "params", "warmup_num_steps"))
        ok = isinstance(v, int) and v > 0  # isinstance(True, int): deepspeed accepts true as 1
        if not ok and ctx.consumer == "deepspeed" and isinstance(v, float) and v > 0 and v == int(v) and raw:
            ok = True  # hjson reads 1e3 / 100.0 as the int 100
        if v == "auto" and ctx.consumer in ("accelerate", "transformers"):
            ok = True
        if not ok:
            yield ctx.report(("scheduler", "params", "warmup_num_steps"),
                             f"warmup_num_steps must be a positive integer, got {v!r} (ValueError)",
                             "write a positive integer literal such as 100")


# ---------------------------------------------------------------- strict blocks
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


_KIND_NAMES = {"bool": "a boolean", "int": "an integer", "float": "a number", "str": "a string", "list": "a list",
               "dict": "a mapping", "model": "a mapping", "enum": "one of"}


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


# ---------------------------------------------------------------- unknown keys (silent)
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


# ---------------------------------------------------------------- "auto"
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


# ---------------------------------------------------------------- batch sizes
_BATCH = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


_BATCH_SKIP = ("DeepSpeed batch arithmetic (train_batch_size = micro x grad_acc x world) not checked: the world "
               "size is unknown")


def _batch_auto_world(ctx: Context, d, vals):
    """An explicit train_batch_size next to "auto" micro / grad-acc, with a known world size
    (Accelerate / Trainer fill the "auto" keys; the explicit total is checked by deepspeed)."""
    W = ctx.options.world_size
    tbs = vals.get("train_batch_size")
    autos = [k for k in _BATCH[1:] if d.get(k) == "auto"]
    if tbs is None or not autos or ctx.consumer not in ("accelerate", "transformers"):
        return
    if not W:
        ctx.skip(_BATCH_SKIP, "--world-size N")
        return
    fixed = W
    for k in _BATCH[1:]:
        if k in vals:
            fixed *= vals[k]
    if fixed != int(fixed) or tbs != int(tbs):
        return
    if tbs % fixed != 0:
        yield ctx.report(("train_batch_size",), f"with world size {W}: train_batch_size {tbs} is not a multiple of "
                         f"{fixed} (the explicit batch values x world); no value of {' / '.join(autos)} (\"auto\") "
                         "makes train_batch_size = micro x grad_acc x world", "set train_batch_size to \"auto\" or fix "
                         "it to a multiple")
    elif autos == ["gradient_accumulation_steps"] and tbs // fixed != 1:
        need = tbs // fixed
        who = "TrainingArguments.gradient_accumulation_steps" if ctx.consumer == "transformers" else \
            "the Accelerator's gradient_accumulation_steps"
        yield ctx.report(("train_batch_size",), f"with world size {W}: train_batch_size {tbs} needs "
                         f"gradient_accumulation_steps {need}, but \"auto\" is filled from {who} (default 1); "
                         f"deepspeed's batch check fails unless the code sets {need}",
                         f"write \"gradient_accumulation_steps\": {need}, or \"train_batch_size\": \"auto\"",
                         severity="warning")


@rule(id="ds-batch-size-missing", severity="error", family="deepspeed",
      summary="neither train_batch_size nor train_micro_batch_size_per_gpu is given",
      source=f"{SRC_CFG}::DeepSpeedConfig._set_batch_related_parameters")
def batch_missing(ctx: Context):
    """Fails:

    ```json
    {"gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}
    ```
    """
    d = ctx.doc.data
    if d.get("train_batch_size") is None and d.get("train_micro_batch_size_per_gpu") is None:
        yield ctx.report((), "neither train_batch_size nor train_micro_batch_size_per_gpu is set; deepspeed "
                         "asserts that one of them is given", "add \"train_micro_batch_size_per_gpu\" (or \"auto\" "
                         "under Accelerate / the Trainer)")


@rule(id="ds-batch-size-invalid", severity="error", family="deepspeed",
      summary="batch size values that break train_batch_size = micro x grad_acc x world (with --world-size)",
      source=f"{SRC_CFG}::DeepSpeedConfig._batch_assertion")
def batch_equation(ctx: Context):
    """Oracle: world_size=1

    Under Accelerate / the Trainer, an explicit train_batch_size next to "auto" batch keys is
    checked against the world size: no fill can fix a total that is not a multiple of the explicit
    values x world (error); a total that needs gradient_accumulation_steps k > 1 where that key
    is "auto" is a warning, since the code's gradient_accumulation_steps (default 1) fills it.

    Fails:

    ```json
    {"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 3}
    ```

    Passes:

    ```json
    {"train_batch_size": 9, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 3}
    ```
    """
    d = ctx.doc.data
    vals: Dict[str, Any] = {}
    has_auto = False
    for k in _BATCH:
        if k not in d or d[k] is None:
            continue
        v = d[k]
        if v == "auto":
            has_auto = True  # filled by the consumer (or reported by ds-auto-unsupported)
            continue
        if isinstance(v, bool):
            v = int(v)  # Python arithmetic treats true as 1
        if isinstance(v, str) or not _num(v) or v != v or v in (math.inf, -math.inf):
            yield ctx.report((k,), f"'{k}' must be a positive integer, got {v!r} (TypeError or a failed batch "
                             "check in deepspeed's batch arithmetic)", "write an integer without quotes")
            return
        vals[k] = v
    for k, v in vals.items():
        if v <= 0:
            yield ctx.report((k,), f"'{k}' must be > 0, got {v!r}", "use a positive integer")
            return
    tbs, mb = vals.get("train_batch_size"), vals.get("train_micro_batch_size_per_gpu")
    if has_auto:
        if tbs is not None and mb is not None and (tbs % mb != 0 or tbs < mb):
            yield ctx.report(("train_batch_size",), f"train_batch_size {tbs} is not a multiple of micro {mb}; no "
                             "gradient accumulation or world size can satisfy train_batch_size = micro x grad_acc x "
                             "world", "fix one of the two, or set train_batch_size to \"auto\"")
        elif mb is not None and mb != int(mb) and d.get("train_batch_size") == "auto" and \
                ctx.consumer in ("accelerate", "transformers"):
            yield ctx.report(("train_micro_batch_size_per_gpu",), f"micro batch {mb} is fractional: the filled "
                             "train_batch_size is rounded down and deepspeed's batch check fails",
                             "use an integer micro batch size")
        else:
            yield from _batch_auto_world(ctx, d, vals)
        return
    W = ctx.options.world_size
    tbs, mb, gas = (vals.get(k) for k in _BATCH)
    if gas is None and "gradient_accumulation_steps" not in d and ctx.consumer in ("accelerate", "transformers"):
        gas = 1  # DeepSpeedPlugin.__post_init__ inserts gradient_accumulation_steps = 1
    where = ("train_batch_size",) if tbs is not None else (("train_micro_batch_size_per_gpu",) if mb else ())
    if W is None:
        # world size unknown: report only what no world size can satisfy
        if tbs is not None and mb is not None and gas is not None:
            if tbs % (mb * gas) != 0:
                yield ctx.report(where, f"train_batch_size {tbs} is not a multiple of micro {mb} x grad_acc {gas}; "
                                 "no world size satisfies train_batch_size = micro x grad_acc x world",
                                 "fix one value, or give only two of the three")
                return
        elif tbs is not None and mb is not None and tbs % mb != 0:
            yield ctx.report(where, f"train_batch_size {tbs} is not a multiple of micro {mb}; deepspeed derives "
                             "gradient_accumulation_steps by floor division and the check then fails",
                             "make train_batch_size a multiple of the micro batch size")
            return
        elif tbs is not None and gas is not None and mb is None and tbs % gas != 0:
            yield ctx.report(where, f"train_batch_size {tbs} is not a multiple of grad_acc {gas}",
                             "make train_batch_size a multiple of gradient_accumulation_steps")
            return
        if tbs is not None:
            # the total depends on the world size: the equation itself cannot be checked
            ctx.skip(_BATCH_SKIP, "--world-size N")
        return
    # with a world size: replay deepspeed's derivation (floor division) and its assertion
    if tbs is not None and mb is not None and gas is not None:
        pass
    elif tbs is not None and mb is not None:
        gas = tbs // mb // W
    elif tbs is not None and gas is not None:
        mb = tbs // W // gas
    elif mb is not None and gas is not None:
        tbs = mb * gas * W
    elif tbs is not None:
        gas, mb = 1, tbs // W
    elif mb is not None:
        gas, tbs = 1, mb * W
    else:
        return
    if mb <= 0 or gas <= 0 or tbs <= 0:
        yield ctx.report(where, f"with world size {W} the derived batch values are train_batch_size={tbs}, "
                         f"micro={mb}, grad_acc={gas}; all must be > 0", "raise train_batch_size or lower the "
                         "world size")
    elif tbs != mb * gas * W:
        yield ctx.report(where, f"with world size {W}: {tbs} != {mb} x {gas} x {W} (train_batch_size != micro x "
                         "grad_acc x world after deepspeed's floor-division derivation)",
                         f"e.g. train_batch_size {mb * gas * W}, or give only micro and grad_acc")


# ---------------------------------------------------------------- precision
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


@rule(id="ds-dynamic-loss-scale-bounds", severity="error", family="deepspeed",
      summary="fp16 dynamic loss scaling with loss_scale_window or min_loss_scale <= 0",
      source="deepspeed/runtime/precision_config.py::DeepSpeedFP16Config._validate_dynamic_loss_scale_params")
def dynamic_loss_scale_bounds(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0, "min_loss_scale": 0}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0, "min_loss_scale": 1}}
    ```
    """
    if not D.enabled(ctx.doc, "fp16", ctx.consumer):
        return
    fp = ctx.doc.get(("fp16",), {})
    ls = D.as_float(fp.get("loss_scale", 0))
    if ls != 0:
        return
    for k in ("loss_scale_window", "min_loss_scale"):
        v = fp.get(k)
        if v is None or v == "auto":
            continue
        x = D.as_float(v)
        if x is not None and x <= 0:
            yield ctx.report(("fp16", k), f"'fp16.{k}' must be > 0 with dynamic loss scaling (loss_scale 0), got {v!r}",
                             "use a positive integer (min_loss_scale 1 is the default)")


@rule(id="ds-master-weights-need-zero", severity="error", family="deepspeed",
      summary="fp16/bf16 master-weight or optimizer-state options without ZeRO 1-3",
      source=f"{SRC_CFG}::DeepSpeedConfig._do_error_check")
def master_weights(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true},
     "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```
    """
    st = _stage(ctx)
    for blk, key in (("fp16", "fp16_master_weights_and_grads"), ("bf16", "bf16_master_weights_and_grads"),
                     ("bf16", "bf16_optimizer_states")):
        v = ctx.doc.get((blk, key))
        if D.as_bool(v) is not True:
            continue
        if st == 0:
            yield ctx.report((blk, key), f"'{blk}.{key}' requires ZeRO stage 1, 2 or 3 (AssertionError)",
                             "set zero_optimization.stage to 1-3 or remove the option")
        if key == "bf16_optimizer_states" and D.as_bool(ctx.doc.get(("bf16", "bf16_master_weights_and_grads"))) \
                is not True:
            yield ctx.report((blk, key), "'bf16.bf16_optimizer_states' requires bf16_master_weights_and_grads",
                             "add \"bf16_master_weights_and_grads\": true")


@rule(id="ds-param-dtype-mismatch", severity="error", family="deepspeed",
      summary="data_types.param_dtype does not match the fp16/bf16 mode",
      source=f"{SRC_ENGINE}::_assert_valid_mixed_precision_config")
def param_dtype(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true}, "data_types": {"param_dtype": "fp32"}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "bf16": {"enabled": true}, "data_types": {"param_dtype": "bf16"}}
    ```
    """
    v = ctx.doc.get(("data_types", "param_dtype"))
    if v is None:
        return
    c = D.dtype_canonical(v)
    if c is None:
        yield ctx.report(("data_types", "param_dtype"), f"'data_types.param_dtype' {v!r} is not a valid DtypeEnum",
                         "use fp32, fp16 or bf16")
        return
    fp16, bf16 = D.enabled(ctx.doc, "fp16", ctx.consumer), D.enabled(ctx.doc, "bf16", ctx.consumer)
    if fp16 is None or bf16 is None:
        return
    mode = "fp16" if fp16 else ("bf16" if bf16 else "fp32")
    if c != mode:
        yield ctx.report(("data_types", "param_dtype"), f"data_types.param_dtype {v!r} conflicts with the precision "
                         f"mode ({mode}) (AssertionError at initialize)", f"set it to {mode!r} or remove it")


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


# ---------------------------------------------------------------- ZeRO cross-field
@rule(id="ds-offload-ignored", severity="warning", family="deepspeed",
      summary="offload_param / nvme offload / stage3_* options at a ZeRO stage that ignores them",
      source=SRC_ZERO)
def offload_ignored(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
    ```

    Effect: cfg.zero_optimization_stage == 2 and cfg.zero_config.offload_param.device == "cpu"
    """
    st = _stage(ctx)
    if st is None or st == 3:
        return
    z = ctx.doc.get(("zero_optimization",))
    if not isinstance(z, dict):
        return
    if D.offload_device(ctx.doc, "offload_param", ctx.consumer) in ("cpu", "nvme"):
        p = ("zero_optimization", "offload_param") if "offload_param" in z else ("zero_optimization", "cpu_offload_param")
        yield ctx.report(p, f"offload_param is only used by ZeRO stage 3; at stage {st} it is silently ignored",
                         "set stage 3 or remove offload_param")
    dev = D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer)
    if st in (1, 2) and dev == "nvme":
        yield ctx.report(("zero_optimization", "offload_optimizer", "device"), f"NVMe optimizer offload needs ZeRO "
                         f"stage 3; at stage {st} it is treated as CPU offload", "use device cpu or stage 3")
    if st == 0 and dev in ("cpu", "nvme"):
        yield ctx.report(("zero_optimization", "offload_optimizer"), "offload_optimizer without ZeRO (stage 0) is "
                         "ignored", "set stage 1-3 or remove offload_optimizer")
    for k in z:
        if isinstance(k, str) and k.startswith("stage3_") and k in {f.alias for f in D.ZERO.values() if f.alias} \
                and z[k] != "auto":
            yield ctx.report(("zero_optimization", k), f"'{k}' only applies to ZeRO stage 3 (stage is {st})",
                             "remove it or set stage 3", severity="info")


@rule(id="ds-nvme-path-missing", severity="error", family="deepspeed",
      summary="NVMe offload without nvme_path",
      source="deepspeed/runtime/zero/stage3.py::DeepSpeedZeroOptimizer_Stage3._configure_tensor_swapping")
def nvme_path_missing(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3,
     "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}}
    ```
    """
    st = _stage(ctx)
    for which in ("offload_param", "offload_optimizer"):
        if D.offload_device(ctx.doc, which, ctx.consumer) != "nvme":
            continue
        blk = ctx.doc.get(("zero_optimization", which), {})
        p = blk.get("nvme_path") if isinstance(blk, dict) else None
        if p is None or (p == "auto" and ctx.consumer == "deepspeed"):
            if st == 3 or st is None or which == "offload_param":
                yield ctx.report(("zero_optimization", which, "device"), f"{which}.device is nvme but nvme_path is "
                                 "not set (TypeError / AssertionError when ZeRO-3 sets up swapping)",
                                 "add \"nvme_path\": \"/path/to/local/nvme\"")
        elif p == "auto" and ctx.consumer in ("accelerate", "transformers"):
            yield ctx.report(("zero_optimization", which, "nvme_path"), "nvme_path \"auto\" is filled by Accelerate "
                             "with offload_*_nvme_path, default the string \"none\" (a relative directory)",
                             "write the NVMe mount path", severity="warning")


@rule(id="ds-partial-offload-stage", severity="error", family="deepspeed",
      summary="offload_optimizer.ratio < 1 (partial offload) below ZeRO stage 3",
      source="deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig.offload_ratio_check")
def partial_offload(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2,
     "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3,
     "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```
    """
    r = ctx.doc.get(("zero_optimization", "offload_optimizer", "ratio"))
    x = D.as_float(r) if r != "auto" else None
    st = _stage(ctx)
    if x is not None and x < 1 and st is not None and st != 3:
        yield ctx.report(("zero_optimization", "offload_optimizer", "ratio"), f"partial offload (ratio {r}) is only "
                         f"supported with ZeRO stage 3 (stage is {st}; ValidationError)",
                         "set stage 3 or ratio 1.0")


@rule(id="ds-allreduce-sum", severity="error", family="deepspeed",
      summary="gradient_allreduce_op sum with ZeRO-3, ZenFlow or DeepCompile",
      source=f"{SRC_CFG}::DeepSpeedConfig._do_error_check")
def allreduce_sum(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 2}}
    ```
    """
    v = ctx.doc.get(("gradient_allreduce_op",))
    if not (isinstance(v, str) and v.lower() == "sum"):
        return
    if _stage(ctx) == 3:
        yield ctx.report(("gradient_allreduce_op",), "gradient_allreduce_op 'sum' is not supported with ZeRO stage 3 "
                         "(ValueError)", "use mean, or ZeRO stage 0-2")
    if isinstance(ctx.doc.get(("zero_optimization", "zenflow")), dict):
        yield ctx.report(("gradient_allreduce_op",), "gradient_allreduce_op 'sum' is not supported with ZenFlow",
                         "use mean")
    if D.as_bool(ctx.doc.get(("compile", "deepcompile"))):
        yield ctx.report(("gradient_allreduce_op",), "gradient_allreduce_op 'sum' is not supported with DeepCompile",
                         "use mean")


@rule(id="ds-compute-grad-norm", severity="error", family="deepspeed",
      summary="compute_grad_norm false outside ZeRO 1/2, or with gradient clipping / optimizer offload",
      source="deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.__init__")
def compute_grad_norm(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 2, "compute_grad_norm": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_clipping": 0, "optimizer": {"type": "AdamW",
     "params": {"lr": 0.001, "torch_adam": true}}, "zero_optimization": {"stage": 2, "compute_grad_norm": false}}
    ```
    """
    v = ctx.doc.get(("zero_optimization", "compute_grad_norm"))
    if D.as_bool(v) is not False:
        return
    p = ("zero_optimization", "compute_grad_norm")
    st = _stage(ctx)
    if st is None:
        return
    if st not in (1, 2):
        yield ctx.report(p, f"compute_grad_norm false is only supported with ZeRO stage 1 or 2 (stage {st}; "
                         "ValidationError)", "remove it or use stage 1/2")
        return
    gc = ctx.doc.get(("gradient_clipping",), 1.0)
    if gc != "auto" and (D.as_float(gc) or 0) > 0:
        yield ctx.report(p, f"compute_grad_norm false requires gradient_clipping 0 (it is {gc!r}; the default is "
                         "1.0) (ValueError)", "add \"gradient_clipping\": 0")
    if D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer) in ("cpu", "nvme"):
        yield ctx.report(p, "compute_grad_norm false does not support optimizer offload (ValueError)",
                         "remove offload_optimizer or compute_grad_norm")
    if isinstance(ctx.doc.get(("zero_optimization", "zenflow")), dict):
        yield ctx.report(p, "compute_grad_norm false does not support ZenFlow (ValueError)", "remove one of them")


@rule(id="ds-predivide-prescale-zero", severity="error", family="deepspeed",
      summary="gradient_predivide_factor != 1 or prescale_gradients with ZeRO-2/3 reduce-scatter",
      source="deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.__init__")
def predivide(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "gradient_predivide_factor": 2.0,
     "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}}, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_predivide_factor": 2.0,
     "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}}, "zero_optimization": {"stage": 1}}
    ```
    """
    st = _stage(ctx)
    if st not in (2, 3):
        return
    rs = ctx.doc.get(("zero_optimization", "reduce_scatter"), True)
    if D.as_bool(rs) is False:
        return
    f = ctx.doc.get(("gradient_predivide_factor",))
    if f is not None and _num(f) and f != 1.0:
        yield ctx.report(("gradient_predivide_factor",), f"gradient_predivide_factor {f} is not supported with "
                         f"ZeRO-{st} with reduce_scatter (AssertionError)", "remove it, or set reduce_scatter false")
    if D.as_bool(ctx.doc.get(("prescale_gradients",))) is True:
        yield ctx.report(("prescale_gradients",), f"prescale_gradients is not supported with ZeRO-{st} with "
                         "reduce_scatter (AssertionError)", "remove it, or set reduce_scatter false")


@rule(id="ds-legacy-stage1", severity="error", family="deepspeed",
      summary="zero_optimization.legacy_stage1 true (removed)",
      source=f"{SRC_ENGINE}::_configure_zero_optimizer")
def legacy_stage1(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 1, "legacy_stage1": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 1}}
    ```
    """
    if D.as_bool(ctx.doc.get(("zero_optimization", "legacy_stage1"))) is True:
        yield ctx.report(("zero_optimization", "legacy_stage1"), "legacy_stage1 is not supported in deepspeed >= "
                         "0.5.9 (Exception at initialize)", "remove it")


@rule(id="ds-zero-legacy-bool", severity="warning", family="deepspeed",
      summary="zero_optimization given as true/false (legacy format)",
      source="deepspeed/runtime/zero/config.py::get_zero_config")
def zero_legacy_bool(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": true}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 1}}
    ```

    Effect: cfg.zero_optimization_stage == 1
    """
    v = ctx.doc.get(("zero_optimization",))
    if isinstance(v, bool):
        if ctx.consumer in ("accelerate", "transformers"):
            yield ctx.report(("zero_optimization",), f"\"zero_optimization\": {str(v).lower()} (legacy format) "
                             "fails in Accelerate's DeepSpeedPlugin, which reads it as a mapping (AttributeError)",
                             f"write {{\"stage\": {1 if v else 0}}}", severity="error")
        else:
            yield ctx.report(("zero_optimization",), f"\"zero_optimization\": {str(v).lower()} is the legacy "
                             f"format (means stage {1 if v else 0})", f"write {{\"stage\": {1 if v else 0}}}")


# ---------------------------------------------------------------- optimizer
@rule(id="ds-optimizer-without-type", severity="error", family="deepspeed",
      summary="optimizer block without type (fails at the first step); scheduler without type is ignored",
      source=f"{SRC_CFG}::get_optimizer_name")
def optimizer_without_type(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"params": {"lr": 0.001}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}
    ```
    """
    o = ctx.doc.get(("optimizer",))
    if isinstance(o, dict) and o.get("type") is None:
        yield ctx.report(("optimizer",), "optimizer block without \"type\": deepspeed ignores it and the first "
                         "step() fails unless the code passes an optimizer", "add \"type\": \"AdamW\" (or remove "
                         "the block)")
    s = ctx.doc.get(("scheduler",))
    if isinstance(s, dict) and s.get("type") is None:
        yield ctx.report(("scheduler",), "scheduler block without \"type\" is silently ignored",
                         "add \"type\": \"WarmupLR\" (or remove the block)", severity="warning")


@rule(id="ds-max-grad-norm-in-optimizer", severity="error", family="deepspeed",
      summary="max_grad_norm inside optimizer.params",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def max_grad_norm(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "max_grad_norm": 1.0}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}
    ```
    """
    if ctx.doc.has(("optimizer", "params", "max_grad_norm")) and ctx.doc.has(("optimizer", "type")):
        yield ctx.report(("optimizer", "params", "max_grad_norm"), "'max_grad_norm' is not an optimizer parameter "
                         "(ValueError when deepspeed builds the optimizer)", "remove it and set top-level "
                         "\"gradient_clipping\"")


@rule(id="ds-lamb-needs-dynamic-loss-scale", severity="error", family="deepspeed",
      summary="lamb optimizer with a static fp16 loss scale",
      source=f"{SRC_ENGINE}::_do_sanity_check")
def lamb_dynamic(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "Lamb", "params": {"lr": 0.001}},
     "fp16": {"enabled": false, "loss_scale": 128}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "Lamb", "params": {"lr": 0.001}},
     "fp16": {"enabled": false, "loss_scale": 0}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if not (isinstance(t, str) and t.lower() == "lamb"):
        return
    ls = ctx.doc.get(("fp16", "loss_scale"), 0)
    x = D.as_float(ls) if ls != "auto" else 0
    if x not in (0, None):
        yield ctx.report(("fp16", "loss_scale"), f"the lamb optimizer requires dynamic loss scaling (fp16.loss_scale 0),"
                         f" got {ls!r} (AssertionError at initialize)", "set fp16.loss_scale to 0")


@rule(id="ds-untested-optimizer-zero", severity="error", family="deepspeed",
      summary="optimizer outside ZeRO's tested list without zero_allow_untested_optimizer",
      source=f"{SRC_ENGINE}::_do_optimizer_sanity_check")
def untested_optimizer(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": {"stage": 1}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": {"stage": 1},
     "zero_allow_untested_optimizer": true}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if not isinstance(t, str) or t == "auto":
        return
    if t.lower() in D.REMOVED_OPTIMIZERS:
        return
    if not (t.lower() in D.DS_OPTIMIZERS or t in D.TORCH_OPTIMIZERS):
        return  # ds-unknown-optimizer
    if t.lower() in D.ZERO_TESTED_OPTIMIZERS:
        return
    st = _stage(ctx)
    if not st:
        return
    if D.as_bool(ctx.doc.get(("zero_allow_untested_optimizer",))) is True:
        return
    yield ctx.report(("optimizer", "type"), f"optimizer {t!r} is not in ZeRO's tested list; with ZeRO stage {st} "
                     "deepspeed asserts unless zero_allow_untested_optimizer is true",
                     "add \"zero_allow_untested_optimizer\": true")


# ---------------------------------------------------------------- syntax per consumer
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


@rule(id="ds-parallel-size-world", severity="error", family="deepspeed",
      summary="tensor_parallel.autotp_size does not divide --world-size",
      source="deepspeed/utils/groups.py::_ensure_divisibility")
def parallel_size_world(ctx: Context):
    """Checked only when ``--world-size`` is given.

    Oracle: world_size=1

    Fails:

    ```json
    {"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "tensor_parallel": {"autotp_size": 1}}
    ```
    """
    W = ctx.options.world_size
    if not W:
        v = ctx.doc.get(("tensor_parallel", "autotp_size"))
        if v not in (None, "auto") and (D.as_int(v) or 0) > 1:
            ctx.skip("tensor_parallel.autotp_size not checked against the world size: the world size is unknown",
                     "--world-size N")
        return
    for path in (("tensor_parallel", "autotp_size"),):
        v = D.as_int(ctx.doc.get(path)) if ctx.doc.get(path) not in (None, "auto") else None
        if v is not None and v > 1 and W % v != 0:
            yield ctx.report(path, f"'{'.'.join(path)}' {v} does not divide the world size {W} (AssertionError "
                             "when deepspeed creates the process groups)", f"use a divisor of {W}")


@rule(id="ds-torch-scheduler-wrapped-optimizer", severity="error", family="deepspeed",
      summary="torch.optim.lr_scheduler type in the config while ZeRO or fp16/bf16 wraps the optimizer",
      source="deepspeed/runtime/engine.py::_scheduler_from_config")
def torch_scheduler_wrapped(ctx: Context):
    """A torch scheduler named in the config is built on DeepSpeed's wrapped optimizer (ZeRO,
    fp16/bf16 wrappers), which is not a ``torch.optim.Optimizer`` (deepspeedai/DeepSpeed#6992).

    Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "StepLR", "params": {"step_size": 10}}, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}, "zero_optimization": {"stage": 2}}
    ```
    """
    t = ctx.doc.get(("scheduler", "type"))
    if not (isinstance(t, str) and t in D.TORCH_SCHEDULERS and t not in D.DS_SCHEDULERS):
        return
    st = _stage(ctx)
    wrapped = []
    if st:
        wrapped.append(f"ZeRO stage {st}")
    for blk in ("fp16", "bf16"):
        if D.enabled(ctx.doc, blk, ctx.consumer):
            wrapped.append(blk)
    if wrapped:
        yield ctx.report(("scheduler", "type"), f"torch scheduler {t!r} gets DeepSpeed's wrapped optimizer "
                         f"({', '.join(wrapped)}), which is not a torch.optim.Optimizer (TypeError at initialize)",
                         "use a DeepSpeed scheduler (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle) or build "
                         "the torch scheduler in code on the optimizer deepspeed.initialize returns")


@rule(id="ds-optimizer-param-unknown", severity="error", family="deepspeed",
      summary="optimizer.params key that no optimizer class deepspeed may build for the type accepts",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def optimizer_param_unknown(ctx: Context):
    """The params are passed as keyword arguments to the optimizer constructor.

    Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decays": 0.01}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.01}}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    params = ctx.doc.get(("optimizer", "params"))
    if not isinstance(t, str) or not isinstance(params, dict):
        return
    key = t.lower() if t.lower() in D.OPTIMIZER_PARAMS else t
    allowed = D.OPTIMIZER_PARAMS.get(key)
    if allowed is None:
        return
    for k in params:
        if k in allowed or k == "max_grad_norm":
            continue
        cand = did_you_mean(k, allowed)
        yield ctx.report(("optimizer", "params", k), f"optimizer {t!r} does not take {k!r} (TypeError: unexpected "
                         "keyword argument)", f"did you mean {cand!r}?" if cand else
                         f"accepted: {', '.join(allowed)}")


def _model_dtype(ctx: Context) -> Optional[str]:
    fp16, bf16 = D.enabled(ctx.doc, "fp16", ctx.consumer), D.enabled(ctx.doc, "bf16", ctx.consumer)
    if fp16 is None or bf16 is None:
        return None
    return "fp16" if fp16 else ("bf16" if bf16 else "fp32")


@rule(id="ds-grad-accum-dtype-without-zero", severity="error", family="deepspeed",
      summary="data_types.grad_accum_dtype differs from the model dtype without ZeRO",
      source=f"{SRC_ENGINE}::_do_optimizer_sanity_check")
def grad_accum_dtype(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}, "zero_optimization": {"stage": 1}}
    ```
    """
    v = ctx.doc.get(("data_types", "grad_accum_dtype"))
    c = D.dtype_canonical(v) if v is not None else None
    if c is None or _stage(ctx) != 0:
        return
    m = _model_dtype(ctx)
    if m is not None and c != m:
        yield ctx.report(("data_types", "grad_accum_dtype"), f"grad_accum_dtype {v!r} differs from the model dtype "
                         f"{m} and ZeRO is off (NotImplementedError: unsupported mix at initialize)",
                         f"use ZeRO stage 1-3, or set grad_accum_dtype to {m!r} / remove it")


@rule(id="ds-compute-grad-norm-bf16-stage1", severity="error", family="deepspeed",
      summary="compute_grad_norm false at ZeRO-1 with bf16 parameters and fp32 gradient accumulation",
      source=f"{SRC_ENGINE}::_do_optimizer_sanity_check")
def compute_grad_norm_bf16(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "gradient_clipping": 0, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"},
     "zero_optimization": {"stage": 1, "compute_grad_norm": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "gradient_clipping": 0, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "bf16": {"enabled": true}, "zero_optimization": {"stage": 1, "compute_grad_norm": false}}
    ```
    """
    if D.as_bool(ctx.doc.get(("zero_optimization", "compute_grad_norm"))) is not False or _stage(ctx) != 1:
        return
    if _model_dtype(ctx) != "bf16" or D.dtype_canonical(ctx.doc.get(("data_types", "grad_accum_dtype"))) != "fp32":
        return
    if D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer) == "cpu":
        return
    yield ctx.report(("zero_optimization", "compute_grad_norm"), "compute_grad_norm false is not supported at ZeRO "
                     "stage 1 with bf16 parameters and fp32 gradient accumulation (ValueError)",
                     "remove compute_grad_norm false, or use stage 2")


@rule(id="ds-unmanaged-grad-acc-overlap", severity="error", family="deepspeed",
      summary="managed_gradient_accumulation false with overlap_comm below ZeRO stage 2 (or with DeepCompile)",
      source=f"{SRC_ENGINE}::_do_sanity_check")
def unmanaged_grad_acc(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "managed_gradient_accumulation": false, "zero_optimization": {"stage": 1, "overlap_comm": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "managed_gradient_accumulation": false, "zero_optimization": {"stage": 2, "overlap_comm": true}}
    ```
    """
    if D.as_bool(ctx.doc.get(("managed_gradient_accumulation",))) is not False:
        return
    st = _stage(ctx)
    oc = ctx.doc.get(("zero_optimization", "overlap_comm"))
    overlap = (st == 3) if oc is None or oc == "auto" else D.as_bool(oc)
    if st is not None and st < 2 and overlap:
        yield ctx.report(("managed_gradient_accumulation",), "managed_gradient_accumulation false supports "
                         f"overlap_comm only with ZeRO stage 2 or 3 (stage {st}; AssertionError)",
                         "remove overlap_comm or use stage 2")
    if D.as_bool(ctx.doc.get(("compile", "deepcompile"))):
        yield ctx.report(("managed_gradient_accumulation",), "managed_gradient_accumulation false is not "
                         "supported with DeepCompile (AssertionError)", "remove one of them")


@rule(id="ds-autocast-quantized-weights", severity="error", family="deepspeed",
      summary="torch_autocast enabled together with zero_quantized_weights",
      source="deepspeed/runtime/torch_autocast.py::_validate_auto_cast_settings")
def autocast_quantized(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "torch_autocast": {"enabled": true}, "zero_optimization": {"stage": 3, "zero_quantized_weights": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "torch_autocast": {"enabled": true}, "zero_optimization": {"stage": 3}}
    ```
    """
    if D.as_bool(ctx.doc.get(("torch_autocast", "enabled"))) and \
            D.as_bool(ctx.doc.get(("zero_optimization", "zero_quantized_weights"))):
        yield ctx.report(("zero_optimization", "zero_quantized_weights"), "torch_autocast cannot be combined with "
                         "zero_quantized_weights (AssertionError at initialize)", "disable one of them")


@rule(id="ds-muon-reduce-scatter", severity="error", family="deepspeed",
      summary="Muon optimizer with ZeRO-3 and reduce_scatter (the default)",
      source="deepspeed/runtime/zero/stage3.py::DeepSpeedZeroOptimizer_Stage3.__init__")
def muon_reduce_scatter(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "Muon", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 3}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "Muon", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 2}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if not (isinstance(t, str) and t.lower() == "muon") or _stage(ctx) != 3:
        return
    if D.as_bool(ctx.doc.get(("zero_optimization", "reduce_scatter"), True)) is not False:
        yield ctx.report(("optimizer", "type"), "the Muon optimizer cannot be used with ZeRO-3 reduce_scatter "
                         "(ValueError)", "set zero_optimization.reduce_scatter false, or use stage 1/2")


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


_NUM_PARAMS = {"lr", "eps", "weight_decay", "warmup_min_lr", "warmup_max_lr", "cycle_min_lr", "cycle_max_lr",
               "decay_lr_rate", "warmup_min_ratio", "cos_min_ratio", "lr_range_test_min_lr", "lr_range_test_step_rate",
               "momentum", "cycle_min_mom", "cycle_max_mom", "decay_mom_rate"}
_INT_PARAMS = {"total_num_steps", "cycle_first_step_size", "cycle_second_step_size", "decay_step_size",
               "lr_range_test_step_size", "cycle_first_stair_count", "cycle_second_stair_count"}


@rule(id="ds-param-value-type", severity="error", family="deepspeed",
      summary="optimizer / scheduler parameter of the wrong type (lr as a string, betas not a pair ...)",
      source=f"{SRC_ENGINE}::_configure_basic_optimizer")
def param_value_type(ctx: Context):
    """The params go unchanged to the optimizer / scheduler constructors.

    Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": 0.9}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.999]}}}
    ```
    """
    for blk in ("optimizer", "scheduler"):
        params = ctx.doc.get((blk, "params"))
        if not isinstance(params, dict):
            continue
        for k, v in params.items():
            if v == "auto":
                continue
            p = (blk, "params", k)
            if v is None:
                if k in _NUM_PARAMS or k == "betas":
                    yield ctx.report(p, f"'{blk}.params.{k}' is null (the constructor gets None and fails)",
                                     "remove the key to use the default, or give a value")
                continue
            if k in _NUM_PARAMS and not isinstance(v, (int, float)):
                yield ctx.report(p, f"'{blk}.params.{k}' must be a number, got {v!r} (TypeError in the "
                                 "constructor)", "write a number without quotes")
            elif k in _INT_PARAMS and (isinstance(v, bool) or not _num(v) or v != int(v)):
                yield ctx.report(p, f"'{blk}.params.{k}' must be an integer, got {v!r}", "write an integer")
            elif k == "betas" and not (isinstance(v, list) and len(v) == 2 and all(_num(x) for x in v)):
                yield ctx.report(p, f"'{blk}.params.betas' must be a pair of numbers, got {v!r}",
                                 "e.g. [0.9, 0.999]")
