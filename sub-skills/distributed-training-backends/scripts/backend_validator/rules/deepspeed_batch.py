"""DeepSpeed JSON rules: batch arithmetic (train_batch_size = micro x grad_acc x world) (family
``deepspeed``, deepspeed 0.19.8; the docstring convention is in _ds.py). Parallel sizes against the world
size are in deepspeed_batch_tp.py.
"""
from __future__ import annotations

import math

from .. import ds_values as D
from ..core import Context, rule
from ._ds import SRC_CFG, _num

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Dict


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
