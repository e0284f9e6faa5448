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

# commands/config/config_args.py: BaseConfig + ClusterConfig / SageMakerConfig fields
BASE_FIELDS = ("compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug")
CLUSTER_FIELDS = BASE_FIELDS + (
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip", "main_process_port",
    "rdzv_backend", "same_network", "main_training_function", "enable_cpu_affinity", "fp8_config",
    "deepspeed_config", "fsdp_config", "parallelism_config", "megatron_lm_config", "mpirun_config",
    "downcast_bf16", "tpu_name", "tpu_zone", "tpu_use_cluster", "tpu_use_sudo", "command_file", "commands",
    "tpu_vm", "tpu_env", "dynamo_config")
SAGEMAKER_FIELDS = BASE_FIELDS + (
    "ec2_instance_type", "iam_role_name", "image_uri", "profile", "region", "num_machines", "gpu_ids",
    "base_job_name", "pytorch_version", "transformers_version", "py_version", "sagemaker_inputs_file",
    "sagemaker_metrics_file", "additional_args", "dynamo_config", "enable_cpu_affinity")
SAGEMAKER_REQUIRED = ("ec2_instance_type", "iam_role_name")
# BaseConfig.process_config converts (then deletes) these legacy top-level keys
LEGACY_TOP_LEVEL = ("fp16", "dynamo_backend")
REMOVED_TOP_LEVEL = {"ipex_config": "removed in accelerate 1.13.0 (IPEX support dropped)"}

COMPUTE_ENVIRONMENTS = ("LOCAL_MACHINE", "AMAZON_SAGEMAKER")
DISTRIBUTED_TYPES = ("NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA",
                     "MULTI_XPU", "DEEPSPEED", "FSDP", "XLA", "MEGATRON_LM", "MULTI_HPU", "MULTI_NEURON")
SAGEMAKER_DISTRIBUTED_TYPES = ("NO", "DATA_PARALLEL", "MODEL_PARALLEL")
# _validate_launch_command: distributed types that select the torchrun launcher via --multi_gpu
MULTI_DEVICE_TYPES = ("MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU",
                      "MULTI_HPU", "MULTI_NEURON")
PRECISIONS = ("no", "fp16", "bf16", "fp8")
DYNAMO_BACKENDS = ("NO", "EAGER", "AOT_EAGER", "INDUCTOR", "AOT_TS_NVFUSER", "NVPRIMS_NVFUSER", "CUDAGRAPHS",
                   "OFI", "FX2TRT", "ONNXRT", "TENSORRT", "AOT_TORCHXLA_TRACE_ONCE", "TORCHXLA_TRACE_ONCE", "TVM",
                   "HPU_BACKEND", "NEURON")
DYNAMO_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")  # torch 2.13 inductor
FP8_BACKENDS = ("NO", "TE", "MSAMP", "AO")  # utils/dataclasses.py::FP8BackendType, exact case
FP8_FORMATS = ("HYBRID", "E4M3", "E5M2")
FP8_AMAX_ALGOS = ("max", "most_recent")
FP8_OPT_LEVELS = ("O1", "O2")
TRUE_WORDS = ("y", "yes", "t", "true", "on", "1")  # utils/environment.py::str_to_bool
FALSE_WORDS = ("n", "no", "f", "false", "off", "0")

FSDP_SHARDING_STRATEGY = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
FSDP_AUTO_WRAP_POLICY = ("TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP")
FSDP_BACKWARD_PREFETCH = ("BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH")
FSDP_STATE_DICT_TYPE = ("FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT")
# fsdp_config keys the launcher maps (commands/launch.py parser, utils/launch.py::prepare_multi_gpu_env)
FSDP_KEYS = ("fsdp_version", "fsdp_sharding_strategy", "fsdp_reshard_after_forward", "fsdp_offload_params",
             "fsdp_min_num_params", "fsdp_auto_wrap_policy", "fsdp_transformer_layer_cls_to_wrap",
             "fsdp_backward_prefetch", "fsdp_state_dict_type", "fsdp_forward_prefetch", "fsdp_use_orig_params",
             "fsdp_cpu_ram_efficient_loading", "fsdp_sync_module_states", "fsdp_activation_checkpointing",
             "fsdp_activation_checkpointing_offload", "fsdp_ignored_modules")
# launch_command_parser defaults (exported even when the file omits the key)
FSDP_LAUNCH_DEFAULTS = {"fsdp_version": "1", "fsdp_offload_params": "false", "fsdp_min_num_params": 100000000,
                        "fsdp_sharding_strategy": "FULL_SHARD", "fsdp_reshard_after_forward": "true",
                        "fsdp_forward_prefetch": "false", "fsdp_use_orig_params": "true",
                        "fsdp_cpu_ram_efficient_loading": "true", "fsdp_sync_module_states": "true",
                        "fsdp_activation_checkpointing": "false", "fsdp_activation_checkpointing_offload": "false"}
# boolean keys the plugin parses with str_to_bool (per FSDP version)
FSDP_BOOL_KEYS_V1 = ("fsdp_offload_params", "fsdp_use_orig_params", "fsdp_sync_module_states",
                     "fsdp_forward_prefetch", "fsdp_activation_checkpointing",
                     "fsdp_activation_checkpointing_offload", "fsdp_cpu_ram_efficient_loading")
FSDP_BOOL_KEYS_V2 = ("fsdp_offload_params", "fsdp_activation_checkpointing",
                     "fsdp_activation_checkpointing_offload", "fsdp_cpu_ram_efficient_loading")
FSDP2_IGNORED = ("fsdp_sharding_strategy", "fsdp_forward_prefetch", "fsdp_use_orig_params",
                 "fsdp_sync_module_states", "fsdp_backward_prefetch")

DEEPSPEED_KEYS = ("deepspeed_config_file", "zero_stage", "offload_optimizer_device", "offload_param_device",
                  "offload_optimizer_nvme_path", "offload_param_nvme_path", "gradient_accumulation_steps",
                  "gradient_clipping", "zero3_save_16bit_model", "zero3_init_flag", "deepspeed_moe_layer_cls_names",
                  "deepspeed_multinode_launcher", "deepspeed_hostfile", "deepspeed_exclusion_filter",
                  "deepspeed_inclusion_filter")
# utils/dataclasses.py::DeepSpeedPlugin._deepspeed_config_checks (names after the env-var rewrite)
DS_FILE_EXCLUSIVE = ("gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
                     "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path",
                     "zero3_save_16bit_model", "mixed_precision")
DS_OFFLOAD_DEVICES = ("none", "cpu", "nvme")
DS_MULTINODE_LAUNCHERS = ("pdsh", "standard", "openmpi", "mvapich", "mpich", "nossh", "slurm")

PARALLELISM_KEYS = ("parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size",
                    "parallelism_config_tp_size", "parallelism_config_cp_size", "parallelism_config_cp_backend",
                    "parallelism_config_cp_comm_strategy", "parallelism_config_sp_size",
                    "parallelism_config_sp_backend", "parallelism_config_sp_seq_length",
                    "parallelism_config_sp_seq_length_is_variable", "parallelism_config_sp_attn_implementation")
PARALLELISM_SIZES = ("dp_replicate", "dp_shard", "tp", "cp", "sp")
SP_ATTN_BUILTIN = ("flash_attention_2", "flash_attention_3", "sdpa")

FP8_KEYS = ("fp8_backend", "fp8_use_autocast_during_eval", "fp8_margin", "fp8_interval", "fp8_format",
            "fp8_amax_history_len", "fp8_amax_compute_algo", "fp8_override_linear_precision", "fp8_opt_level",
            "fp8_enable_fsdp_float8_all_gather", "fp8_pad_inner_dim", "fp8_use_mxfp8_block_scaling")
# names `accelerate config` writes but no recipe reads (S4) -> the name the recipe reads
FP8_QUESTIONNAIRE_NAMES = {"fp8_amax_history_length": "fp8_amax_history_len",
                           "fp8_amax_compute_algorithm": "fp8_amax_compute_algo",
                           "fp8_optimization_level": "fp8_opt_level"}
DYNAMO_KEYS = ("dynamo_backend", "dynamo_mode", "dynamo_use_fullgraph", "dynamo_use_dynamic",
               "dynamo_use_regional_compilation")
MEGATRON_INT_KEYS = ("tp_degree", "pp_degree", "num_micro_batches", "recompute_num_layers",
                     "expert_model_parallel_size", "context_parallel_size", "expert_tensor_parallel_size",
                     "decoder_last_pipeline_num_layers")
MEGATRON_FLOAT_KEYS = ("gradient_clipping", "attention_dropout", "hidden_dropout")
MEGATRON_BOOL_KEYS = ("use_custom_fsdp", "no_load_optim", "eod_mask_loss", "no_save_optim", "optimizer_cpu_offload",
                      "overlap_cpu_optimizer_d2h_h2d", "use_precision_aware_optimizer", "recompute_activations",
                      "use_distributed_optimizer", "sequence_parallelism", "attention_backend",
                      "attention_softmax_in_fp32", "calculate_per_token_loss", "use_rotary_position_embeddings")
MEGATRON_STR_KEYS = ("recompute_granularity", "recompute_method")
MEGATRON_KEYS = tuple("megatron_lm_" + k for k in
                      MEGATRON_INT_KEYS + MEGATRON_FLOAT_KEYS + MEGATRON_BOOL_KEYS + MEGATRON_STR_KEYS)
MPIRUN_KEYS = ("mpirun_hostfile",)

# top-level scalars _validate_launch_command never copies (argparse default is not None)
LAUNCH_IGNORED_TOP_LEVEL = {"rdzv_backend": "static", "same_network": False, "enable_cpu_affinity": False,
                            "downcast_bf16": False, "tpu_use_sudo": False}
INT_TOP_LEVEL = ("num_processes", "num_machines", "machine_rank", "main_process_port")
# keys whose YAML value is meant to be a boolean (a YAML 1.1 yes/no there is intended)
BOOL_KEYS = {"use_cpu", "debug", "same_network", "enable_cpu_affinity", "downcast_bf16", "tpu_use_cluster",
             "tpu_use_sudo", "zero3_save_16bit_model", "zero3_init_flag",
             "parallelism_config_sp_seq_length_is_variable"} | set(FSDP_BOOL_KEYS_V1) | {
             "fp8_use_autocast_during_eval", "fp8_enable_fsdp_float8_all_gather", "fp8_pad_inner_dim",
             "fp8_use_mxfp8_block_scaling", "use_autocast_during_eval", "enable_fsdp_float8_all_gather",
             "pad_inner_dim", "use_mxfp8_block_scaling", "dynamo_use_fullgraph", "dynamo_use_dynamic",
             "dynamo_use_regional_compilation", "use_fullgraph", "use_dynamic", "use_regional_compilation",
             "offload_params", "use_orig_params", "sync_module_states", "forward_prefetch",
             "activation_checkpointing", "activation_checkpointing_offload", "cpu_ram_efficient_loading",
             "fp16"} | {"megatron_lm_" + k for k in MEGATRON_BOOL_KEYS}


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
