"""Reviewer set: DeepSpeed configs written from deepspeed 0.19.8's sources (runtime/config.py,
runtime/zero/config.py, offload_config.py, engine.py, precision/monitor/comms/compile configs,
profiling/config.py, swap_tensor/aio_config.py, lr_schedules.py) and from published HF/DeepSpeed
example configs, valid and defective, for all three consumers and for Accelerate YAML +
deepspeed_config_file pairs. test_ds_review.py runs every one through the validator and the real
consumer (tests/oracle/deepspeed_oracle.py, tests/oracle/accelerate_oracle.py) and requires the
same verdict.

STANDALONE: (id, json text, consumer, world size or None). Ids: v-* valid, d-*/r-* defective or
probing (the oracle decides), so the id says what the author expected, not the verdict.
PAIRS: (id, yaml text, json text or None, json file name, "cwd" | "yamldir") - "yamldir" puts
both files in a sub-folder of the launch directory.
"""
from __future__ import annotations

import copy
import json

J = json.dumps
AD = {"type": "AdamW", "params": {"lr": 3e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}}
HF_Z3 = {
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
  "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
  "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
     "offload_param": {"device": "cpu", "pin_memory": True}, "overlap_comm": True, "contiguous_gradients": True,
     "sub_group_size": 1e9, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
     "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
     "stage3_gather_16bit_weights_on_model_save": True},
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
  "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False}
HF_Z2 = {
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto", "total_num_steps": "auto"}},
  "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}, "allgather_partitions": True,
     "allgather_bucket_size": 2e8, "overlap_comm": True, "reduce_scatter": True, "reduce_bucket_size": 2e8, "contiguous_gradients": True},
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"}

def cp(d, **kw):
    d = copy.deepcopy(d); d.update(kw); return d
def z(d, **kw):
    d = copy.deepcopy(d); d["zero_optimization"].update(kw); return d
def rm(d, *path):
    d = copy.deepcopy(d); p = d
    for k in path[:-1]: p = p[k]
    del p[path[-1]]; return d

PLAIN = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
         "optimizer": AD, "bf16": {"enabled": True}, "zero_optimization": {"stage": 2, "overlap_comm": True,
         "contiguous_gradients": True, "reduce_bucket_size": 500000000, "allgather_bucket_size": 500000000},
         "gradient_clipping": 1.0, "steps_per_print": 100}
FP16 = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "optimizer": AD,
        "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 12, "loss_scale_window": 500,
                 "hysteresis": 2, "consecutive_hysteresis": False, "min_loss_scale": 1},
        "zero_optimization": {"stage": 1}}
Z3 = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8, "bf16": {"enabled": True}, "optimizer": AD,
      "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 1000, "warmup_num_steps": 50}},
      "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True, "sub_group_size": 1000000000,
        "reduce_bucket_size": 16777216, "stage3_prefetch_bucket_size": 15099494, "stage3_param_persistence_threshold": 40960,
        "stage3_max_live_parameters": 1000000000, "stage3_max_reuse_distance": 1000000000,
        "stage3_gather_16bit_weights_on_model_save": True}}
STANDALONE = []


def add(i, d, cons, ws=None, raw=None):
    STANDALONE.append((i, raw if raw is not None else J(d, indent=2), cons, ws))

# ---------- valid ----------
add("v-plain-w4", PLAIN, "deepspeed", 4)
add("v-plain-w4-acc", PLAIN, "accelerate", 4)
add("v-fp16-z1", FP16, "deepspeed", 2)
add("v-z3", Z3, "deepspeed", 8)
add("v-hf-z3-tf", HF_Z3, "transformers", None)
add("v-hf-z3-acc", HF_Z3, "accelerate", None)
add("v-hf-z2-tf", HF_Z2, "transformers", 2)
add("v-hf-z2-acc", HF_Z2, "accelerate", 2)
add("v-monitors", cp(PLAIN, tensorboard={"enabled": True, "output_path": "logs/", "job_name": "run1"},
    wandb={"enabled": False, "project": "p", "team": "t", "group": "g"}, csv_monitor={"enabled": True, "output_path": "csv/", "job_name": "j"}), "deepspeed", 4)
add("v-comms-logger", cp(PLAIN, comms_logger={"enabled": True, "verbose": False, "prof_all": True, "debug": False, "prof_ops": ["all_reduce"]}), "deepspeed", 4)
add("v-flops", cp(PLAIN, flops_profiler={"enabled": True, "profile_step": 1, "module_depth": -1, "top_modules": 1, "detailed": True, "output_file": None}), "deepspeed", 4)
add("v-actckpt", cp(PLAIN, activation_checkpointing={"partition_activations": False, "cpu_checkpointing": False, "contiguous_memory_optimization": False, "number_checkpoints": None, "synchronize_checkpoint_boundary": False, "profile": False}), "deepspeed", 4)
add("v-aio-nvme", cp(Z3, zero_optimization=dict(Z3["zero_optimization"], offload_optimizer={"device": "nvme", "nvme_path": "/local_nvme", "pin_memory": True, "buffer_count": 4, "fast_init": False},
    offload_param={"device": "nvme", "nvme_path": "/local_nvme", "pin_memory": True, "buffer_count": 5, "buffer_size": 1e8, "max_in_cpu": 1e9}),
    aio={"block_size": 1048576, "queue_depth": 8, "thread_count": 1, "single_submit": False, "overlap_events": True}), "deepspeed", 8)
add("v-compile", cp(PLAIN, compile={"deepcompile": False, "offload_activation": False}), "deepspeed", 4)
add("v-grad-accum-dtype", cp(PLAIN, zero_optimization={"stage": 1}, data_types={"grad_accum_dtype": "fp32"}), "deepspeed", 4)
add("v-lamb-fp16", cp(FP16, optimizer={"type": "Lamb", "params": {"lr": 1e-3, "max_coeff": 0.3, "min_coeff": 0.01}}, zero_optimization={"stage": 0}), "deepspeed", 1)
add("v-onecycle", cp(PLAIN, scheduler={"type": "OneCycle", "params": {"cycle_min_lr": 1e-5, "cycle_max_lr": 1e-3, "cycle_first_step_size": 100, "decay_lr_rate": 0.001}}), "deepspeed", 4)
add("v-lrrange", cp(PLAIN, scheduler={"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 1e-5, "lr_range_test_step_size": 10, "lr_range_test_step_rate": 1.0, "lr_range_test_staircase": False}}), "deepspeed", 4)
add("v-checkpoint", cp(PLAIN, checkpoint={"tag_validation": "Warn", "load_universal": False, "use_node_local_storage": True, "parallel_write": {"pipeline_stage": False}}), "deepspeed", 4)
add("v-hjson-ds", None, "deepspeed", 1, raw='{\n  // ZeRO-1 with comments\n  "train_batch_size": 8,\n  "zero_optimization": {"stage": 1,},\n  "bf16": {"enabled": true},\n}\n')
add("v-tbs-only-w8", {"train_batch_size": 64, "optimizer": AD, "zero_optimization": {"stage": 2}}, "deepspeed", 8)
add("v-tbs-gas-w3", {"train_batch_size": 24, "gradient_accumulation_steps": 4, "optimizer": AD}, "deepspeed", 3)
add("v-autocast", cp(PLAIN, bf16={"enabled": False}, torch_autocast={"enabled": True, "dtype": "bfloat16", "lower_precision_safe_modules": ["torch.nn.Linear"]}), "deepspeed", 4)
add("v-z3-zeropp", z(Z3, zero_quantized_weights=True, zero_quantized_gradients=True, zero_hpz_partition_size=8), "deepspeed", 8)
add("v-allow-untested", cp(PLAIN, optimizer={"type": "Adagrad", "params": {"lr": 1e-2}}, zero_allow_untested_optimizer=True), "deepspeed", 4)
add("v-legacy-cpu-offload", z(PLAIN, cpu_offload=True), "deepspeed", 4)
add("v-tp", cp(PLAIN, tensor_parallel={"autotp_size": 1}), "deepspeed", 4)
add("v-offload-z2-acc", {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": "auto"}}, "accelerate", None)
add("v-pydantic-int-float", z(PLAIN, reduce_bucket_size=5e8, allgather_bucket_size=5e8), "deepspeed", 4)
add("v-top-comment", cp(PLAIN, _comment="ZeRO-2 for 4 GPUs"), "deepspeed", 4)
add("v-prescale-z0", cp(PLAIN, zero_optimization={"stage": 0}, prescale_gradients=True, gradient_predivide_factor=2.0), "deepspeed", 4)
add("v-mp-fp16-tf", cp(HF_Z2, fp16={"enabled": True, "auto_cast": False, "loss_scale": 0, "initial_scale_power": 16}), "transformers", None)
add("v-partial-offload-z3", z(Z3, offload_optimizer={"device": "cpu", "ratio": 0.3}), "deepspeed", 8)
add("v-eigen-ignored", cp(PLAIN, eigenvalue={"enabled": False}), "deepspeed", 4)

# ---------- defective ----------
add("d-top-typo", rm(cp(PLAIN, train_micro_batch_size_per_gpus=4), "train_micro_batch_size_per_gpu"), "deepspeed", 4)
add("d-zero-typo", z(Z3, stage3_prefetch_bucket_sise=1000), "deepspeed", 8)
add("d-offload-typo", z(Z3, offload_optimizer={"device": "cpu", "pin_memroy": True}), "deepspeed", 8)
add("d-fp16-typo", cp(FP16, fp16={"enabled": True, "loss_scale_windows": 100}), "deepspeed", 2)
add("d-bf16-typo", cp(PLAIN, bf16={"enable": True}), "deepspeed", 4)
add("d-tb-typo", cp(PLAIN, tensorboard={"enabled": True, "output_dir": "x"}), "deepspeed", 4)
add("d-wandb-typo", cp(PLAIN, wandb={"enabled": False, "projects": "x"}), "deepspeed", 4)
add("d-comms-typo", cp(PLAIN, comms_logger={"enabled": True, "verbos": True}), "deepspeed", 4)
add("d-flops-typo", cp(PLAIN, flops_profiler={"enabled": True, "profile_stpe": 1}), "deepspeed", 4)
add("d-actckpt-typo", cp(PLAIN, activation_checkpointing={"partition_activation": True}), "deepspeed", 4)
add("d-aio-typo", cp(PLAIN, aio={"block_sizes": 1048576}), "deepspeed", 4)
add("d-compile-typo", cp(PLAIN, compile={"deepcompil": True}), "deepspeed", 4)
add("d-csv-typo", cp(PLAIN, csv_monitor={"enabled": True, "outputpath": "x"}), "deepspeed", 4)
add("d-prefetch-float", z(Z3, stage3_prefetch_bucket_size=15099494.4), "deepspeed", 8)
add("d-stage-str", z(PLAIN, stage="2"), "deepspeed", 4)
add("d-stage-4", z(PLAIN, stage=4), "deepspeed", 4)
add("d-fp16-enabled-str", cp(FP16, fp16={"enabled": "true"}), "deepspeed", 2)
add("d-overlap-str", z(PLAIN, overlap_comm="false"), "deepspeed", 4)
add("d-pin-yes", z(Z3, offload_param={"device": "cpu", "pin_memory": "yes"}), "deepspeed", 8)
add("d-device-gpu", z(Z3, offload_optimizer={"device": "gpu"}), "deepspeed", 8)
add("d-loss-scale-neg", cp(FP16, fp16={"enabled": True, "loss_scale": -1}), "deepspeed", 2)
add("d-isp-float", cp(FP16, fp16={"enabled": True, "initial_scale_power": 16.0}), "deepspeed", 2)
add("d-batch-mismatch", PLAIN, "deepspeed", 2)
add("d-batch-derive", {"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4, "optimizer": AD}, "deepspeed", 2)
add("d-batch-tbs-gas-w3", {"train_batch_size": 20, "gradient_accumulation_steps": 4, "optimizer": AD}, "deepspeed", 3)
add("d-fp16-bf16", cp(PLAIN, fp16={"enabled": True}), "deepspeed", 4)
add("d-offload-param-z2", z(PLAIN, offload_param={"device": "cpu"}), "deepspeed", 4)
add("d-nvme-no-path", z(Z3, offload_optimizer={"device": "nvme"}), "deepspeed", 8)
add("d-ratio-z2", z(PLAIN, offload_optimizer={"device": "cpu", "ratio": 0.5}), "deepspeed", 4)
add("d-allreduce-sum-z3", cp(Z3, gradient_allreduce_op="sum"), "deepspeed", 8)
add("d-stage-auto-ds", z(PLAIN, stage="auto"), "deepspeed", 4)
add("d-tbs-auto-ds", cp(PLAIN, train_batch_size="auto"), "deepspeed", 4)
add("d-enabled-auto-ds", cp(PLAIN, bf16={"enabled": "auto"}), "deepspeed", 4)
add("d-subgroup-auto-acc", z(HF_Z3, sub_group_size="auto"), "accelerate", None)
add("d-maxlive-auto-tf", z(HF_Z3, stage3_max_live_parameters="auto"), "transformers", None)
add("d-hjson-acc", None, "accelerate", None, raw='{\n  // comment\n  "train_micro_batch_size_per_gpu": "auto",\n  "zero_optimization": {"stage": 2}\n}\n')
add("d-trailing-tf", None, "transformers", None, raw='{\n  "train_micro_batch_size_per_gpu": "auto",\n  "zero_optimization": {"stage": 2},\n}\n')
add("d-dup-ds", None, "deepspeed", 1, raw='{\n  "train_batch_size": 8,\n  "zero_optimization": {"stage": 1},\n  "zero_optimization": {"stage": 2}\n}\n')
add("d-amp", cp(PLAIN, bf16={"enabled": False}, amp={"enabled": True, "opt_level": "O1"}), "deepspeed", 4)
add("d-amp-disabled", cp(PLAIN, amp={"enabled": False}), "deepspeed", 4)
add("d-sparse-attn", cp(PLAIN, sparse_attention={"mode": "fixed", "block": 16}), "deepspeed", 4)
add("d-elasticity", cp(PLAIN, elasticity={"enabled": False, "max_train_batch_size": 2000}), "deepspeed", 4)
add("d-onebitadam", cp(FP16, optimizer={"type": "OneBitAdam", "params": {"lr": 1e-4, "freeze_step": 100}}), "deepspeed", 2)
add("d-zerooneadam", cp(FP16, optimizer={"type": "ZeroOneAdam", "params": {"lr": 1e-4}}), "deepspeed", 2)
add("d-onebitlamb", cp(FP16, optimizer={"type": "OneBitLamb", "params": {"lr": 1e-4}}), "deepspeed", 2)
add("d-cpu-offload-both", z(PLAIN, cpu_offload=True, offload_optimizer={"device": "cpu"}), "deepspeed", 4)
add("d-prefetch-alias-both", z(Z3, prefetch_bucket_size=1000), "deepspeed", 8)
add("d-max-grad-norm", cp(PLAIN, optimizer={"type": "AdamW", "params": {"lr": 1e-4, "max_grad_norm": 1.0}}), "deepspeed", 4)
add("d-opt-no-type", cp(PLAIN, optimizer={"params": {"lr": 1e-4}}), "deepspeed", 4)
add("d-sched-no-type", cp(PLAIN, scheduler={"params": {"warmup_num_steps": 10}}), "deepspeed", 4)
add("d-lamb-static", cp(FP16, optimizer={"type": "Lamb", "params": {"lr": 1e-3}}, fp16={"enabled": True, "loss_scale": 128}, zero_optimization={"stage": 0}), "deepspeed", 1)
add("d-untested-opt", cp(PLAIN, optimizer={"type": "Adagrad", "params": {"lr": 1e-2}}), "deepspeed", 4)
add("d-gas-float", cp(PLAIN, gradient_accumulation_steps=2.5), "deepspeed", 4)
add("d-micro-str", cp(PLAIN, train_micro_batch_size_per_gpu="4"), "deepspeed", 4)
add("d-micro-str-tf", cp(HF_Z2, train_micro_batch_size_per_gpu="8"), "transformers", None)
add("d-gc-str-tf", cp(HF_Z2, gradient_clipping="1.0"), "transformers", None)
add("d-stage3-at-z2", z(PLAIN, stage3_param_persistence_threshold="auto"), "deepspeed", 4)
add("d-tb-enabled-int", cp(PLAIN, tensorboard={"enabled": 1, "output_path": "x"}), "deepspeed", 4)
add("d-comms-prof-str", cp(PLAIN, comms_logger={"enabled": True, "prof_ops": "all_reduce"}), "deepspeed", 4)
add("d-zero-bool-legacy", cp(PLAIN, zero_optimization=True), "deepspeed", 4)
add("d-fp16-master-z0", cp(FP16, zero_optimization={"stage": 0}, fp16={"enabled": True, "fp16_master_weights_and_grads": True}), "deepspeed", 1)
add("d-maxlive-neg", z(Z3, stage3_max_live_parameters=-5), "deepspeed", 8)
add("d-ratio-1.5", z(Z3, offload_optimizer={"device": "cpu", "ratio": 1.5}), "deepspeed", 8)
add("d-opt-typo-type", cp(PLAIN, optimizer={"type": "AdamWW", "params": {"lr": 1e-4}}), "deepspeed", 4)
add("d-sched-typo-type", cp(PLAIN, scheduler={"type": "WarmupLr", "params": {}}), "deepspeed", 4)
add("d-steps-per-print-float", cp(PLAIN, steps_per_print=10.5), "deepspeed", 4)
add("d-comm-dtype-bad", cp(PLAIN, communication_data_type="float8"), "deepspeed", 4)
add("d-bf16-immediate-typo", cp(PLAIN, bf16={"enabled": True, "immediate_grad_update": "True"}), "deepspeed", 4)
add("d-offload-device-none-str-z3", z(Z3, offload_param={"device": None}), "deepspeed", 8)
add("d-no-batch", {"optimizer": AD, "zero_optimization": {"stage": 1}}, "deepspeed", 1)
add("d-wandb-enabled-str", cp(PLAIN, wandb={"enabled": "false"}), "deepspeed", 4)
add("d-reduce-scatter-str", z(PLAIN, reduce_scatter="no"), "deepspeed", 4)
add("d-acc-tbs-mismatch", {"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 2}}, "accelerate", 1)
add("d-acc-no-zero", {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": True}}, "accelerate", None)
add("d-tf-scheduler-auto-unknown", cp(HF_Z2, scheduler={"type": "WarmupLR", "params": {"warmup_type": "auto"}}), "transformers", None)
add("d-pipeline-typo", cp(PLAIN, pipeline={"stages": "auto", "partition_method": "parameters", "seed_layer": False, "activation_checkpoint_interval": 0, "pipe_partitioned": True, "grad_partitioned": True}), "deepspeed", 4)
add("d-data-types-param", cp(PLAIN, data_types={"param_dtype": "fp16"}), "deepspeed", 4)
add("d-hysteresis-0", cp(FP16, fp16={"enabled": True, "hysteresis": 0}), "deepspeed", 2)
add("d-elastic-ckpt", z(PLAIN, elastic_checkpoint=True), "deepspeed", 4)
add("d-leaf-typo-top", cp(PLAIN, zero_allow_untested_optimzer=True), "deepspeed", 4)
# ---------- round 2 ----------
B = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
def b(**kw): return cp(B, **kw)
add("r-opt-lr-auto-ds", b(optimizer={"type": "AdamW", "params": {"lr": "auto"}}), "deepspeed", 1)
add("r-sched-auto-ds", b(scheduler={"type": "WarmupLR", "params": {"warmup_max_lr": "auto"}}), "deepspeed", 1)
add("r-gc-auto-ds", b(gradient_clipping="auto"), "deepspeed", 1)
add("r-gather-auto-ds", b(zero_optimization={"stage": 3, "stage3_gather_16bit_weights_on_model_save": "auto"}), "deepspeed", 1)
add("r-gather-fp16-legacy", b(zero_optimization={"stage": 3, "stage3_gather_fp16_weights_on_model_save": True}), "deepspeed", 1)
add("r-gather-alias", b(zero_optimization={"stage": 3, "gather_16bit_weights_on_model_save": True}), "deepspeed", 1)
add("r-z3-aliases", b(zero_optimization={"stage": 3, "prefetch_bucket_size": 5e7, "param_persistence_threshold": 1e5, "max_live_parameters": 1e9, "max_reuse_distance": 1e9}), "deepspeed", 1)
add("r-cpu-offload-param-both", b(zero_optimization={"stage": 3, "cpu_offload_param": True, "offload_param": {"device": "cpu"}}), "deepspeed", 1)
add("r-cpu-offload-pin", b(zero_optimization={"stage": 2, "cpu_offload": True, "cpu_offload_use_pin_memory": True}), "deepspeed", 1)
add("r-round-robin", b(zero_optimization={"stage": 2, "round_robin_gradients": True}), "deepspeed", 1)
add("r-mics", b(zero_optimization={"stage": 3, "mics_shard_size": 8, "mics_hierarchical_params_gather": False}), "deepspeed", 8)
add("r-fp16-autocast", b(fp16={"enabled": True, "auto_cast": True}), "deepspeed", 1)
add("r-bf16-master-z0", b(bf16={"enabled": True, "bf16_master_weights_and_grads": True}), "deepspeed", 1)
add("r-misc-top", b(zero_force_ds_cpu_optimizer=False, memory_breakdown=False, dump_state=False, sparse_gradients=False, disable_allgather=False), "deepspeed", 1)
add("r-gas-zero-derived", {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4, "optimizer": AD}, "deepspeed", 2)
add("r-tbs-float", b(train_batch_size=2.0), "deepspeed", 1)
add("r-gas-0", b(gradient_accumulation_steps=0), "deepspeed", 1)
add("r-offload-dev-auto-acc", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "auto"}, "offload_param": {"device": "auto"}}}, "accelerate", None)
add("r-offload-dev-auto-tf", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "auto"}}}, "transformers", None)
add("r-eps-auto-acc", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto", "eps": "auto"}}}, "accelerate", None)
add("r-warmuplr-total-auto-tf", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto", "total_num_steps": "auto"}}}, "transformers", None)
add("r-flops-enabled-false-str", b(flops_profiler={"enabled": "false"}), "deepspeed", 1)
add("r-actckpt-str", b(activation_checkpointing={"partition_activations": "false", "cpu_checkpointing": "false"}), "deepspeed", 1)
add("r-rbs-str-sci", b(zero_optimization={"stage": 2, "reduce_bucket_size": "5e8"}), "deepspeed", 1)
add("r-rbs-str-int", b(zero_optimization={"stage": 2, "reduce_bucket_size": "500000000"}), "deepspeed", 1)
add("r-lsw-float", b(fp16={"enabled": True, "loss_scale_window": 1000.0}), "deepspeed", 1)
add("r-isp-32", b(fp16={"enabled": True, "initial_scale_power": 40}), "deepspeed", 1)
add("r-min-ls-0", b(fp16={"enabled": True, "min_loss_scale": 0}), "deepspeed", 1)
add("r-mixed-offload", b(zero_optimization={"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}), "deepspeed", 1)
add("r-legacy-stage1", b(zero_optimization={"stage": 1, "legacy_stage1": True}), "deepspeed", 1)
add("r-opt-lower", b(optimizer={"type": "adamw", "params": {"lr": 1e-4}}), "deepspeed", 1)
add("r-opt-torch-adam", b(optimizer={"type": "Adam", "params": {"lr": 1e-4, "adam_w_mode": True, "torch_adam": True}}), "deepspeed", 1)
add("r-opt-cpuadam", b(optimizer={"type": "CPUAdam", "params": {"lr": 1e-4}}), "deepspeed", 1)
add("r-opt-muadam", b(optimizer={"type": "MuAdam", "params": {"lr": 1e-4}}), "deepspeed", 1)
add("r-wdlr-no-total", b(scheduler={"type": "WarmupDecayLR", "params": {"warmup_num_steps": 100}}), "deepspeed", 1)
add("r-cos-no-total", b(scheduler={"type": "WarmupCosineLR", "params": {"warmup_num_steps": 10}}), "deepspeed", 1)
add("r-warmup-type-bad", b(scheduler={"type": "WarmupLR", "params": {"warmup_type": "cosine"}}), "deepspeed", 1)
add("r-tagval-ignore", b(checkpoint={"tag_validation": "ignore"}), "deepspeed", 1)
add("r-accum-fp16-bf16", b(bf16={"enabled": True}, zero_optimization={"stage": 1}, data_types={"grad_accum_dtype": "fp16"}), "deepspeed", 1)
add("r-compile-enabled", b(compile={"enabled": True, "backend": "inductor"}), "deepspeed", 1)
add("r-autocast-fp16", b(fp16={"enabled": True}, torch_autocast={"enabled": True}), "deepspeed", 1)
add("r-nebula", b(nebula={"enabled": False}), "deepspeed", 1)
add("r-autotuning", b(autotuning={"enabled": False}), "deepspeed", 1)
add("r-curriculum-legacy", b(curriculum_learning={"enabled": False}), "deepspeed", 1)
add("r-pld", b(progressive_layer_drop={"enabled": True, "theta": 0.5, "gamma": 0.001}), "deepspeed", 1)
add("r-quantize-training", b(quantize_training={"enabled": False}), "deepspeed", 1)
add("r-hybrid", b(hybrid_engine={"enabled": False}), "deepspeed", 1)
add("r-z3-extras", b(zero_optimization={"stage": 3, "memory_efficient_linear": False, "use_multi_rank_bucket_allreduce": False, "ignore_unused_parameters": True}), "deepspeed", 1)
add("r-z0-offload", b(zero_optimization={"stage": 0, "offload_optimizer": {"device": "cpu"}}), "deepspeed", 1)
add("r-tb-path-int", b(tensorboard={"enabled": False, "output_path": 5}), "deepspeed", 1)
add("r-spp-null", b(steps_per_print=None), "deepspeed", 1)
add("r-gas-neg", b(gradient_accumulation_steps=-1), "deepspeed", 1)
add("r-onecycle-params", b(scheduler={"type": "OneCycle", "params": {"cycle_min_lr": 1e-5, "cycle_max_lr": 1e-3, "cycle_first_stair_count": 0, "cycle_momentum": True, "cycle_min_mom": 0.85, "cycle_max_mom": 0.99}}), "deepspeed", 1)
add("r-wdlr-ok-tf", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 1}, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto", "warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"}}}, "transformers", None)
add("r-wdlr-auto-acc", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 1}, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto", "warmup_num_steps": "auto"}}}, "accelerate", None)
add("r-tf-bf16-string-enabled", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "bf16": {"enabled": "false"}}, "transformers", None)
add("r-tf-lr-string", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": "1e-4"}}}, "transformers", None)
add("r-acc-lr-string", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": "1e-4"}}}, "accelerate", None)
add("r-ds-lr-string", b(optimizer={"type": "AdamW", "params": {"lr": "1e-4"}}), "deepspeed", 1)
add("r-prescale-z2", b(prescale_gradients=True, zero_optimization={"stage": 2}), "deepspeed", 1)
add("r-predivide-z2", b(gradient_predivide_factor=4.0, zero_optimization={"stage": 2}), "deepspeed", 1)
add("r-stage-float-2.0", b(zero_optimization={"stage": 2.0}), "deepspeed", 1)
add("r-stage-bool", b(zero_optimization={"stage": True}), "deepspeed", 1)
add("r-zero-false", b(zero_optimization=False), "deepspeed", 1)
add("r-seqpar", b(sequence_parallel_size=2), "deepspeed", 2)


# ---------------------------------------------------------------- YAML + deepspeed_config_file
PZ2 = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
      "gradient_clipping": "auto", "zero_optimization": {"stage": 2, "overlap_comm": True}, "bf16": {"enabled": "auto"}}
PZ3 = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
      "zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True, "reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}, "bf16": {"enabled": "auto"}}
def _yaml(ds="ds_config.json", mp=None, n=2, extra_ds=None, **top):
    lines = ["compute_environment: LOCAL_MACHINE", "debug: false", "deepspeed_config:"]
    dsc = {"deepspeed_config_file": ds, "zero3_init_flag": False}
    dsc.update(extra_ds or {})
    for k, v in dsc.items():
        lines.append(f"  {k}: {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}")
    base = {"distributed_type": "DEEPSPEED", "downcast_bf16": "no", "machine_rank": 0, "main_training_function": "main",
            "mixed_precision": mp, "num_machines": 1, "num_processes": n, "rdzv_backend": "static", "same_network": True,
            "use_cpu": False}
    base.update(top)
    if mp is None: base.pop("mixed_precision")
    for k, v in base.items():
        lines.append(f"{k}: {str(v).lower() if isinstance(v, bool) else v}")
    return "\n".join(lines) + "\n"
def _m(d, **kw):
    d = copy.deepcopy(d); d.update(kw); return d
def _mz(d, **kw):
    d = copy.deepcopy(d); d["zero_optimization"].update(kw); return d
PAIRS = []  # (id, yaml, json_text or None, json_name, where: "cwd"|"yamldir")
def add_pair(i, y, j, name="ds_config.json", where="cwd"):
    PAIRS.append((i, y, j if j is None or isinstance(j, str) else J(j, indent=2), name, where))
add_pair("pv-z2", _yaml(), PZ2)
add_pair("pv-z3-init", _yaml(extra_ds={"zero3_init_flag": True}), PZ3)
add_pair("pv-fp16", _yaml(mp="fp16"), _m(PZ2, bf16=None) if False else {k: v for k, v in _m(PZ2, fp16={"enabled": "auto"}).items() if k != "bf16"})
add_pair("pv-explicit-batch", _yaml(n=4), _m(PZ2, train_micro_batch_size_per_gpu=4, gradient_accumulation_steps=2, train_batch_size=32))
add_pair("pv-no-mp", _yaml(), _mz(_m(PZ2, bf16={"enabled": False}), stage=1))
add_pair("pd-gas-both", _yaml(extra_ds={"gradient_accumulation_steps": 4}), PZ2)
add_pair("pd-clip-both", _yaml(extra_ds={"gradient_clipping": 1.0}), PZ2)
add_pair("pd-offload-both", _yaml(extra_ds={"offload_optimizer_device": "cpu"}), PZ2)
add_pair("pd-stage-both", _yaml(extra_ds={"zero_stage": 3}), PZ2)
add_pair("pd-mp-conflict", _yaml(mp="fp16"), _m(PZ2, bf16={"enabled": True}))
add_pair("pd-init-flag-z2", _yaml(extra_ds={"zero3_init_flag": True}), PZ2)
add_pair("pd-no-zero", _yaml(), {k: v for k, v in PZ2.items() if k != "zero_optimization"})
add_pair("pd-missing-file", _yaml(ds="nope/ds.json"), None)
add_pair("pd-rel-to-yaml", _yaml(ds="ds_config.json"), PZ2, where="yamldir")
add_pair("pd-hjson", _yaml(), '{\n  // zero 2\n  "train_micro_batch_size_per_gpu": "auto",\n  "zero_optimization": {"stage": 2}\n}\n')
add_pair("pd-batch-world", _yaml(n=4), _m(PZ2, train_micro_batch_size_per_gpu=4, gradient_accumulation_steps=2, train_batch_size=16))
add_pair("pd-unfillable-auto", _yaml(), _mz(PZ2, sub_group_size="auto"))
add_pair("pd-typo-in-json", _yaml(), _mz(PZ2, overlap_com=True))
add_pair("pd-stage-str", _yaml(), _mz(PZ2, stage="3"))
add_pair("pd-removed-key", _yaml(), _m(PZ2, amp={"enabled": False}))
add_pair("pd-mp-no-quoted", _yaml(mp="'no'"), _m(PZ2, bf16={"enabled": True}))
add_pair("pd-gas-mismatch-explicit", _yaml(extra_ds={}), _m(PZ2, gradient_accumulation_steps=4))
add_pair("pd-zero-stage-auto-init", _yaml(extra_ds={"zero3_init_flag": True}), _mz(PZ3, stage="auto"))
add_pair("pd-offload-param-z2", _yaml(), _mz(PZ2, offload_param={"device": "cpu"}))
add_pair("pd-msamp-z3", _yaml(mp="fp8", fp8_config="{backend: MSAMP, opt_level: O2}"), PZ3)
add_pair("pv-fp16-json", _yaml(), {k: v for k, v in _m(PZ2, fp16={"enabled": True}).items() if k != "bf16"})
add_pair("pd-json-fp16-bf16", _yaml(), _m(PZ2, fp16={"enabled": True}, bf16={"enabled": True}))
add_pair("pd-init-flag-z2-nomp", _yaml(extra_ds={"zero3_init_flag": True}), PZ2)
add_pair("pd-batch-world-2m", _yaml(n=4, num_machines=2, main_process_ip="10.0.0.1", main_process_port=29500), _m(PZ2, train_micro_batch_size_per_gpu=2, gradient_accumulation_steps=1, train_batch_size=8))
add_pair("pv-batch-world-2m", _yaml(n=4, num_machines=2, main_process_ip="10.0.0.1", main_process_port=29500), _m(PZ2, train_micro_batch_size_per_gpu=2, gradient_accumulation_steps=1, train_batch_size=16))
add_pair("pd-json-top-typo", _yaml(), _m(PZ2, gradient_accumulation_step=2))
add_pair("pd-json-trailing", _yaml(), '{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2},}')
add_pair("pd-json-betas-auto", _yaml(), _m(PZ2, optimizer={"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}}))

# ---------- round 3 (after the first fixes) ----------
add("r3-tbs-true-tf", cp(HF_Z2, train_batch_size=True), "transformers", None)
add("r3-gas-true-tf", cp(HF_Z2, gradient_accumulation_steps=True), "transformers", None)
add("r3-gc-false-tf", cp(HF_Z2, gradient_clipping=False), "transformers", None)
add("r3-flops-null", b(flops_profiler={"enabled": None}), "deepspeed", 1)
add("r3-flops-int", b(flops_profiler={"enabled": 0}), "deepspeed", 1)
add("r3-flops-true-str-acc", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 1}, "flops_profiler": {"enabled": "true"}}, "accelerate", None)
add("r3-aio-old-name", b(aio={"block_size": 262144, "queue_depth": 32, "thread_count": 1, "single_submit": False, "overlap_events": True}), "deepspeed", 1)
# nested typos and blocks not covered above
add("r4-opt-param-typo", b(optimizer={"type": "AdamW", "params": {"lr": 1e-4, "weight_decy": 0.01}}), "deepspeed", 1)
add("r4-sched-param-typo", b(scheduler={"type": "WarmupLR", "params": {"warmup_num_step": 10}}), "deepspeed", 1)
add("r4-ckpt-typo", b(checkpoint={"tag_validaton": "Warn"}), "deepspeed", 1)
add("r4-de-typo", b(data_efficiency={"enabled": True, "data_samplin": {"enabled": False}}), "deepspeed", 1)
add("r4-tp-typo", b(tensor_parallel={"autotp_sise": 1}), "deepspeed", 1)
add("r4-timers-typo", b(timers={"throughput": {"enabeld": True}}), "deepspeed", 1)
add("r4-zenflow-typo", b(zero_optimization={"stage": 2, "zenflow": {"topk_ratio": 0.05, "update_intervall": 4}}), "deepspeed", 1)
add("r4-autocast-typo", b(torch_autocast={"enabled": True, "dtyp": "bfloat16"}), "deepspeed", 1)
add("r4-data-types-typo", b(data_types={"grad_accum_dtyp": "fp32"}), "deepspeed", 1)
add("r4-hybrid-typo", b(hybrid_engine={"enabled": False, "max_out_token": 512}), "deepspeed", 1)
add("r4-pipeline-typo", b(pipeline={"stage": 2}), "deepspeed", 1)
add("r4-comet-typo", b(comet={"enabled": False, "projec": "x"}), "deepspeed", 1)
add("r4-offload-param-typo", b(zero_optimization={"stage": 3, "offload_param": {"device": "cpu", "buffer_cnt": 4}}), "deepspeed", 1)
add("r4-offload-nvme-typo", b(zero_optimization={"stage": 3, "offload_param": {"device": "nvme", "nvme_pth": "/nvme"}}), "deepspeed", 1)
add("r4-zero-key-case", b(zero_optimization={"Stage": 2}), "deepspeed", 1)
add("r4-top-case", cp(b(), Train_batch_size=2), "deepspeed", 1)
add("r4-fp16-type-legacy", b(fp16={"enabled": True, "type": "bfloat16"}), "deepspeed", 1)
add("r4-bf16-acc-typo", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto", "immediate_grad_updates": False}}, "accelerate", None)
add("r4-tf-zero-typo", cp(HF_Z3, zero_optimization=dict(HF_Z3["zero_optimization"], stage3_gather_16bit_weights_on_model_sav=True)), "transformers", None)
add("r4-hjson-unquoted-ds", None, "deepspeed", 1, raw='{\n  train_batch_size: 8\n  zero_optimization: {stage: 2}\n}\n')
add("r4-hjson-block-comment-ds", None, "deepspeed", 1, raw='/* ZeRO-2 */\n{"train_batch_size": 8, "zero_optimization": {"stage": 2}}\n')
add("r4-nan-clip-acc", None, "accelerate", None, raw='{"train_micro_batch_size_per_gpu": "auto", "gradient_clipping": NaN, "zero_optimization": {"stage": 2}}')
add("r4-bom-acc", None, "accelerate", None, raw='\ufeff{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}')
add("r4-bom-ds", None, "deepspeed", 1, raw='\ufeff{"train_batch_size": 8, "zero_optimization": {"stage": 2}}')
add("r4-empty-obj-ds", None, "deepspeed", 1, raw='{}')
add("r4-dup-nested-acc", None, "accelerate", None, raw='{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2, "stage": 3}}')
add("r4-single-quote-ds", None, "deepspeed", 1, raw="{'train_batch_size': 8}")
add("r4-wandb-acc-enabled", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, "wandb": {"enabled": False, "project": "p"}, "tensorboard": {"enabled": False}}, "accelerate", None)
add("r4-z3-int-strs", b(zero_optimization={"stage": 3, "stage3_max_live_parameters": "1e9"}), "deepspeed", 1)
add("r4-z3-neg-thresh", b(zero_optimization={"stage": 3, "stage3_param_persistence_threshold": -1}), "deepspeed", 1)
add("r4-offload-buffer-float", b(zero_optimization={"stage": 3, "offload_param": {"device": "none", "buffer_size": 1.5e8}}), "deepspeed", 1)
add("r4-zero-quant-z2", b(zero_optimization={"stage": 2, "zero_quantized_weights": True}), "deepspeed", 1)
add("r4-hpz-z2", b(zero_optimization={"stage": 2, "zero_hpz_partition_size": 2}), "deepspeed", 1)
add("r4-lion", b(optimizer={"type": "Lion", "params": {"lr": 1e-4, "betas": [0.9, 0.99], "weight_decay": 0.0}}, zero_optimization={"stage": 2}), "deepspeed", 1)
add("r4-sgd-z2", b(optimizer={"type": "SGD", "params": {"lr": 0.1}}, zero_optimization={"stage": 2}), "deepspeed", 1)
add("r4-adam-amsgrad", b(optimizer={"type": "Adam", "params": {"lr": 1e-4, "amsgrad": True}}), "deepspeed", 1)
add_pair("pd-json-dup-key", _yaml(), '{"train_micro_batch_size_per_gpu": "auto",\n "zero_optimization": {"stage": 2, "stage": 3}}\n')
add_pair("pd-json-dup-key-bad-last", _yaml(), '{"train_micro_batch_size_per_gpu": "auto",\n "zero_optimization": {"stage": 2, "stage": 5}}\n')
add_pair("pd-tilde-path", _yaml(ds="~/ds_config.json"), PZ2)
add_pair("pd-json-is-list", _yaml(), '[{"zero_optimization": {"stage": 2}}]')
add_pair("pd-json-empty", _yaml(), '')
add_pair("pd-json-empty-obj", _yaml(), '{}')
add_pair("pv-z3-offload-explicit", _yaml(n=8), _m(PZ3, zero_optimization=dict(PZ3["zero_optimization"], offload_optimizer={"device": "cpu", "pin_memory": True}, offload_param={"device": "cpu", "pin_memory": True})))
add_pair("pd-z3-typo-offload", _yaml(n=8), _m(PZ3, zero_optimization=dict(PZ3["zero_optimization"], offload_optimizer={"device": "cpu", "pin_memmory": True})))
add_pair("pd-json-world-derive", _yaml(n=3), _m(PZ2, train_micro_batch_size_per_gpu=4, gradient_accumulation_steps="auto", train_batch_size=24))
add_pair("pv-json-world-derive", _yaml(n=3), _m(PZ2, train_micro_batch_size_per_gpu="auto", gradient_accumulation_steps=2, train_batch_size="auto"))
add_pair("pd-yaml-gas-explicit-json-gas", _yaml(extra_ds={"gradient_accumulation_steps": 2}), _m(PZ2, gradient_accumulation_steps=2))
add_pair("pd-init-flag-z3-str", _yaml(extra_ds={"zero3_init_flag": "true"}), PZ3)
add("r5-acc-tbs-gas-auto-w3", {"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}, "accelerate", 3)
add("r5-acc-tbs-not-multiple-w3", {"train_batch_size": 25, "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}, "accelerate", 3)
add("r5-tf-tbs-not-multiple-w4", {"train_batch_size": 30, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 1}}, "transformers", 4)
add("v5-acc-tbs-gas-auto-w3", {"train_batch_size": 12, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}, "accelerate", 3)
# ---------- round 6: shapes of widely copied public configs (DeepSpeed-Chat, Megatron-DeepSpeed, BLOOM, HF) ----------
add("v6-ds-chat-actor", {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "steps_per_print": 10,
    "zero_optimization": {"stage": 3, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "none"},
                          "stage3_param_persistence_threshold": 10000, "stage3_max_live_parameters": 30000000,
                          "stage3_prefetch_bucket_size": 30000000, "memory_efficient_linear": False},
    "fp16": {"enabled": True, "loss_scale_window": 100}, "gradient_clipping": 1.0, "prescale_gradients": False,
    "wall_clock_breakdown": False,
    "hybrid_engine": {"enabled": True, "max_out_tokens": 512, "inference_tp_size": 1, "release_inference_cache": False,
                      "pin_parameters": True, "tp_gather_partition_size": 8},
    "tensorboard": {"enabled": False, "output_path": "step3_tensorboard/ds_tensorboard_logs/", "job_name": "step3_actor_tensorboard"}},
    "deepspeed", 8)
add("v6-megatron-ds", {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "steps_per_print": 10,
    "zero_optimization": {"stage": 1}, "gradient_clipping": 1.0, "prescale_gradients": False,
    "fp16": {"enabled": True, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1, "initial_scale_power": 12},
    "bf16": {"enabled": False}, "wall_clock_breakdown": False, "zero_allow_untested_optimizer": True}, "deepspeed", 16)
add("v6-bloom-like", {"train_micro_batch_size_per_gpu": 1, "train_batch_size": 2048, "gradient_clipping": 1.0,
    "zero_optimization": {"stage": 0}, "bf16": {"enabled": True}, "steps_per_print": 2000, "wall_clock_breakdown": False,
    "checkpoint": {"load_universal": False}}, "deepspeed", 64)
add("d6-megatron-ds-w12", {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1},
    "fp16": {"enabled": True, "loss_scale": 0}}, "deepspeed", 12)
add("v6-hf-zero2-bf16", {"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none", "pin_memory": True},
    "allgather_partitions": True, "allgather_bucket_size": 2e8, "overlap_comm": True, "reduce_scatter": True, "reduce_bucket_size": "auto",
    "contiguous_gradients": True}, "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False}, "transformers", 4)
add("d6-hf-zero2-rbs-auto-ds", {"bf16": {"enabled": True}, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"},
    "train_micro_batch_size_per_gpu": 2}, "deepspeed", 1)
add("v6-zero-inference-z3", {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True, "stage3_prefetch_bucket_size": 1e7,
                          "stage3_param_persistence_threshold": 1e5, "reduce_bucket_size": 1e7, "sub_group_size": 1e9,
                          "offload_param": {"device": "cpu", "pin_memory": True}}, "steps_per_print": 2000, "wall_clock_breakdown": False},
    "deepspeed", 2)
add("d6-hf-fp16-hysteresis-str", cp(HF_Z2, fp16={"enabled": "auto", "loss_scale": 0, "hysteresis": "2"}), "transformers", None)
add("d6-tf-zero3-gather-auto", z(HF_Z3, stage3_gather_16bit_weights_on_model_save="auto"), "transformers", None)
add("d6-acc-zero3-gather-auto", z(HF_Z3, stage3_gather_16bit_weights_on_model_save="auto"), "accelerate", None)
