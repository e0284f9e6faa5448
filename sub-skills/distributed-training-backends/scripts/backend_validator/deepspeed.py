"""DeepSpeed config facts (deepspeed 0.19.8, accelerate 1.15.0) and consumer resolution.

Standard library only; nothing here imports deepspeed. Every table below is
checked against the installed packages by ``tests/validator_ds/test_facts.py``
(field names, aliases, types, bounds of the pydantic models; removed keys;
optimizer and scheduler names; Accelerate's ``"auto"`` fill lists).

Who reads the JSON decides what is valid ("consumer"):

* ``deepspeed`` - the ``deepspeed`` launcher / ``deepspeed.initialize(config=path)``:
  HJSON, duplicate keys fail, a leftover ``"auto"`` is dropped inside the
  pydantic blocks (``DeepSpeedConfigModel.__init__``) and crashes elsewhere.
* ``accelerate`` - ``deepspeed_config_file`` / ``DeepSpeedPlugin(hf_ds_config=...)``:
  strict ``json.load``; fills ``ACCELERATE_AUTO_KEYS``, any other ``"auto"`` leaf
  raises in ``DeepSpeedPlugin.deepspeed_config_process``.
* ``transformers`` - the Trainer (``HfTrainerDeepSpeedConfig``): strict JSON,
  fills ``TRANSFORMERS_AUTO_KEYS`` (a superset) and compares explicit values with
  TrainingArguments.
"""
from __future__ import annotations

from .core import ACCELERATE_MARKERS, REQUIRED, Doc, Record
# The value helpers and the few tables they need live in ds_values.py, so that a rule needing only
# them does not compile these tables; they are re-exported here (D.as_bool, D.zero_stage, ...).
from .ds_values import (  # noqa: F401
    _FALSE, _TRUE, ACCELERATE_FIELDS_EXCLUSIVE_WITH_FILE, DEEPSPEED_NATIVE_AUTO, DEVICES, DTYPES, as_bool, as_float,
    as_int, consumer_parse_findings, dtype_canonical, enabled, has_auto, iter_auto, offload_device, resolve_consumer,
    zero_stage)

if False:  # pragma: no cover - annotations only (start time, see bench_validator.py)
    from typing import Any, Dict, Optional, Tuple

# --------------------------------------------------------------------------
# The tables are data (deepspeed_tables.json, read by json's C scanner: compiling them as Python code
# was a tenth of a DeepSpeed run's start without bytecode, benchmarks/bench_validator.py). Lists there
# are tuples here; "fields" holds the strict blocks' field specs (F below). Where each comes from:
#
# REMOVED_TOP_LEVEL / REMOVED_ZERO (key -> replacement advice): removed in 0.19.x, any presence raises
#   DeepSpeedConfigError (deepspeed/runtime/config.py::_reject_removed_config_keys).
# REMOVED_OPTIMIZERS: optimizer types removed (deepspeed/runtime/engine.py::_configure_basic_optimizer
#   raises "... is not a supported DeepSpeed Optimizer"); compared lower-cased.
# DS_OPTIMIZERS, DS_SCHEDULERS: deepspeed/runtime/engine.py::_configure_basic_optimizer,
#   deepspeed/runtime/config.py DEEPSPEED_OPTIMIZERS, runtime/zero/utils.py::ZERO_SUPPORTED_OPTIMIZERS.
# TORCH_OPTIMIZERS: torch.optim attributes accepted (case-sensitive) when the lower-cased name is not a
#   DS one. TORCH_SCHEDULERS likewise for torch.optim.lr_scheduler.
# ZERO_TESTED_OPTIMIZERS: config optimizer types that ZeRO accepts without zero_allow_untested_optimizer
#   (they build an optimizer class listed in ZERO_SUPPORTED_OPTIMIZERS).
# SCHEDULER_PARAMS: constructor keyword arguments of the DeepSpeed schedulers (runtime/lr_schedules.py),
#   minus optimizer; SCHEDULER_REQUIRED: the ones without a default.
# OPTIMIZER_CLASSES (config type, lower-cased DS name or exact torch name -> classes) and
#   OPTIMIZER_PARAMS: optimizer.params accepted per config type: the union of the constructor keywords
#   of every class deepspeed may build for it (engine.py::_configure_basic_optimizer /
#   get_optimizer_configuration) plus the keys deepspeed pops first (_ADAM_POPPED). A key outside the
#   union is a TypeError ("unexpected keyword argument") whichever class is chosen.
# fields: the strict (pydantic, extra="forbid") blocks, field -> spec; STRICT_BLOCKS: block name ->
#   (fields, path in the config).
# TOP_LEVEL_KEYS: top-level keys DeepSpeed 0.19.8 reads (everything else is silently ignored), plus
#   "msamp", written by the consumers themselves. TOP_LEVEL_TOLERATED: keys that only the launcher /
#   legacy tooling reads, harmless at top level.
# LENIENT_BLOCKS: keys of the lenient (.get) blocks that 0.19.8 reads; other keys are ignored silently.
# MAPPING_BLOCKS: blocks deepspeed reads as mappings (``param_dict[key].get`` / ``Model(**param_dict[key])``):
#   any other value fails at config parse. True = null is accepted (treated as absent).
# "auto" handling - PLUGIN_OVERWRITTEN_KEYS: keys DeepSpeedPlugin.__post_init__ overwrites whatever the
#   file says, before Accelerator._prepare_deepspeed looks for "auto" (deepspeed_config_process ->
#   fill_match raises on an "auto" it has no value for): `deepspeed_config["steps_per_print"] =
#   float("inf")`, unconditionally, for a file or dict (hf_ds_config) and for the config the plugin
#   builds. The Trainer hands its HfTrainerDeepSpeedConfig (a subclass of accelerate's HfDeepSpeedConfig)
#   to the same plugin in TrainingArguments.__post_init__, so "auto" there is replaced for both consumers
#   (tests/validator_ds/test_plugin_overwrites.py runs the plugin).
# ACCELERATE_AUTO_KEYS: those plus the keys Accelerate 1.15.0 fills (ACCELERATE_FILLED_KEYS:
#   DeepSpeedPlugin.__post_init__ / set_mixed_precision / Accelerator._prepare_deepspeed); any other
#   "auto" leaf raises ValueError there.
# TRANSFORMERS_EXTRA_AUTO_KEYS: the Trainer (transformers/integrations/deepspeed.py::
#   HfTrainerDeepSpeedConfig) fills these as well, then hands the dict to Accelerate.
# TRANSFORMERS_MATCHED_KEYS: values the Trainer compares with TrainingArguments (must be numbers / bools,
#   not strings).
# _DS_MARKERS: top-level keys that mark a DeepSpeed config (DS_MARKERS plus the removed keys).


class F(Record):
    """One field of a strict block: kind (bool int float str enum list dict model any), default,
    bounds (ge gt le lt), choices, alias, optional (None accepted), deprecated (the replacing
    field), model (nested strict block name), no_bool (a field_validator rejects true/false,
    which pydantic would otherwise coerce)."""

    FIELDS = {"kind": REQUIRED, "default": None, "ge": None, "gt": None, "le": None, "lt": None, "choices": (),
              "alias": None, "optional": False, "deprecated": None, "model": None, "no_bool": False}
    FROZEN = True
    __slots__ = tuple(FIELDS)
    kind: str
    default: Any
    ge: Optional[float]
    gt: Optional[float]
    le: Optional[float]
    lt: Optional[float]
    choices: Tuple[Any, ...]
    alias: Optional[str]
    optional: bool
    deprecated: Optional[str]
    model: Optional[str]
    no_bool: bool


def _tuples(v: Any) -> Any:
    """A JSON value with every list turned into a tuple (the tables are immutable)."""
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    if isinstance(v, dict):
        return {k: _tuples(x) for k, x in v.items()}
    return v


def _field(spec: Dict[str, Any]) -> F:
    if "choices" in spec:
        spec = dict(spec, choices=tuple(spec["choices"]))
    return F(**spec)  # a list or dict default stays one (F("list", []), F("dict", {}))


def _load() -> Dict[str, Any]:
    import os
    from .data_file import read_data
    data = read_data(os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepspeed_tables.json"))
    out = {k: _tuples(v) for k, v in data["tables"].items()}
    for name, specs in data["fields"].items():
        out[name] = {k: _field(s) for k, s in specs.items()}
    out["CSV_MONITOR"] = dict(out["TENSORBOARD"])
    out["STRICT_BLOCKS"] = {b: (out[t], tuple(p)) for b, (t, p) in data["strict_blocks"].items()}
    return out


_T = _load()
REMOVED_TOP_LEVEL = _T["REMOVED_TOP_LEVEL"]
REMOVED_ZERO = _T["REMOVED_ZERO"]
REMOVED_OPTIMIZERS = _T["REMOVED_OPTIMIZERS"]
DS_OPTIMIZERS = _T["DS_OPTIMIZERS"]
TORCH_OPTIMIZERS = _T["TORCH_OPTIMIZERS"]
ZERO_TESTED_OPTIMIZERS = _T["ZERO_TESTED_OPTIMIZERS"]
DS_SCHEDULERS = _T["DS_SCHEDULERS"]
TORCH_SCHEDULERS = _T["TORCH_SCHEDULERS"]
SCHEDULER_PARAMS = _T["SCHEDULER_PARAMS"]
SCHEDULER_REQUIRED = _T["SCHEDULER_REQUIRED"]
_ADAM_POPPED = _T["_ADAM_POPPED"]
OPTIMIZER_CLASSES = _T["OPTIMIZER_CLASSES"]
OPTIMIZER_PARAMS = _T["OPTIMIZER_PARAMS"]
OPTIMIZER_PARAMS["adamw"] = OPTIMIZER_PARAMS["adam"]
ZERO = _T["ZERO"]
ZENFLOW = _T["ZENFLOW"]
LEAF_MODULE = _T["LEAF_MODULE"]
TIMERS_THROUGHPUT = _T["TIMERS_THROUGHPUT"]
OFFLOAD_PARAM = _T["OFFLOAD_PARAM"]
OFFLOAD_OPTIMIZER = _T["OFFLOAD_OPTIMIZER"]
FP16 = _T["FP16"]
BF16 = _T["BF16"]
TENSORBOARD = _T["TENSORBOARD"]
CSV_MONITOR = _T["CSV_MONITOR"]
WANDB = _T["WANDB"]
COMET = _T["COMET"]
COMMS_LOGGER = _T["COMMS_LOGGER"]
COMPILE = _T["COMPILE"]
HYBRID_ENGINE = _T["HYBRID_ENGINE"]
TENSOR_PARALLEL = _T["TENSOR_PARALLEL"]
WEIGHT_QUANTIZATION = _T["WEIGHT_QUANTIZATION"]
STRICT_BLOCKS = _T["STRICT_BLOCKS"]
TOP_LEVEL_KEYS = _T["TOP_LEVEL_KEYS"]
TOP_LEVEL_TOLERATED = _T["TOP_LEVEL_TOLERATED"]
LENIENT_BLOCKS = _T["LENIENT_BLOCKS"]
MAPPING_BLOCKS = _T["MAPPING_BLOCKS"]
PLUGIN_OVERWRITTEN_KEYS = _T["PLUGIN_OVERWRITTEN_KEYS"]
ACCELERATE_AUTO_KEYS = PLUGIN_OVERWRITTEN_KEYS + _T["ACCELERATE_FILLED_KEYS"]
TRANSFORMERS_EXTRA_AUTO_KEYS = _T["TRANSFORMERS_EXTRA_AUTO_KEYS"]
TRANSFORMERS_AUTO_KEYS = ACCELERATE_AUTO_KEYS + TRANSFORMERS_EXTRA_AUTO_KEYS
TRANSFORMERS_MATCHED_KEYS = _T["TRANSFORMERS_MATCHED_KEYS"]
_DS_MARKERS = _T["DS_MARKERS"] + tuple(REMOVED_TOP_LEVEL)
del _T

# Accelerate's own (non-DeepSpeed) top-level config keys: a JSON with these is an Accelerate config.
_ACCELERATE_MARKERS = ACCELERATE_MARKERS  # core.py: the engine tells an Accelerate config without this module


def looks_like_deepspeed(data: Any) -> bool:
    """True when ``data`` (a parsed mapping) is a DeepSpeed config rather than an Accelerate one."""
    if not isinstance(data, dict):
        return False
    keys = set(map(str, data))
    if keys & set(_ACCELERATE_MARKERS):
        return False
    return bool(keys & set(_DS_MARKERS))


# --------------------------------------------------------------------------
# Value helpers shared by the rules
def effective(doc: Doc, path: Tuple, consumer: Optional[str], default: Any = None) -> Any:
    """Value at path as the consumer sees it before any auto-filling: plain DeepSpeed drops
    "auto" inside strict blocks (so the default applies)."""
    v = doc.get(path, default)
    if v == "auto" and consumer == "deepspeed" and len(path) > 1 and path[0] in STRICT_BLOCKS:
        return default
    return v


