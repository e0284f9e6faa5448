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
# Removed in 0.19.x: any presence raises DeepSpeedConfigError
# (deepspeed/runtime/config.py::_reject_removed_config_keys)
# key -> replacement advice
REMOVED_TOP_LEVEL = {
    "nebula": "remove the block; checkpoints use the regular torch.save path (or the 'checkpoint' writer block)",
    "compression_training": "remove the block; the compression library is gone (quantize with an external tool)",
    "amp": "use \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true} or \"torch_autocast\" instead",
    "quantize_training": "remove the block (MoQ was removed)",
    "sparse_gradients": "remove the flag; embeddings built with sparse=True are still reduced sparsely",
    "eigenvalue": "remove the block (eigenvalue MoQ was removed)",
    "sparse_attention": "remove the block; use an attention kernel from your model library (e.g. SDPA / flash-attention)",
    "elasticity": "remove the block and set train_batch_size / train_micro_batch_size_per_gpu / "
                  "gradient_accumulation_steps directly",
    "graph_harvesting": "remove the option",
    "curriculum_learning": "move it to data_efficiency.data_sampling.curriculum_learning",
    "progressive_layer_drop": "remove the block",
}
REMOVED_ZERO = {
    "mics_shard_size": "remove it (MiCS was removed); use zero_hpz_partition_size for hierarchical partitioning",
    "mics_hierarchical_params_gather": "remove it (MiCS was removed)",
    "zeropp_loco_param": "remove it to use standard ZeRO++ quantized gradients",
}
# Optimizer types removed (deepspeed/runtime/engine.py::_configure_basic_optimizer raises
# "... is not a supported DeepSpeed Optimizer"); compared lower-cased.
REMOVED_OPTIMIZERS = {
    "onebitadam": "use \"Adam\" / \"AdamW\" (1-bit Adam was removed in deepspeed 0.19)",
    "zerooneadam": "use \"Adam\" / \"AdamW\" (0/1 Adam was removed in deepspeed 0.19)",
    "onebitlamb": "use \"Lamb\" (1-bit LAMB was removed in deepspeed 0.19)",
}

# --------------------------------------------------------------------------
# Optimizers / schedulers (deepspeed/runtime/engine.py::_configure_basic_optimizer,
# deepspeed/runtime/config.py DEEPSPEED_OPTIMIZERS, runtime/zero/utils.py::ZERO_SUPPORTED_OPTIMIZERS)
DS_OPTIMIZERS = ("adagrad", "adam", "adamw", "lamb", "lion", "muadam", "muadamw", "musgd", "muon")
# torch.optim attributes accepted (case-sensitive) when the lower-cased name is not a DS one.
TORCH_OPTIMIZERS = ("ASGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "Muon",
                    "NAdam", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam")
# Config optimizer types that ZeRO accepts without zero_allow_untested_optimizer
# (they build an optimizer class listed in ZERO_SUPPORTED_OPTIMIZERS).
ZERO_TESTED_OPTIMIZERS = ("adam", "adamw", "adagrad", "lion", "muon")
DS_SCHEDULERS = ("LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR")
TORCH_SCHEDULERS = ("ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
                    "CyclicLR", "ExponentialLR", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR",
                    "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR", "LRScheduler")
# Constructor keyword arguments of the DeepSpeed schedulers (runtime/lr_schedules.py), minus optimizer.
SCHEDULER_PARAMS = {
    "WarmupLR": ("warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "last_batch_iteration"),
    "WarmupDecayLR": ("total_num_steps", "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type",
                      "last_batch_iteration"),
    "WarmupCosineLR": ("total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio", "warmup_type",
                       "last_batch_iteration"),
    "OneCycle": ("cycle_min_lr", "cycle_max_lr", "decay_lr_rate", "cycle_first_step_size", "cycle_second_step_size",
                 "cycle_first_stair_count", "cycle_second_stair_count", "decay_step_size", "cycle_momentum",
                 "cycle_min_mom", "cycle_max_mom", "decay_mom_rate", "last_batch_iteration"),
    "LRRangeTest": ("lr_range_test_min_lr", "lr_range_test_step_size", "lr_range_test_step_rate",
                    "lr_range_test_staircase", "last_batch_iteration"),
}
SCHEDULER_REQUIRED = {"WarmupDecayLR": ("total_num_steps",), "WarmupCosineLR": ("total_num_steps",),
                      "OneCycle": ("cycle_min_lr", "cycle_max_lr")}

# optimizer.params accepted per config type: the union of the constructor keywords of every
# class deepspeed may build for it (engine.py::_configure_basic_optimizer /
# get_optimizer_configuration) plus the keys deepspeed pops first. A key outside the union is
# a TypeError ("unexpected keyword argument") whichever class is chosen.
_ADAM_POPPED = ("adam_w_mode", "torch_adam", "fp32_optimizer_states", "foreach")
OPTIMIZER_CLASSES = {  # config type (lower-cased DS name, or exact torch name) -> classes
    "adam": ("deepspeed.ops.adam.FusedAdam", "deepspeed.ops.adam.DeepSpeedCPUAdam", "torch.optim.Adam",
             "torch.optim.AdamW"),
    "adamw": ("deepspeed.ops.adam.FusedAdam", "deepspeed.ops.adam.DeepSpeedCPUAdam", "torch.optim.Adam",
              "torch.optim.AdamW"),
    "adagrad": ("deepspeed.ops.adagrad.DeepSpeedCPUAdagrad", "torch.optim.Adagrad"),
    "lion": ("deepspeed.ops.lion.FusedLion", "deepspeed.ops.lion.DeepSpeedCPULion"),
    "lamb": ("deepspeed.ops.lamb.FusedLamb",),
}
OPTIMIZER_PARAMS = {
    "adam": ("lr", "bias_correction", "betas", "eps", "adam_w_mode", "weight_decay", "amsgrad", "set_grad_none",
             "adamw_mode", "fp32_optimizer_states", "foreach", "maximize", "capturable", "differentiable", "fused",
             "decoupled_weight_decay", "torch_adam"),
    "adagrad": ("lr", "eps", "weight_decay", "amsgrad", "fp32_optimizer_states", "lr_decay",
                "initial_accumulator_value", "foreach", "maximize", "differentiable", "fused"),
    "lion": ("lr", "betas", "weight_decay", "set_grad_none", "fp32_optimizer_states"),
    "lamb": ("lr", "bias_correction", "betas", "eps", "eps_inside_sqrt", "weight_decay", "max_grad_norm",
             "max_coeff", "min_coeff", "amsgrad"),
    "SGD": ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach", "differentiable",
            "fused"),
    "RMSprop": ("lr", "alpha", "eps", "weight_decay", "momentum", "centered", "capturable", "foreach", "maximize",
                "differentiable"),
}
OPTIMIZER_PARAMS["adamw"] = OPTIMIZER_PARAMS["adam"]
OPTIMIZER_CLASSES.update({"SGD": ("torch.optim.SGD",), "RMSprop": ("torch.optim.RMSprop",)})


# --------------------------------------------------------------------------
# Strict (pydantic, extra="forbid") blocks: field -> spec
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


I, B = "int", "bool"
ZERO = {
    "stage": F("enum", 0, choices=(0, 1, 2, 3)),
    "contiguous_gradients": F(B, True),
    "reduce_scatter": F(B, True),
    "reduce_bucket_size": F(I, 500_000_000, gt=0),
    "use_multi_rank_bucket_allreduce": F(B, True),
    "allgather_partitions": F(B, True),
    "allgather_bucket_size": F(I, 500_000_000, ge=0),
    "overlap_comm": F(B, None, optional=True),
    "compute_grad_norm": F(B, True),
    "load_from_fp32_weights": F(B, True),
    "elastic_checkpoint": F(B, False),
    "offload_param": F("model", None, optional=True, model="offload_param"),
    "offload_optimizer": F("model", None, optional=True, model="offload_optimizer"),
    "zenflow": F("model", None, optional=True, model="zenflow"),
    "sub_group_size": F(I, 1_000_000_000, ge=0),
    "cpu_offload_param": F(B, None, optional=True, deprecated="offload_param"),
    "cpu_offload_use_pin_memory": F(B, None, optional=True, deprecated="offload_param or offload_optimizer"),
    "cpu_offload": F(B, None, optional=True, deprecated="offload_optimizer"),
    "prefetch_bucket_size": F(I, 50_000_000, ge=0, alias="stage3_prefetch_bucket_size"),
    "param_persistence_threshold": F(I, 100_000, ge=0, alias="stage3_param_persistence_threshold"),
    "model_persistence_threshold": F(I, None, ge=0, alias="stage3_model_persistence_threshold"),
    "max_live_parameters": F(I, 1_000_000_000, ge=0, alias="stage3_max_live_parameters"),
    "max_reuse_distance": F(I, 1_000_000_000, ge=0, alias="stage3_max_reuse_distance"),
    "gather_16bit_weights_on_model_save": F(B, False, alias="stage3_gather_16bit_weights_on_model_save"),
    "module_granularity_threshold": F(I, 0, alias="stage3_module_granularity_threshold"),
    "use_all_reduce_for_fetch_params": F(B, False, alias="stage3_use_all_reduce_for_fetch_params"),
    "allgather_sequential": F(B, False, alias="stage3_allgather_sequential"),
    "stage3_gather_fp16_weights_on_model_save": F(B, False, deprecated="gather_16bit_weights_on_model_save"),
    "ignore_unused_parameters": F(B, True),
    "legacy_stage1": F(B, False),
    "round_robin_gradients": F(B, False),
    "parameter_alignment": F(B, False),
    "zero_hpz_partition_size": F(I, 1, ge=0),
    "zero_quantized_weights": F(B, False),
    "zero_quantized_nontrainable_weights": F(B, False),
    "zero_quantized_gradients": F(B, False),
    "memory_efficient_linear": F(B, True),
    "pipeline_loading_checkpoint": F(B, False),
    "override_module_apply": F(B, True),
    "log_trace_cache_warnings": F(B, False),
    "enable_sanity_checks": F(B, False),
    "save_muon_momentum_buffer_in_memory": F(B, False),
    "leaf_module": F("model", None, model="leaf_module"),
}
ZENFLOW = {
    "topk_ratio": F("float", 0.1, gt=0.0, lt=1.0),
    "select_strategy": F("str", "auto"),
    "select_interval": F("any", "auto"),
    "update_interval": F("any", "auto"),
    "overlap_step": F(B, False),
    "offload": F(B, False),
    "auto_ratio": F("float", 0.99, ge=0.0, le=1.0),
    "full_warm_up_rounds": F(I, 0),
    "pt_reserved_cores_perc": F("float", 0.5, ge=0.0, le=1.0),
    "steps_per_epoch": F(I, None, optional=True),
}
LEAF_MODULE = {"classes": F("list"), "names": F("list"), "name_suffixes": F("list")}
TIMERS_THROUGHPUT = {"enabled": F(B, True), "synchronized": F(B, True)}
OFFLOAD_PARAM = {
    "device": F("enum", "none", choices=DEVICES),
    "nvme_path": F("str", None, optional=True),
    "buffer_count": F(I, 5, ge=0),
    "buffer_size": F(I, 100_000_000, ge=0),
    "max_in_cpu": F(I, 1_000_000_000, ge=0),
    "pin_memory": F(B, True),
}
OFFLOAD_OPTIMIZER = {
    "device": F("enum", "none", choices=DEVICES),
    "nvme_path": F("str", None, optional=True),
    "buffer_count": F(I, 4, ge=0),
    "pin_memory": F(B, True),
    "pipeline_read": F(B, False),
    "pipeline_write": F(B, False),
    "fast_init": F(B, False),
    "ratio": F("float", 1.0, ge=0.0, le=1.0),
    "super_offload": F(B, False),
    "cpuadam_cores_perc": F("float", 0.8, ge=0.0, le=1.0),
}
FP16 = {
    "enabled": F(B, False),
    "auto_cast": F(B, False),
    "loss_scale": F("float", 0.0, ge=0.0, no_bool=True),
    "initial_scale_power": F(I, 16),
    "loss_scale_window": F(I, 1000, no_bool=True),
    "hysteresis": F(I, 2),
    "consecutive_hysteresis": F(B, False),
    "min_loss_scale": F(I, 1, no_bool=True),
    "fp16_master_weights_and_grads": F(B, False),
}
BF16 = {
    "enabled": F(B, False),
    "immediate_grad_update": F(B, False),
    "check_grad_overflow": F(B, True),
    "bf16_master_weights_and_grads": F(B, False),
    "bf16_optimizer_states": F(B, False),
}
_S = "str"
TENSORBOARD = {"enabled": F(B, False), "output_path": F(_S, ""), "job_name": F(_S, "DeepSpeedJobName")}
CSV_MONITOR = dict(TENSORBOARD)
WANDB = {"enabled": F(B, False), "group": F(_S, None, optional=True), "team": F(_S, None, optional=True),
         "project": F(_S, "deepspeed")}
COMET = {"enabled": F(B, False), "samples_log_interval": F(I, 100), "project": F(_S, None, optional=True),
         "workspace": F(_S, None, optional=True), "api_key": F(_S, None, optional=True),
         "experiment_name": F(_S, None, optional=True), "experiment_key": F(_S, None, optional=True),
         "online": F(B, None, optional=True), "mode": F(_S, None, optional=True)}
COMMS_LOGGER = {"enabled": F(B, False), "prof_all": F(B, True), "prof_ops": F("list", []), "verbose": F(B, False),
                "debug": F(B, False)}
COMPILE = {k: F(B, False) for k in (
    "deepcompile", "autoep_non_moe", "free_activation", "offload_activation", "offload_opt_states",
    "symmetric_memory", "debug_log", "offload_parameters", "sync_before_reduce", "sync_after_reduce",
    "sync_before_allgather", "sync_after_allgather", "keep_all_input_tensors")}
COMPILE.update({"free_activation_threshold": F(I, 10485760), "offload_activation_pin_memory": F(B, True),
                "double_buffer": F(B, True), "keep_int_input_tensors": F(B, True),
                "passes": F("list", None, optional=True, choices=("z1", "z3", "autosp", "autotp"))})
HYBRID_ENGINE = {"enabled": F(B, False), "max_out_tokens": F(I, 512, gt=0), "inference_tp_size": F(I, 1),
                 "release_inference_cache": F(B, False), "pin_parameters": F(B, True),
                 "tp_gather_partition_size": F(I, 8), "enable_cuda_graph": F(B, False)}
TENSOR_PARALLEL = {"dtype": F("any"), "autotp_size": F(I, 0), "tp_overlap_comm": F(B, False),
                   "vocab_parallel_lm_head": F(B, None, optional=True),
                   "vocab_parallel_ce_backend": F("enum", "torch", choices=("torch", "liger")),
                   "tensor_parallel": F("dict", {}, alias="tp"), "injection_policy_tuple": F("any"),
                   "partition_config": F("dict", None, optional=True), "preset_model": F(_S, None, optional=True),
                   "keep_module_on_host": F(B, False), "replace_with_kernel_inject": F(B, False, alias="kernel_inject")}
WEIGHT_QUANTIZATION = {"enabled": F(B, True), "num_bits": F(I, 8), "q_type": F("any"), "q_groups": F(I, 1),
                       "quantized_initialization": F("dict", {}), "post_init_quant": F("dict", {})}

# block name -> (fields, path in the config)
STRICT_BLOCKS: Dict[str, Tuple[Dict[str, F], Tuple[str, ...]]] = {
    "zero_optimization": (ZERO, ("zero_optimization",)),
    "offload_param": (OFFLOAD_PARAM, ("zero_optimization", "offload_param")),
    "offload_optimizer": (OFFLOAD_OPTIMIZER, ("zero_optimization", "offload_optimizer")),
    "zenflow": (ZENFLOW, ("zero_optimization", "zenflow")),
    "leaf_module": (LEAF_MODULE, ("zero_optimization", "leaf_module")),
    "timers_throughput": (TIMERS_THROUGHPUT, ("timers", "throughput")),
    "fp16": (FP16, ("fp16",)),
    "bf16": (BF16, ("bf16",)),
    "tensorboard": (TENSORBOARD, ("tensorboard",)),
    "wandb": (WANDB, ("wandb",)),
    "csv_monitor": (CSV_MONITOR, ("csv_monitor",)),
    "comet": (COMET, ("comet",)),
    "comms_logger": (COMMS_LOGGER, ("comms_logger",)),
    "compile": (COMPILE, ("compile",)),
    "hybrid_engine": (HYBRID_ENGINE, ("hybrid_engine",)),
    "tensor_parallel": (TENSOR_PARALLEL, ("tensor_parallel",)),
    "weight_quantization": (WEIGHT_QUANTIZATION, ("weight_quantization",)),
}

# Top-level keys DeepSpeed 0.19.8 reads (everything else is silently ignored).
TOP_LEVEL_KEYS = (
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "managed_gradient_accumulation", "steps_per_print", "dump_state", "disable_python_gc", "disable_allgather",
    "communication_data_type", "seq_parallel_communication_data_type", "prescale_gradients",
    "gradient_predivide_factor", "gradient_allreduce_op", "zero_optimization", "activation_checkpointing",
    "comms_logger", "tensorboard", "wandb", "csv_monitor", "comet", "gradient_clipping", "fp16", "bf16", "bfloat16",
    "torch_autocast", "optimizer", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "scheduler",
    "flops_profiler", "wall_clock_breakdown", "memory_breakdown", "autotuning", "use_data_before_expert_parallelism",
    "hybrid_engine", "pipeline", "data_efficiency", "checkpoint", "data_types", "aio", "dataloader_drop_last",
    "log_level", "datastates_ckpt", "weight_quantization", "compile", "timers", "tensor_parallel",
    "expert_parallel", "vocabulary_size", "sequence_parallel_size", "zenflow",
    # written by the consumers themselves
    "msamp",
)
# Keys that only the launcher / legacy tooling reads, harmless at top level.
TOP_LEVEL_TOLERATED = ("session_params",)

# Keys of the lenient (.get) blocks that 0.19.8 reads; other keys are ignored silently.
LENIENT_BLOCKS = {
    "activation_checkpointing": ("partition_activations", "contiguous_memory_optimization", "cpu_checkpointing",
                                 "number_checkpoints", "synchronize_checkpoint_boundary", "profile"),
    "flops_profiler": ("enabled", "recompute_fwd_factor", "profile_step", "module_depth", "top_modules",
                       "detailed", "output_file"),
    "aio": ("block_size", "queue_depth", "intra_op_parallelism", "single_submit", "overlap_events", "use_gds"),
    "torch_autocast": ("enabled", "dtype", "lower_precision_safe_modules"),
    "data_types": ("grad_accum_dtype", "param_dtype", "buffer_dtype", "keep_in_fp32_modules"),
    "optimizer": ("type", "params", "legacy_fusion"),
    "scheduler": ("type", "params"),
    "checkpoint": ("tag_validation", "load_universal", "use_node_local_storage", "parallel_write",
                   "checkpoint_serialization", "writer"),
}

# Blocks deepspeed reads as mappings (``param_dict[key].get`` / ``Model(**param_dict[key])``):
# any other value fails at config parse. True here = null is accepted (treated as absent).
MAPPING_BLOCKS = {
    "zero_optimization": False, "fp16": False, "bf16": True, "bfloat16": False, "tensorboard": False,
    "wandb": False, "csv_monitor": False, "comet": False, "comms_logger": False, "compile": False,
    "hybrid_engine": False, "tensor_parallel": False, "weight_quantization": False, "checkpoint": False,
    "activation_checkpointing": False, "data_types": False, "pipeline": False, "flops_profiler": False,
    "torch_autocast": False, "data_efficiency": False, "autotuning": False, "aio": True,
    "expert_parallel": True, "optimizer": False, "scheduler": False,
}

# --------------------------------------------------------------------------
# "auto" handling
# Keys DeepSpeedPlugin.__post_init__ overwrites whatever the file says, before
# Accelerator._prepare_deepspeed looks for "auto" (deepspeed_config_process -> fill_match raises on an
# "auto" it has no value for): `deepspeed_config["steps_per_print"] = float("inf")`, unconditionally,
# for a file or dict (hf_ds_config) and for the config the plugin builds. The Trainer hands its
# HfTrainerDeepSpeedConfig (a subclass of accelerate's HfDeepSpeedConfig) to the same plugin in
# TrainingArguments.__post_init__, so "auto" there is replaced for both consumers
# (tests/validator_ds/test_plugin_overwrites.py runs the plugin).
PLUGIN_OVERWRITTEN_KEYS = ("steps_per_print",)
# Keys Accelerate 1.15.0 fills (DeepSpeedPlugin.__post_init__ / set_mixed_precision /
# Accelerator._prepare_deepspeed); any other "auto" leaf raises ValueError there.
ACCELERATE_AUTO_KEYS = PLUGIN_OVERWRITTEN_KEYS + (
    "gradient_accumulation_steps", "gradient_clipping", "zero_optimization.stage",
    "zero_optimization.offload_optimizer.device", "zero_optimization.offload_param.device",
    "zero_optimization.offload_param.nvme_path", "zero_optimization.offload_optimizer.nvme_path",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save", "fp16.enabled", "bf16.enabled",
    "train_micro_batch_size_per_gpu", "train_batch_size", "zero_optimization.reduce_bucket_size",
    "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.stage3_param_persistence_threshold",
    "optimizer.params.lr", "optimizer.params.weight_decay", "scheduler.params.warmup_min_lr",
    "scheduler.params.warmup_max_lr", "scheduler.params.warmup_num_steps", "scheduler.params.total_num_steps",
)
# The Trainer (transformers/integrations/deepspeed.py::HfTrainerDeepSpeedConfig) fills these
# as well, then hands the dict to Accelerate.
TRANSFORMERS_EXTRA_AUTO_KEYS = ("optimizer.params.betas", "optimizer.params.eps")
TRANSFORMERS_AUTO_KEYS = ACCELERATE_AUTO_KEYS + TRANSFORMERS_EXTRA_AUTO_KEYS
# Values the Trainer compares with TrainingArguments (must be numbers / bools, not strings).
TRANSFORMERS_MATCHED_KEYS = (
    "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "gradient_clipping",
    "optimizer.params.lr", "optimizer.params.eps", "optimizer.params.weight_decay",
    "scheduler.params.warmup_max_lr", "scheduler.params.total_num_steps", "scheduler.params.warmup_num_steps",
    "fp16.enabled", "bf16.enabled",
)

# Accelerate's own (non-DeepSpeed) top-level config keys: a JSON with these is an Accelerate config.
_ACCELERATE_MARKERS = ACCELERATE_MARKERS  # core.py: the engine tells an Accelerate config without this module
_DS_MARKERS = ("zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu",
               "gradient_accumulation_steps", "fp16", "bf16", "bfloat16", "optimizer", "scheduler",
               "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "zero_allow_untested_optimizer",
               "activation_checkpointing", "flops_profiler", "communication_data_type", "prescale_gradients",
               "zero_force_ds_cpu_optimizer", "data_types", "torch_autocast", "comms_logger", "tensorboard",
               "wandb", "csv_monitor", "aio") + tuple(REMOVED_TOP_LEVEL)


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


