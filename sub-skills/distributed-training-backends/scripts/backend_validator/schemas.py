"""Generate the editor JSON Schemas in ``schemas/`` from the validator's own tables.

    python sub-skills/distributed-training-backends/scripts/backend_validator/schemas.py --write
    python sub-skills/distributed-training-backends/scripts/backend_validator/schemas.py --check

One source of truth: key names, enums, defaults, bounds and aliases come from
``rules/accelerate_schema.py`` (accelerate 1.15.0) and ``deepspeed.py``
(deepspeed 0.19.8), the same tables the rules use and tests/validator* check
against the installed packages. A test runs ``--check``, so a schema can never
drift from the tables.

What a schema rejects is what the validator reports as an *error* for one key
on its own: a wrong type, a value outside an enum, an unknown key where the
consumer refuses unknown keys (Accelerate's top level, DeepSpeed's pydantic
blocks), a removed key. What the validator only warns about (a key silently
ignored, a value silently dropped) stays valid, and so do the cross-key rules:
those need the validator. Values are accepted in the lax forms the libraries
accept (``"true"``/``1`` for booleans, ``"8"`` for integers where the value is
parsed from text), so YAML 1.1 words that PyYAML turns into booleans pass where
accelerate accepts them.

Standard library only (draft-07 JSON Schema, read by VS Code and yaml-language-server).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from backend_validator import deepspeed as D  # type: ignore
    from backend_validator.rules import accelerate_schema as S  # type: ignore
    from backend_validator.version import VERIFIED_AGAINST  # type: ignore
else:
    from . import deepspeed as D
    from .rules import accelerate_schema as S
    from .version import VERIFIED_AGAINST

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "schemas"))
FILES = {"accelerate": "accelerate-config.schema.json", "deepspeed": "deepspeed-config.schema.json"}
REGEN = "python sub-skills/distributed-training-backends/scripts/backend_validator/schemas.py --write"
DRAFT = "http://json-schema.org/draft-07/schema#"
RULES_DOC = "references/validator-rules.md"

Schema = Dict[str, Any]


# ----------------------------------------------------------------- value kinds
def _ci(word: str) -> str:
    """Case-insensitive regex for one word ([Tt][Rr][Uu][Ee]); JSON Schema regexes have no flags."""
    out = []
    for c in word:
        if c.isalpha():
            out.append(f"[{c.upper()}{c.lower()}]")
        elif c in ".+*?()[]{}|^$\\-":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _ci_enum_pattern(words: Iterable[str], digits: Optional[Tuple[int, int]] = None) -> str:
    alts = [_ci(w) for w in words]
    if digits:
        alts += [str(i) for i in range(digits[0], digits[1] + 1)]
    return "^(" + "|".join(alts) + ")$"


INT_TEXT = r"^\s*[+-]?[0-9](_?[0-9])*\s*$"  # what int(str(v)) accepts (underscores as separators)
FLOAT_TEXT = r"^\s*[+-]?([0-9](_?[0-9])*(\.([0-9](_?[0-9])*)?)?|\.[0-9](_?[0-9])*)([eE][+-]?[0-9](_?[0-9])*)?\s*$"
POSITIVE_INT_TEXT = r"^\s*[+]?0*[1-9](_?[0-9])*\s*$"
NULL = {"type": "null"}


def truth_value(words: Tuple[str, ...] = S.TRUE_WORDS + S.FALSE_WORDS) -> Schema:
    """A boolean as accelerate's str_to_bool(str(v).lower()) reads it."""
    return {"anyOf": [{"type": "boolean"}, {"enum": [0, 1]},
                      {"type": "string", "pattern": _ci_enum_pattern(words)}]}


def int_text() -> Schema:
    """An integer, or text int() reads (the launcher exports the value as text)."""
    return {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": INT_TEXT}]}


def number_text() -> Schema:
    return {"anyOf": [{"type": "number"}, {"type": "string", "pattern": FLOAT_TEXT}]}


def name_enum(values: Iterable[str], *, case_insensitive: bool, digits: Optional[Tuple[int, int]] = None) -> Schema:
    """One of the names (offered for completion); case-insensitive ones also match other cases,
    and some enums also take their 1-based number."""
    values = list(values)
    if not case_insensitive and not digits:
        return {"enum": values}
    alts: List[Schema] = [{"enum": values}]
    alts.append({"type": "string", "pattern": _ci_enum_pattern(values, digits)})
    if digits:
        alts.append({"type": "integer", "minimum": digits[0], "maximum": digits[1]})
    return {"anyOf": alts}


def nullable(s: Schema) -> Schema:
    if "anyOf" in s:
        return dict(s, anyOf=s["anyOf"] + [NULL])
    return {"anyOf": [s, NULL], **{k: v for k, v in s.items() if k in ("description", "default")}}


def described(s: Schema, text: str, default: Any = None) -> Schema:
    s = dict(s)
    s["description"] = text
    if default is not None:
        s["default"] = default
    return s


# ----------------------------------------------------------------- Accelerate
ACC_TOP_DOCS = {
    "compute_environment": "Where the job runs: LOCAL_MACHINE (launched here) or AMAZON_SAGEMAKER.",
    "distributed_type": "Which launcher and plugin accelerate uses (exact upper-case DistributedType name). "
                        "Quote NO: unquoted, YAML 1.1 reads it as false.",
    "mixed_precision": "no, fp16, bf16 or fp8 (case-insensitive). Quote 'no': unquoted, YAML 1.1 reads it as false.",
    "use_cpu": "Run on CPU even when a GPU is present.",
    "debug": "Distributed debug checks (ACCELERATE_DEBUG_MODE).",
    "num_processes": "Total number of processes over all machines.",
    "num_machines": "Number of machines (nodes).",
    "machine_rank": "Rank of this machine, 0 to num_machines - 1.",
    "gpu_ids": "GPUs to use as text: 'all', '0' or '0,1' (a bare number is read as an integer and fails).",
    "main_process_ip": "Address of the rank-0 machine (multi-node).",
    "main_process_port": "Port of the rank-0 machine (0-65535; 0 picks a free one).",
    "rdzv_backend": "torchrun rendezvous backend (static or c10d). Not copied from the config file by accelerate launch.",
    "same_network": "All machines on one network. Not copied from the config file by accelerate launch.",
    "main_training_function": "Function the notebook/TPU launcher calls.",
    "enable_cpu_affinity": "Pin processes to CPU cores (NVIDIA). Not copied from the config file by accelerate launch.",
    "downcast_bf16": "TPU: downcast to bf16. Not copied from the config file by accelerate launch.",
    "fp8_config": "FP8 recipe settings (mixed_precision: fp8).",
    "deepspeed_config": "DeepSpeed plugin settings (distributed_type: DEEPSPEED).",
    "fsdp_config": "FSDP plugin settings (distributed_type: FSDP).",
    "parallelism_config": "N-D parallelism sizes (ParallelismConfig).",
    "megatron_lm_config": "Megatron-LM plugin settings (distributed_type: MEGATRON_LM).",
    "mpirun_config": "MULTI_CPU with mpirun.",
    "dynamo_config": "torch.compile settings (TorchDynamoPlugin).",
    "fp16": "Legacy: true means mixed_precision fp16 (converted when the file is loaded).",
    "dynamo_backend": "Legacy top-level dynamo backend; replaces the whole dynamo_config block when present.",
}
BLOCK_KEYS = {
    "fsdp_config": S.FSDP_KEYS,
    "deepspeed_config": S.DEEPSPEED_KEYS,
    "fp8_config": S.FP8_KEYS,
    "dynamo_config": S.DYNAMO_KEYS,
    "parallelism_config": S.PARALLELISM_KEYS,
    "megatron_lm_config": S.MEGATRON_KEYS,
    "mpirun_config": S.MPIRUN_KEYS,
}


def _unprefixed(block: str, key: str) -> Optional[str]:
    """The short spelling accelerate also accepts inside a block (it adds the prefix on launch)."""
    for b, pre in (("fsdp_config", "fsdp_"), ("fp8_config", "fp8_"), ("dynamo_config", "dynamo_")):
        if block == b and key.startswith(pre):
            return key[len(pre):]
    return None


def _acc_value(arg: str) -> Schema:
    """Schema of one launch argument (the prefixed name) as the plugin reads it."""
    if arg in S.BOOL_KEYS or arg in S.FSDP_BOOL_KEYS_V1:
        return truth_value()
    if arg == "fsdp_sharding_strategy":
        return name_enum(S.FSDP_SHARDING_STRATEGY, case_insensitive=True, digits=(1, 5))
    if arg == "fsdp_state_dict_type":
        return name_enum(S.FSDP_STATE_DICT_TYPE, case_insensitive=True, digits=(1, 3))
    if arg == "fsdp_backward_prefetch":
        return name_enum(S.FSDP_BACKWARD_PREFETCH, case_insensitive=True, digits=(1, 2))
    if arg == "fsdp_auto_wrap_policy":
        return name_enum(S.FSDP_AUTO_WRAP_POLICY, case_insensitive=True)
    if arg == "fsdp_version":
        return {"anyOf": [{"enum": [1, 2]}, {"enum": ["1", "2"]}]}
    if arg == "fsdp_reshard_after_forward":  # FSDP2: a boolean; FSDP1: a sharding strategy
        return {"anyOf": truth_value()["anyOf"] + name_enum(S.FSDP_SHARDING_STRATEGY, case_insensitive=True,
                                                            digits=(1, 5))["anyOf"]}
    if arg == "fsdp_min_num_params":
        return int_text()
    if arg == "zero_stage":
        return {"anyOf": [{"enum": [0, 1, 2, 3]}, {"enum": ["0", "1", "2", "3"]}]}
    if arg in ("offload_optimizer_device", "offload_param_device"):
        return name_enum(S.DS_OFFLOAD_DEVICES + ("auto",), case_insensitive=True)
    if arg == "gradient_accumulation_steps":
        return int_text()
    if arg == "gradient_clipping":
        return {"anyOf": number_text()["anyOf"] + [{"const": "auto"}]}
    if arg == "deepspeed_multinode_launcher":
        return name_enum(S.DS_MULTINODE_LAUNCHERS, case_insensitive=True)
    if arg == "fp8_backend":
        return name_enum(S.FP8_BACKENDS, case_insensitive=False)
    if arg == "dynamo_backend":
        return name_enum(S.DYNAMO_BACKENDS, case_insensitive=True)
    if arg == "dynamo_mode":
        return {"type": "string", "examples": list(S.DYNAMO_MODES)}
    if arg.startswith("parallelism_config_") and arg.endswith("_size"):
        return {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": POSITIVE_INT_TEXT}]}
    if arg == "parallelism_config_cp_backend":
        return {"enum": ["torch"]}
    if arg == "parallelism_config_sp_backend":
        return {"enum": ["deepspeed"]}
    if arg == "parallelism_config_sp_attn_implementation":
        return {"type": "string", "examples": list(S.SP_ATTN_BUILTIN)}
    if arg.startswith("megatron_lm_"):
        k = arg[len("megatron_lm_"):]
        if k in S.MEGATRON_INT_KEYS:
            return int_text()
        if k in S.MEGATRON_FLOAT_KEYS:
            return number_text()
        if k in S.MEGATRON_STR_KEYS:
            return {"type": "string"}
    return {}


def _acc_arg_doc(block: str, arg: str) -> str:
    parts = [f"Launch argument --{arg}."]
    if block == "fsdp_config":
        if arg in S.FSDP_LAUNCH_DEFAULTS:
            parts.append(f"Launch default: {S.FSDP_LAUNCH_DEFAULTS[arg]}.")
        if arg in S.FSDP2_IGNORED:
            parts.append("Ignored with fsdp_version 2.")
        if arg in S.FSDP_BOOL_KEYS_V1 and arg not in S.FSDP_BOOL_KEYS_V2:
            parts.append("Read by FSDP1 only.")
    if block == "deepspeed_config" and arg in S.DS_FILE_EXCLUSIVE:
        parts.append("Not allowed together with deepspeed_config_file (set it in the JSON).")
    if arg == "dynamo_mode":
        parts.append("torch.compile mode (inductor): " + ", ".join(S.DYNAMO_MODES) + ".")
    return " ".join(parts)


def _acc_block(block: str) -> Schema:
    props: Dict[str, Schema] = {}
    for arg in BLOCK_KEYS[block]:
        short = _unprefixed(block, arg)
        doc = _acc_arg_doc(block, arg)
        props[arg] = nullable(described(_acc_value(arg), doc))
        if short:
            props[short] = nullable(described(_acc_value(arg), f"Short form of {arg}. {doc}"))
    if block == "fp8_config":
        for wrong, right in S.FP8_QUESTIONNAIRE_NAMES.items():
            props.setdefault(wrong, {"description": f"Written by `accelerate config` but read by no recipe; "
                                                    f"use {right}."})
    obj: Schema = {"type": "object", "properties": dict(sorted(props.items())),
                   # unknown keys in a block are silently ignored (a validator warning), not refused
                   "additionalProperties": True}
    if block == "fsdp_config":
        # FSDP2 reads fsdp_reshard_after_forward as a boolean (FSDP1: a sharding strategy)
        v2 = {"enum": [2, "2"]}
        strict = nullable(described(truth_value(), "FSDP2: true or false."))
        obj["allOf"] = [
            {"if": {"properties": {"fsdp_version": v2}, "required": ["fsdp_version"]},
             "then": {"properties": {"fsdp_reshard_after_forward": strict, "reshard_after_forward": strict}}},
            {"if": {"properties": {"version": v2}, "required": ["version"], "not": {"required": ["fsdp_version"]}},
             "then": {"properties": {"fsdp_reshard_after_forward": strict, "reshard_after_forward": strict}}},
        ]
    return {"description": ACC_TOP_DOCS[block], "anyOf": [obj, NULL]}


def accelerate_schema() -> Schema:
    fields = list(dict.fromkeys(S.CLUSTER_FIELDS + S.SAGEMAKER_FIELDS + S.LEGACY_TOP_LEVEL))
    props: Dict[str, Schema] = {}
    for k in fields:
        doc = ACC_TOP_DOCS.get(k, "SageMaker setting." if k in S.SAGEMAKER_FIELDS and k not in S.CLUSTER_FIELDS
                               else "Top-level accelerate config field.")
        if k in BLOCK_KEYS:
            props[k] = _acc_block(k)
            continue
        if k == "compute_environment":
            s: Schema = {"enum": list(S.COMPUTE_ENVIRONMENTS)}
        elif k == "distributed_type":
            names = list(dict.fromkeys(S.DISTRIBUTED_TYPES + S.SAGEMAKER_DISTRIBUTED_TYPES))
            s = {"anyOf": [{"enum": names}, {"const": False}]}  # YAML 1.1 NO -> false (a validator warning)
        elif k == "mixed_precision":
            s = name_enum(S.PRECISIONS, case_insensitive=True)
        elif k in S.INT_TOP_LEVEL:
            s = {"type": "integer"}
            if k == "main_process_port":
                s = {"type": "integer", "minimum": 0, "maximum": 65535}
        elif k in ("gpu_ids", "main_process_ip", "main_training_function", "rdzv_backend", "tpu_name", "tpu_zone",
                   "command_file", "ec2_instance_type", "iam_role_name", "image_uri", "profile", "region",
                   "base_job_name", "pytorch_version", "transformers_version", "py_version", "sagemaker_inputs_file",
                   "sagemaker_metrics_file"):
            s = {"type": "string"}
        elif k in S.BOOL_KEYS or k in S.LAUNCH_IGNORED_TOP_LEVEL and isinstance(S.LAUNCH_IGNORED_TOP_LEVEL[k], bool):
            s = truth_value()
        elif k == "dynamo_backend":
            s = name_enum(S.DYNAMO_BACKENDS, case_insensitive=True)
        else:
            s = {}
        if k in S.LAUNCH_IGNORED_TOP_LEVEL:
            s["default"] = S.LAUNCH_IGNORED_TOP_LEVEL[k]
        props[k] = nullable(described(s, doc)) if s else {"description": doc}
    for k, why in S.REMOVED_TOP_LEVEL.items():
        props[k] = {"description": f"Removed: {why}.", "not": {}}
    return {
        "$schema": DRAFT,
        "$id": "accelerate-config.schema.json",
        "title": "Accelerate launch config (accelerate config / accelerate launch --config_file)",
        "description": f"Generated from the validator's tables ({VERIFIED_AGAINST}) by {REGEN}; do not edit. "
                       "Keys, enums and types only: run validate_backend_config.py for cross-key checks. "
                       f"Rules: {RULES_DOC}.",
        "type": "object",
        "properties": dict(sorted(props.items())),
        # ClusterConfig / SageMakerConfig(**config) refuse any other top-level key (acc-unknown-top-level-key)
        "additionalProperties": False,
    }


# ----------------------------------------------------------------- DeepSpeed
DS_BLOCK_DOCS = {
    "zero_optimization": "ZeRO settings (DeepSpeedZeroConfig; unknown keys are refused).",
    "offload_param": "ZeRO-3 parameter offload (DeepSpeedZeroOffloadParamConfig).",
    "offload_optimizer": "ZeRO optimizer-state offload (DeepSpeedZeroOffloadOptimizerConfig).",
    "zenflow": "ZenFlow offload settings.",
    "leaf_module": "ZeRO-3 leaf modules (not partitioned further).",
    "timers_throughput": "Throughput timer.",
    "fp16": "fp16 mixed precision and loss scaling (DeepSpeedFP16Config).",
    "bf16": "bf16 mixed precision (DeepSpeedBF16Config).",
    "tensorboard": "TensorBoard monitor.",
    "wandb": "Weights & Biases monitor.",
    "csv_monitor": "CSV monitor.",
    "comet": "Comet monitor.",
    "comms_logger": "Communication logger.",
    "compile": "DeepCompile settings.",
    "hybrid_engine": "Hybrid engine (RLHF).",
    "tensor_parallel": "AutoTP tensor parallelism.",
    "weight_quantization": "Weight quantization.",
}
LENIENT_DOCS = {
    "activation_checkpointing": "Activation checkpointing (read with dict.get; other keys are ignored).",
    "flops_profiler": "FLOPs profiler (read with dict.get).",
    "aio": "Async I/O for NVMe offload (read with dict.get).",
    "torch_autocast": "torch.autocast mixed precision (read with dict.get).",
    "data_types": "Data types of gradient accumulation and parameters (read with dict.get).",
    "optimizer": "Optimizer built by DeepSpeed: type and params.",
    "scheduler": "Learning-rate scheduler built by DeepSpeed: type and params.",
    "checkpoint": "Checkpoint settings (read with dict.get).",
}
DS_TOP_DOCS = {
    "train_batch_size": "Global batch size = micro batch x gradient accumulation x data-parallel size.",
    "train_micro_batch_size_per_gpu": "Batch size of one step on one GPU.",
    "gradient_accumulation_steps": "Micro-steps per optimizer step.",
    "gradient_clipping": "Clip gradients to this global norm (0 disables).",
    "steps_per_print": "Log every N steps.",
    "wall_clock_breakdown": "Time the forward/backward/step phases.",
    "zero_allow_untested_optimizer": "Allow an optimizer ZeRO has not been tested with.",
    "communication_data_type": "dtype of gradient communication.",
    "prescale_gradients": "Scale gradients before all-reduce.",
    "gradient_predivide_factor": "Divide gradients by this before all-reduce.",
    "bfloat16": "Legacy name of bf16 (ignored when bf16 is present).",
    "msamp": "MS-AMP settings written by Accelerate.",
}


def _auto_paths() -> set:
    return set(D.TRANSFORMERS_AUTO_KEYS) | set(D.DEEPSPEED_NATIVE_AUTO)


def _f_value(f: "D.F", dotted: str) -> Schema:
    k = f.kind
    bounds: Schema = {}
    for attr, key in (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"), ("lt", "exclusiveMaximum")):
        v = getattr(f, attr)
        if v is not None:
            bounds[key] = v
    alts: List[Schema]
    if k == "bool":
        alts = [{"type": "boolean"}, {"enum": [0, 1]},
                {"type": "string", "pattern": r"^\s*" + _ci_enum_pattern(sorted(D._TRUE | D._FALSE))[1:-1]
                 + r"\s*$"}]
    elif k == "int":
        alts = [dict({"type": "integer"}, **bounds), {"type": "string", "pattern": INT_TEXT}]
        if not f.no_bool:
            alts.append({"type": "boolean"})
    elif k == "float":
        alts = [dict({"type": "number"}, **bounds), {"type": "string", "pattern": FLOAT_TEXT}]
    elif k == "str":
        alts = [{"type": "string"}]
    elif k in ("dict", "model"):
        alts = [{"$ref": f"#/definitions/{f.model}"}] if k == "model" and f.model in D.STRICT_BLOCKS \
            else [{"type": "object"}]
    elif k == "list":
        alts = [{"type": "array", "items": {"enum": list(f.choices)}} if f.choices else {"type": "array"}]
    elif k == "enum":
        ints = [c for c in f.choices if isinstance(c, int)]
        alts = [{"enum": list(f.choices)}]
        if ints:
            alts.append({"type": "string", "pattern": "^\\s*(" + "|".join(map(str, ints)) + ")\\s*$"})
    else:
        alts = [{}]
    if f.optional:
        alts.append(NULL)
    # plain deepspeed drops "auto" inside its pydantic blocks; Accelerate / the Trainer fill the
    # keys they know (an "auto" they cannot fill is a consumer-dependent validator error)
    alts.append({"const": "auto"})
    s: Schema = {"anyOf": alts}
    doc = []
    if f.default is not None and not isinstance(f.default, (dict, list)) or f.default == []:
        doc.append(f"Default: {json.dumps(f.default)}.")
        s["default"] = f.default
    if dotted in _auto_paths():
        doc.append('"auto" is filled by Accelerate / the Transformers Trainer.')
    if f.deprecated:
        doc.append(f"Deprecated: use {f.deprecated}.")
        s["deprecationMessage"] = f"Deprecated in deepspeed: use {f.deprecated}."
    if doc:
        s["description"] = " ".join(doc)
    return s


def _strict_definition(name: str) -> Schema:
    fields, path = D.STRICT_BLOCKS[name]
    dotted = ".".join(path)
    props: Dict[str, Schema] = {}
    for fname, f in fields.items():
        s = _f_value(f, f"{dotted}.{fname}")
        props[fname] = s
        if f.alias:
            a = dict(s)
            a["description"] = (f"Alias of {fname}. " + s.get("description", "")).strip()
            props[f.alias] = a
    if name == "zero_optimization":
        for k, why in D.REMOVED_ZERO.items():
            props[k] = {"description": f"Removed in deepspeed 0.19: {why}.", "not": {}}
    return {"type": "object", "description": DS_BLOCK_DOCS.get(name, ""), "properties": dict(sorted(props.items())),
            "additionalProperties": False}


def _top_value(key: str) -> Schema:
    if key in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
               "steps_per_print"):
        s: Schema = {"anyOf": [{"type": "integer"}, {"const": "auto"}]}
    elif key == "gradient_clipping":
        s = {"anyOf": [{"type": "number"}, {"const": "auto"}]}
    elif key == "gradient_predivide_factor":
        s = {"type": "number"}
    elif key in ("wall_clock_breakdown", "zero_allow_untested_optimizer", "prescale_gradients",
                 "zero_force_ds_cpu_optimizer", "memory_breakdown", "dump_state", "dataloader_drop_last"):
        s = {"type": "boolean"}
    else:
        s = {}
    doc = DS_TOP_DOCS.get(key)
    if doc:
        s["description"] = doc
    return s


def deepspeed_schema() -> Schema:
    defs = {name: _strict_definition(name) for name in D.STRICT_BLOCKS}
    props: Dict[str, Schema] = {}
    for key in D.TOP_LEVEL_KEYS + D.TOP_LEVEL_TOLERATED:
        props[key] = _top_value(key)
    nested = {"offload_param", "offload_optimizer", "zenflow", "leaf_module", "timers_throughput"}
    for name, (_fields, path) in D.STRICT_BLOCKS.items():
        if name in nested or len(path) != 1:
            continue
        ref: Schema = {"$ref": f"#/definitions/{name}"}
        alts = [ref]
        if name == "zero_optimization":
            alts.append({"type": "boolean", "description": "Legacy form: true means stage 1."})
        if D.MAPPING_BLOCKS.get(name):
            alts.append(NULL)
        props[name] = {"description": DS_BLOCK_DOCS[name], "anyOf": alts}
    props["timers"] = {"description": "Timers.", "type": "object",
                       "properties": {"throughput": {"$ref": "#/definitions/timers_throughput"}}}
    for name, keys in D.LENIENT_BLOCKS.items():
        block: Schema = {"type": "object", "properties": {k: {} for k in keys}, "additionalProperties": True}
        if name == "optimizer":
            names = sorted(set(D.DS_OPTIMIZERS) | set(D.TORCH_OPTIMIZERS), key=lambda s: (s.lower(), s))
            block["properties"]["type"] = {
                "description": "DeepSpeed optimizer name (case-insensitive) or a torch.optim class name.",
                "anyOf": [{"enum": names}, {"type": "string", "pattern": _ci_enum_pattern(D.DS_OPTIMIZERS)}]}
            block["properties"]["params"] = {"type": "object"}
        if name == "scheduler":
            block["properties"]["type"] = {"description": "DeepSpeed scheduler name or a torch.optim.lr_scheduler "
                                                          "class name.",
                                           "enum": list(D.DS_SCHEDULERS + D.TORCH_SCHEDULERS)}
            block["properties"]["params"] = {"type": "object"}
        alts = [block]
        if D.MAPPING_BLOCKS.get(name):
            alts.append(NULL)
        props[name] = {"description": LENIENT_DOCS.get(name, ""), "anyOf": alts}
    for key, advice in D.REMOVED_TOP_LEVEL.items():
        props[key] = {"description": f"Removed in deepspeed 0.19 (the config is refused): {advice}.", "not": {}}
    return {
        "$schema": DRAFT,
        "$id": "deepspeed-config.schema.json",
        "title": "DeepSpeed config (ds_config.json)",
        "description": f"Generated from the validator's tables ({VERIFIED_AGAINST}) by {REGEN}; do not edit. "
                       "Pydantic blocks refuse unknown keys; other top-level keys are ignored by deepspeed "
                       f"(a validator warning). Run validate_backend_config.py for cross-key checks. Rules: {RULES_DOC}.",
        "type": "object",
        "properties": dict(sorted(props.items())),
        "additionalProperties": True,
        "definitions": dict(sorted(defs.items())),
    }


def render() -> Dict[str, str]:
    """{file name: JSON text} for every schema."""
    return {FILES["accelerate"]: json.dumps(accelerate_schema(), indent=2) + "\n",
            FILES["deepspeed"]: json.dumps(deepspeed_schema(), indent=2) + "\n"}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Generate the editor JSON Schemas from the validator's tables.")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"write them into {os.path.relpath(OUT_DIR)}")
    g.add_argument("--check", action="store_true", help="exit 1 if a committed schema is out of date")
    a = p.parse_args(argv)
    out = render()
    if a.write:
        os.makedirs(OUT_DIR, exist_ok=True)
        for name, text in out.items():
            with open(os.path.join(OUT_DIR, name), "w", encoding="utf-8") as f:
                f.write(text)
        return 0
    if a.check:
        stale = []
        for name, text in out.items():
            try:
                with open(os.path.join(OUT_DIR, name), encoding="utf-8") as f:
                    cur = f.read()
            except OSError:
                cur = ""
            if cur != text:
                stale.append(name)
        if stale:
            sys.stderr.write(f"out of date: {', '.join(stale)}; run: {REGEN}\n")
            return 1
        return 0
    sys.stdout.write(out[FILES["accelerate"]])
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        from backend_validator import schemas as _s  # type: ignore
        sys.exit(_s.main())
    sys.exit(main())
