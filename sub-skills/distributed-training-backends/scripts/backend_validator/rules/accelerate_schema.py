"""Facts about accelerate 1.15.0 config files used by the accelerate_* rules.

Every name here was read from the installed package (paths relative to the
``accelerate`` package) and is checked against it by tests/validator:
``commands/config/config_args.py`` (dataclass fields), ``commands/launch.py``
(argparse defaults, the config->args merge), ``utils/launch.py`` (environment
preparation), ``utils/dataclasses.py`` (plugins, enums), ``utils/constants.py``.

The :class:`Effective` helper answers "what does the launcher do with this
file" the way ``_validate_launch_command`` + ``launch_command`` do, so every rule
reasons about the same merged view.
"""
from __future__ import annotations

from ..core import Doc

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Dict, Optional, Tuple

# The tables are data (accelerate_tables.json beside this package's modules, read by json's C scanner:
# compiled as Python code they were a tenth of the validator's compiling for an Accelerate config,
# benchmarks/bench_validator.py --instructions). "tuples" there are tuples here, "sets" sets, "dicts"
# dicts, each bound to its name in this module. Where each comes from (accelerate 1.15.0):
# BASE_FIELDS .. SAGEMAKER_REQUIRED: commands/config/config_args.py, BaseConfig + ClusterConfig /
#   SageMakerConfig fields (CLUSTER_FIELDS and SAGEMAKER_FIELDS start with BASE_FIELDS).
# LEGACY_TOP_LEVEL: BaseConfig.process_config converts (then deletes) these legacy top-level keys.
# MULTI_DEVICE_TYPES: _validate_launch_command, distributed types that select the torchrun launcher via
#   --multi_gpu.
# DYNAMO_MODES: torch 2.13 inductor. FP8_BACKENDS: utils/dataclasses.py::FP8BackendType, exact case.
# TRUE_WORDS / FALSE_WORDS: utils/environment.py::str_to_bool.
# FSDP_KEYS: fsdp_config keys the launcher maps (commands/launch.py parser,
#   utils/launch.py::prepare_multi_gpu_env).
# FSDP_LAUNCH_DEFAULTS: launch_command_parser defaults (exported even when the file omits the key).
# FSDP_BOOL_KEYS_V1 / _V2: boolean keys the plugin parses with str_to_bool (per FSDP version).
# DS_FILE_EXCLUSIVE: utils/dataclasses.py::DeepSpeedPlugin._deepspeed_config_checks (names after the
#   env-var rewrite).
# FP8_QUESTIONNAIRE_NAMES: names `accelerate config` writes but no recipe reads (S4) -> the name the
#   recipe reads.
# MEGATRON_KEYS: "megatron_lm_" + each of MEGATRON_INT/FLOAT/BOOL/STR_KEYS.
# LAUNCH_IGNORED_TOP_LEVEL: top-level scalars _validate_launch_command never copies (argparse default is
#   not None).
# BOOL_KEYS: keys whose YAML value is meant to be a boolean (a YAML 1.1 yes/no there is intended):
#   FSDP_BOOL_KEYS_V1, "megatron_lm_" + MEGATRON_BOOL_KEYS and the other boolean launch keys.
# tests/validator/test_schema_facts.py checks them against the installed accelerate.


def _tables():
    import os
    from ..data_file import read_data
    data = read_data(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                  "accelerate_tables.json"))
    out = {k: tuple(v) for k, v in data["tuples"].items()}
    out.update((k, set(v)) for k, v in data["sets"].items())
    out.update(data["dicts"])
    return out


globals().update(_tables())




def is_truth_word(v: Any) -> bool:
    """Would str_to_bool(str(v).lower()) accept what the launcher exports for v?"""
    return str(v).lower() in TRUE_WORDS + FALSE_WORDS


def truth(v: Any) -> Optional[bool]:
    s = str(v).lower()
    if s in TRUE_WORDS:
        return True
    if s in FALSE_WORDS:
        return False
    return None


def as_int(v: Any) -> Optional[int]:
    """int(str(v)) as the plugins do on the exported env string, or None."""
    if isinstance(v, bool):
        return None
    try:
        return int(str(v))
    except ValueError:
        return None


def prefixed(block: str, key: Any) -> Any:
    """The argparse name a nested key is copied to (commands/launch.py::_validate_launch_command)."""
    if not isinstance(key, str):
        return key
    if block == "fsdp_config" and not key.startswith("fsdp"):
        return "fsdp_" + key
    if block == "fp8_config" and not key.startswith("fp8"):
        return "fp8_" + key
    if block == "dynamo_config" and not key.startswith("dynamo_"):
        return "dynamo_" + key
    return key


class Effective:
    """The launcher's view of an Accelerate config (LOCAL_MACHINE: nested keys copied onto the
    argparse namespace with their prefixes, launch defaults for the rest)."""

    def __init__(self, doc: Doc) -> None:
        self.doc = doc
        data = doc.data if isinstance(doc.data, dict) else {}
        self.data = data
        self.ce = data.get("compute_environment", "LOCAL_MACHINE")
        self.sagemaker = self.ce != "LOCAL_MACHINE"
        self.dt = data.get("distributed_type")
        dt = self.dt if isinstance(self.dt, str) else None
        self.is_ds = dt == "DEEPSPEED"
        self.is_fsdp = dt == "FSDP"
        self.is_megatron = dt == "MEGATRON_LM"
        self.is_xla = dt == "XLA"
        self.is_multi = dt in MULTI_DEVICE_TYPES
        if self.sagemaker:
            self.launcher = "sagemaker"
        elif self.is_ds:
            self.launcher = "deepspeed"
        elif self.is_fsdp or self.is_megatron or self.is_multi:
            self.launcher = "torchrun"
        elif self.is_xla:
            self.launcher = "tpu"
        else:
            self.launcher = "simple"  # NO, MULTI_CPU, and non-string values (YAML NO -> False)
        # nested blocks, with the argparse names
        self.args: Dict[str, Tuple[Any, Tuple[Any, ...]]] = {}
        # BaseConfig.process_config: a legacy top-level dynamo_backend REPLACES dynamo_config
        self.dynamo_replaced = "dynamo_backend" in data
        for block in ("fsdp_config", "fp8_config", "dynamo_config", "deepspeed_config", "megatron_lm_config",
                      "mpirun_config", "parallelism_config"):
            b = data.get(block)
            if block == "dynamo_config" and self.dynamo_replaced:
                continue
            if isinstance(b, dict):
                for k, v in b.items():
                    self.args[prefixed(block, k)] = (v, (block, k))
        if self.dynamo_replaced:
            v = data["dynamo_backend"]
            if v != "NO":
                self.args["dynamo_backend"] = (v, ("dynamo_backend",))
        self.fsdp_version_raw = self.get("fsdp_version", "1")
        self.fsdp_version = as_int(self.fsdp_version_raw)
        mp = data.get("mixed_precision")
        if "mixed_precision" not in data and data.get("fp16"):
            mp = "fp16"
        self.mixed_precision = mp
        self.fp8 = isinstance(mp, str) and mp.lower() == "fp8"
        self.num_machines = data.get("num_machines", 1)
        self.num_processes = data.get("num_processes")

    def get(self, name: str, default: Any = None) -> Any:
        return self.args[name][0] if name in self.args else default

    def has(self, name: str) -> bool:
        return name in self.args

    def path(self, name: str) -> Tuple[Any, ...]:
        return self.args[name][1] if name in self.args else ()

    def fsdp_get(self, name: str) -> Any:
        """Value the FSDP launcher exports for name (file value, else the launch default)."""
        return self.get(name, FSDP_LAUNCH_DEFAULTS.get(name))

    def fp8_backend(self) -> Any:
        return self.get("fp8_backend")

    def multi_machine(self) -> bool:
        nm = self.num_machines
        return isinstance(nm, (int, float)) and not isinstance(nm, bool) and nm > 1

    def world_size(self) -> Optional[int]:
        n = self.num_processes
        if isinstance(n, int) and not isinstance(n, bool):
            return n
        if isinstance(n, str) and self.launcher in ("torchrun", "deepspeed"):
            return as_int(n)  # single node: passed to torchrun as text, which parses it
        return None

    def parallelism_sizes(self) -> Dict[str, Any]:
        return {s: self.get(f"parallelism_config_{s}_size", 1) for s in PARALLELISM_SIZES}

    def uses_parallelism(self) -> bool:
        pc = self.data.get("parallelism_config")
        return isinstance(pc, dict) and pc != {} and self.launcher in ("torchrun", "deepspeed")
