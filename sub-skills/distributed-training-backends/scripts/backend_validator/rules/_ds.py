"""Helpers shared by the deepspeed_* rule modules (no rules here).

The DeepSpeed JSON rules (family ``deepspeed``, deepspeed 0.19.8) live in one module per topic:
deepspeed_keys (keys and values of the strict blocks), deepspeed_legacy_keys (removed, deprecated and
aliased keys), deepspeed_consumers ("auto" and JSON syntax per
consumer), deepspeed_batch (batch arithmetic, parallel sizes against the world), deepspeed_precision and
deepspeed_dtypes (fp16/bf16, loss scaling, data_types), deepspeed_zero and deepspeed_zero_options (ZeRO
stages and offload), deepspeed_comm (gradient communication), deepspeed_optim
(optimizer and scheduler).

Docstring convention of those rules (parsed by tests/validator_ds): a ``Fails:`` and a
``Passes:`` fenced ```json block; an optional ``Oracle:`` line with
``consumer=<name>`` and/or ``world_size=<n>`` applied to both examples; for
warnings an optional ``Effect:`` line, a Python expression over ``cfg`` (the
``DeepSpeedConfig`` the real consumer built from the failing example) that is
true when the value was silently dropped or changed.
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Optional


SRC_CFG = "deepspeed/runtime/config.py"

SRC_ZERO = "deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig"

SRC_ENGINE = "deepspeed/runtime/engine.py"


def _stage(ctx: Context) -> Optional[int]:
    return D.zero_stage(ctx.doc, ctx.consumer)


def strict_json(doc: Any) -> bool:
    """SILENT_WHEN of deepspeed_json_syntax.py (rules/__init__.py): the document has no lenient (HJSON)
    feature, so ds-json-syntax returns at once."""
    return not getattr(doc, "lenient_features", None)


def no_legacy_keys(doc: Any) -> bool:
    """SILENT_WHEN of deepspeed_legacy_keys.py (rules/__init__.py): the JSON has no removed key (top level
    or zero_optimization), no deprecated zero_optimization key, no strict block giving a field and its alias
    (the bf16 block also as bfloat16) and no data_efficiency.data_sampling.curriculum_learning mapping, so each of
    those rules returns at once."""
    try:
        from .. import deepspeed as T
        data = doc.data
        if not isinstance(data, dict):
            return True
        if any(k in data for k in T.REMOVED_TOP_LEVEL):
            return False
        if isinstance(doc.get(("data_efficiency", "data_sampling", "curriculum_learning")), dict):
            return False
        z = data.get("zero_optimization")
        if isinstance(z, dict) and any(k in T.REMOVED_ZERO or (k in T.ZERO and T.ZERO[k].deprecated) for k in z):
            return False
        for name, (fields, path) in T.STRICT_BLOCKS.items():
            for p in (path, ("bfloat16",)) if name == "bf16" else (path,):
                blk = doc.get(p)
                if isinstance(blk, dict) and any(f.alias and f.alias in blk and n in blk for n, f in fields.items()):
                    return False
        return True
    except Exception:  # pragma: no cover - then the module is loaded and its rules decide
        return False


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_KIND_NAMES = {"bool": "a boolean", "int": "an integer", "float": "a number", "str": "a string", "list": "a list",
               "dict": "a mapping", "model": "a mapping", "enum": "one of"}

_NUM_PARAMS = {"lr", "eps", "weight_decay", "warmup_min_lr", "warmup_max_lr", "cycle_min_lr", "cycle_max_lr",
               "decay_lr_rate", "warmup_min_ratio", "cos_min_ratio", "lr_range_test_min_lr", "lr_range_test_step_rate",
               "momentum", "cycle_min_mom", "cycle_max_mom", "decay_mom_rate"}

_INT_PARAMS = {"total_num_steps", "cycle_first_step_size", "cycle_second_step_size", "decay_step_size",
               "lr_range_test_step_size", "cycle_first_stair_count", "cycle_second_stair_count"}
