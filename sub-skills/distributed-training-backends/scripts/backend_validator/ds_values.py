"""Reading a DeepSpeed config's values as its consumer does: pydantic's lax bool/int/float, the ZeRO
stage, fp16/bf16 enablement, offload devices, "auto" leaves and who reads the file (consumer).

Standard library only. The DeepSpeed tables (strict blocks, removed keys, optimizers, schedulers)
are in deepspeed.py, which re-exports everything here; a rule or engine step that needs only these
helpers imports this module and so never compiles the tables (benchmarks/bench_validator.py
--start-only: an Accelerate config naming a DeepSpeed JSON, or one with an inline ZeRO block).
"""
from __future__ import annotations

from .core import CONSUMERS

if False:  # pragma: no cover - annotations only (start time, see bench_validator.py)
    from typing import Any, Iterator, Optional, Tuple
    from .core import Doc

DEVICES = ("none", "cpu", "nvme")

# DtypeEnum spellings (deepspeed/runtime/config.py::DtypeEnum)
DTYPES = {
    "fp16": ("torch.float16", "fp16", "float16", "half"),
    "fp32": ("torch.float32", "fp32", "float32", "float"),
    "int8": ("torch.int8", "int8"),
    "bf16": ("torch.bfloat16", "bf16", "bfloat16"),
}


def dtype_canonical(v: Any) -> Optional[str]:
    for k, names in DTYPES.items():
        if v in names:
            return k
    return None


# "auto" values plain DeepSpeed itself understands.
DEEPSPEED_NATIVE_AUTO = ("pipeline.stages", "data_types.keep_in_fp32_modules",
                         "zero_optimization.zenflow.select_strategy", "zero_optimization.zenflow.select_interval",
                         "zero_optimization.zenflow.update_interval", "tensor_parallel.replace_method")

# Accelerate config keys that must not be set together with deepspeed_config_file
# (accelerate/utils/dataclasses.py::DeepSpeedPlugin._deepspeed_config_checks; the names are
# the deepspeed_config sub-keys written by `accelerate config`).
ACCELERATE_FIELDS_EXCLUSIVE_WITH_FILE = {
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "gradient_clipping": "gradient_clipping",
    "zero_stage": "zero_optimization.stage",
    "offload_optimizer_device": "zero_optimization.offload_optimizer.device",
    "offload_param_device": "zero_optimization.offload_param.device",
    "offload_param_nvme_path": "zero_optimization.offload_param.nvme_path",
    "offload_optimizer_nvme_path": "zero_optimization.offload_optimizer.nvme_path",
    "zero3_save_16bit_model": "zero_optimization.stage3_gather_16bit_weights_on_model_save",
}


def iter_auto(data: Any, prefix: Tuple = ()) -> Iterator[Tuple[Tuple, str]]:
    """Yield (path, dotted) for every leaf whose value is the string "auto" (dicts only, like
    accelerate's deepspeed_config_process)."""
    if isinstance(data, dict):
        for k, v in data.items():
            p = prefix + (k,)
            if isinstance(v, dict):
                yield from iter_auto(v, p)
            elif v == "auto":
                yield p, ".".join(map(str, p))


def has_auto(data: Any) -> bool:
    return any(True for _ in iter_auto(data))


def resolve_consumer(doc: Doc, forced: Optional[str] = None, via_accelerate: bool = False) -> Tuple[str, str]:
    """Return (consumer, reason). Forced wins; a JSON reached through an Accelerate config is read
    by Accelerate; a standalone JSON with "auto" values is assumed to be for the Transformers
    Trainer, one without for plain DeepSpeed."""
    if forced:
        if forced not in CONSUMERS:
            raise ValueError(f"unknown consumer {forced!r}")
        return forced, "given with --consumer"
    if via_accelerate:
        return "accelerate", "named by deepspeed_config_file in an Accelerate config"
    autos = [d for _, d in iter_auto(doc.data) if d not in DEEPSPEED_NATIVE_AUTO]
    if autos:
        return "transformers", (f"standalone file with \"auto\" values (e.g. {autos[0]}); assumed to be read by the "
                                "Transformers Trainer - pass --consumer to change")
    return "deepspeed", "standalone file without \"auto\" values; assumed to be read by deepspeed.initialize"


def consumer_parse_findings(findings, consumer: str) -> list:
    """Parse-level findings as the consumer sees them: a duplicate key fails only deepspeed's own
    hjson loader (a path given to DeepSpeedConfig); Accelerate and the Trainer json.load the file
    and hand deepspeed a dict, so the last value wins silently - a warning, not an error."""
    from .core import JSON_DUPLICATE_RULE as DUPLICATE_RULE
    out = []
    for f in findings:
        if f.rule == DUPLICATE_RULE and f.severity == "error" and consumer in ("accelerate", "transformers"):
            f = f.replace(severity="warning", message=f.message.split(";")[0] + f"; {consumer} reads "
                          "the file with json.load, which silently keeps the last value (plain deepspeed "
                          "would raise)")
        out.append(f)
    return out


# --------------------------------------------------------------------------
# Value helpers shared by the rules
_TRUE = {"true", "yes", "on", "1", "t", "y"}
_FALSE = {"false", "no", "off", "0", "f", "n"}


def as_bool(v: Any) -> Optional[bool]:
    """pydantic lax bool conversion, None when it would be rejected."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, float) and v in (0.0, 1.0):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
    return None


def as_int(v: Any) -> Optional[int]:
    """pydantic lax int conversion, None when it would be rejected."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")) or v != int(v):
            return None
        return int(v)
    if isinstance(v, str):
        s = v.strip().replace("_", "")
        try:
            return int(s)
        except ValueError:
            return None
    return None


def as_float(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def zero_stage(doc: Doc, consumer: Optional[str]) -> Optional[int]:
    """ZeRO stage the consumer will run (None when it cannot be known statically)."""
    z = doc.get(("zero_optimization",))
    if z is None:
        return 0
    if isinstance(z, bool):
        return 1 if z else 0
    if not isinstance(z, dict):
        return None
    v = z.get("stage", 0)
    if v == "auto":
        if consumer == "deepspeed":
            return 0  # dropped by DeepSpeedConfigModel -> the default 0
        if consumer in ("accelerate", "transformers"):
            # DeepSpeedPlugin fills it from zero_stage / ACCELERATE_DEEPSPEED_ZERO_STAGE, default 2; next to a
            # deepspeed_config_file the accelerate config cannot set zero_stage
            return 2
        return None
    i = as_int(v)
    return i if i in (0, 1, 2, 3) else None


def enabled(doc: Doc, block: str, consumer: Optional[str]) -> Optional[bool]:
    """Whether fp16/bf16 (or another block) is enabled; None when "auto"/unknown."""
    b = doc.get((block,))
    if block == "bf16" and b is None and doc.get(("bfloat16",)) is not None:
        if consumer in ("accelerate", "transformers"):
            # set_mixed_precision adds a "bf16" block (enabled only under mixed precision bf16/fp8),
            # which DeepSpeed reads before the legacy "bfloat16" (precision_config.get_bfloat16_config)
            return None
        b = doc.get(("bfloat16",))
    if not isinstance(b, dict):
        return False if b is None else None
    v = b.get("enabled", False)
    if v == "auto":
        return False if consumer == "deepspeed" else None
    return as_bool(v)


def offload_device(doc: Doc, which: str, consumer: Optional[str]) -> Optional[str]:
    """'none' / 'cpu' / 'nvme' for offload_param / offload_optimizer (None when unknown)."""
    z = doc.get(("zero_optimization",))
    if not isinstance(z, dict):
        return "none"
    legacy = {"offload_optimizer": "cpu_offload", "offload_param": "cpu_offload_param"}[which]
    blk = z.get(which)
    if blk is None:
        return "cpu" if as_bool(z.get(legacy)) else "none"
    if not isinstance(blk, dict):
        return None
    d = blk.get("device", "none")
    if d == "auto":
        return "none" if consumer == "deepspeed" else None
    return d if d in DEVICES else None
