"""Hand-written reviewer set: realistic Accelerate configs, valid and defective, written from
accelerate 1.15.0's source (commands/config/*.py, commands/launch.py, utils/launch.py,
utils/dataclasses.py, parallelism_config.py) and from configs in accelerate's docs/examples.

Each entry: (id, text, expectation, file name - config.yaml or config.json). The expectation is what a reviewer predicts; the test
never trusts it for the verdict (the oracle decides), it only uses:
  "ok"            no validator error and accelerate accepts (checked against the oracle anyway)
  "err"           accelerate rejects (oracle) and the validator reports an error
  "warn:<rule>"   accelerate accepts, the validator warns with <rule>
  "err:<rule>"    the validator reports exactly this error rule (among others)
"""
from __future__ import annotations

C = []


def add(cid, text, expect, name="config.yaml"):
    C.append((cid, text.lstrip("\n"), expect, name))


# ------------------------------------------------------------------ valid: every kind
add("ok-multi-gpu-bf16", """
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: all
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
""", "ok")
add("ok-multi-gpu-gpu-ids", """
distributed_type: MULTI_GPU
gpu_ids: 0,1,2,3
num_processes: 4
mixed_precision: fp16
""", "ok")
add("ok-multi-node-c10d", """
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
machine_rank: 1
main_process_ip: 10.1.2.3
main_process_port: 29500
mixed_precision: bf16
num_machines: 2
num_processes: 16
rdzv_backend: c10d
same_network: false
""", "ok")
add("ok-single-gpu-no", """
compute_environment: LOCAL_MACHINE
distributed_type: 'NO'
mixed_precision: 'no'
gpu_ids: '0'
num_processes: 1
use_cpu: false
""", "ok")
add("ok-cpu-only", """
distributed_type: 'NO'
num_processes: 1
use_cpu: true
mixed_precision: 'no'
""", "ok")
add("ok-fsdp1-full", """
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_use_orig_params: true
  fsdp_version: 1
machine_rank: 0
mixed_precision: bf16
num_machines: 1
num_processes: 8
""", "ok")
add("ok-fsdp1-size-wrap-int-strategy", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_auto_wrap_policy: SIZE_BASED_WRAP
  fsdp_min_num_params: 100000000
  fsdp_sharding_strategy: 2
  fsdp_backward_prefetch: BACKWARD_POST
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_offload_params: true
""", "ok")
add("ok-fsdp2-full", """
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_activation_checkpointing: true
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: true
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_transformer_layer_cls_to_wrap: Qwen2DecoderLayer
  fsdp_version: 2
mixed_precision: bf16
num_machines: 1
num_processes: 4
""", "ok")
add("ok-fsdp2-ac-offload", """
distributed_type: FSDP
num_processes: 4
mixed_precision: bf16
fsdp_config:
  fsdp_version: 2
  fsdp_activation_checkpointing: true
  fsdp_activation_checkpointing_offload: true
  fsdp_reshard_after_forward: false
  fsdp_state_dict_type: FULL_STATE_DICT
""", "ok")
add("ok-fsdp2-no-ram-efficient", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_cpu_ram_efficient_loading: false
  fsdp_auto_wrap_policy: NO_WRAP
""", "ok")
add("ok-fsdp-multinode", """
distributed_type: FSDP
num_machines: 4
num_processes: 32
machine_rank: 0
main_process_ip: node0.cluster
main_process_port: 29501
rdzv_backend: c10d
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: MistralDecoderLayer,MixtralDecoderLayer
""", "ok")
add("ok-ds-inline-z2", """
compute_environment: LOCAL_MACHINE
deepspeed_config:
  gradient_accumulation_steps: 4
  gradient_clipping: 1.0
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
distributed_type: DEEPSPEED
mixed_precision: fp16
num_machines: 1
num_processes: 8
""", "ok")
add("ok-ds-inline-z3-offload", """
distributed_type: DEEPSPEED
num_processes: 4
mixed_precision: bf16
deepspeed_config:
  zero_stage: 3
  offload_optimizer_device: cpu
  offload_param_device: cpu
  zero3_init_flag: true
  zero3_save_16bit_model: true
  gradient_accumulation_steps: 1
""", "ok")
add("ok-ds-config-file", """
compute_environment: LOCAL_MACHINE
deepspeed_config:
  deepspeed_config_file: ds_config.json
  zero3_init_flag: false
distributed_type: DEEPSPEED
num_machines: 1
num_processes: 2
""", "ok")
add("ok-ds-multinode-pdsh", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
machine_rank: 0
main_process_ip: 192.168.0.10
main_process_port: 29500
deepspeed_config:
  deepspeed_hostfile: /etc/hostfile
  deepspeed_multinode_launcher: pdsh
  zero_stage: 2
mixed_precision: bf16
""", "ok")
add("ok-ds-multinode-standard", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
machine_rank: 1
main_process_ip: 192.168.0.10
main_process_port: 29500
deepspeed_config:
  deepspeed_multinode_launcher: standard
  zero_stage: 3
  zero3_init_flag: true
""", "ok")
add("ok-megatron", """
distributed_type: MEGATRON_LM
num_processes: 8
mixed_precision: bf16
megatron_lm_config:
  megatron_lm_gradient_clipping: 1.0
  megatron_lm_num_micro_batches: 2
  megatron_lm_pp_degree: 2
  megatron_lm_recompute_activations: true
  megatron_lm_sequence_parallelism: true
  megatron_lm_tp_degree: 2
  megatron_lm_use_distributed_optimizer: true
""", "ok")
add("ok-tpu", """
compute_environment: LOCAL_MACHINE
distributed_type: XLA
downcast_bf16: 'no'
main_training_function: main
mixed_precision: 'no'
num_machines: 1
num_processes: 8
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
""", "ok")
add("bad-fp8-te-override-bool", """
distributed_type: MULTI_GPU
num_processes: 8
mixed_precision: fp8
fp8_config:
  backend: TE
  fp8_format: HYBRID
  amax_history_len: 1024
  amax_compute_algo: max
  margin: 0
  interval: 1
  override_linear_precision: false
  use_autocast_during_eval: false
""", "err:acc-fp8-te-value-invalid")  # the recipe indexes [0..2]
add("ok-fp8-ao-fsdp2", """
distributed_type: FSDP
num_processes: 8
mixed_precision: fp8
fp8_config:
  backend: AO
  pad_inner_dim: true
  enable_fsdp_float8_all_gather: true
fsdp_config:
  fsdp_version: 2
  fsdp_cpu_ram_efficient_loading: false
""", "ok")
add("ok-fp8-msamp-ds", """
distributed_type: DEEPSPEED
num_processes: 4
mixed_precision: fp8
fp8_config:
  backend: MSAMP
  opt_level: O2
deepspeed_config:
  zero_stage: 2
""", "ok")
add("ok-fp8-te-ds", """
distributed_type: DEEPSPEED
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: TE
  fp8_format: E4M3
deepspeed_config:
  zero_stage: 3
""", "ok")
add("ok-dynamo", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_mode: max-autotune
  dynamo_use_dynamic: true
  dynamo_use_fullgraph: false
  dynamo_use_regional_compilation: true
""", "ok")
add("ok-dynamo-single", """
distributed_type: 'NO'
num_processes: 1
dynamo_config:
  dynamo_backend: CUDAGRAPHS
""", "ok")
add("ok-parallelism-fsdp2-tp", """
distributed_type: FSDP
num_processes: 8
mixed_precision: bf16
fsdp_config:
  fsdp_version: 2
  fsdp_state_dict_type: SHARDED_STATE_DICT
parallelism_config:
  parallelism_config_dp_replicate_size: 1
  parallelism_config_dp_shard_size: 2
  parallelism_config_tp_size: 2
  parallelism_config_cp_size: 2
  parallelism_config_cp_comm_strategy: alltoall
""", "ok")
add("ok-parallelism-hsdp", """
distributed_type: FSDP
num_processes: 8
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_replicate_size: 2
  parallelism_config_dp_shard_size: 4
""", "ok")
add("ok-parallelism-ds-sp", """
distributed_type: DEEPSPEED
num_processes: 4
deepspeed_config:
  zero_stage: 3
parallelism_config:
  parallelism_config_sp_backend: deepspeed
  parallelism_config_sp_size: 4
  parallelism_config_sp_seq_length_is_variable: true
  parallelism_config_sp_attn_implementation: sdpa
""", "ok")
add("ok-sagemaker-like-local-mpirun", """
distributed_type: MULTI_CPU
num_processes: 4
num_machines: 1
use_cpu: true
mpirun_config:
  mpirun_ccl: 1
  mpirun_hostfile: /home/user/hostfile
mixed_precision: bf16
""", "ok")
add("bad-ipex-config-removed", """
distributed_type: MULTI_CPU
num_machines: 2
num_processes: 8
machine_rank: 0
main_process_ip: 10.0.0.5
main_process_port: 29500
use_cpu: true
ipex_config:
  ipex: false
""", "err:acc-unknown-top-level-key")
add("ok-xpu", """
distributed_type: MULTI_XPU
num_processes: 2
mixed_precision: bf16
gpu_ids: all
""", "ok")
add("ok-npu", """
distributed_type: MULTI_NPU
num_processes: 8
mixed_precision: fp16
""", "ok")
add("ok-mps", """
distributed_type: 'NO'
num_processes: 1
mixed_precision: fp16
use_cpu: false
""", "ok")
add("ok-multi-hpu", """
distributed_type: MULTI_HPU
num_processes: 8
mixed_precision: bf16
""", "ok")
add("ok-json-in-yaml", """
{
  "compute_environment": "LOCAL_MACHINE",
  "debug": false,
  "distributed_type": "MULTI_GPU",
  "downcast_bf16": false,
  "enable_cpu_affinity": false,
  "machine_rank": 0,
  "main_training_function": "main",
  "mixed_precision": "no",
  "num_machines": 1,
  "num_processes": 2,
  "rdzv_backend": "static",
  "same_network": false,
  "tpu_use_cluster": false,
  "tpu_use_sudo": false,
  "use_cpu": false
}
""", "ok")
add("ok-anchor-merge", """
_defaults: &fsdp
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
distributed_type: FSDP
num_processes: 2
fsdp_config:
  <<: *fsdp
  fsdp_state_dict_type: SHARDED_STATE_DICT
""", "err")  # _defaults is an unknown top-level key: accelerate refuses it
add("ok-merge-in-block-only", """
distributed_type: FSDP
num_processes: 2
fsdp_config: &f
  fsdp_version: 2
  fsdp_offload_params: false
""", "ok")
add("ok-flow-style", """
{distributed_type: MULTI_GPU, num_processes: 2, mixed_precision: bf16, dynamo_config: {dynamo_backend: INDUCTOR}}
""", "ok")
add("ok-comments-quoted-keys", """
# written by hand
"distributed_type": "MULTI_GPU"   # multi gpu
'num_processes': 4
mixed_precision: "bf16"
fsdp_config: {}   # leftover, empty
deepspeed_config:
""", "ok")
add("ok-null-values", """
distributed_type: MULTI_GPU
num_processes: 2
main_process_ip: null
main_process_port: ~
mixed_precision: null
""", "ok")
add("ok-legacy-fp16", """
distributed_type: MULTI_GPU
num_processes: 2
fp16: true
""", "ok")
add("ok-legacy-dynamo-backend", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_backend: 'NO'
""", "ok")
add("ok-explicit-doc-end", """
---
distributed_type: MULTI_GPU
num_processes: 2
...
""", "ok")

# ------------------------------------------------------------------ defective: typos at every level
add("bad-top-typo-num-process", """
distributed_type: MULTI_GPU
num_process: 4
""", "err:acc-unknown-top-level-key")
add("bad-top-typo-mixed-precison", """
distributed_type: MULTI_GPU
num_processes: 4
mixed_precison: bf16
""", "err:acc-unknown-top-level-key")
add("bad-top-fsdp-key-at-top", """
distributed_type: FSDP
num_processes: 2
fsdp_version: 2
""", "err:acc-unknown-top-level-key")
add("bad-top-deepspeed-key-at-top", """
distributed_type: DEEPSPEED
num_processes: 2
zero_stage: 2
""", "err:acc-unknown-top-level-key")
add("warn-fsdp-nested-typo", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_offload_param: true
""", "warn:acc-fsdp-unknown-key")
add("warn-ds-nested-typo", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 3
  offload_optimizer: cpu
""", "warn:acc-ds-unknown-key")
add("warn-ds-nested-stage-typo", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stages: 3
""", "warn:acc-ds-unknown-key")
add("warn-dynamo-nested-typo", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_use_full_graph: true
""", "warn:acc-dynamo-unknown-key")
add("warn-fp8-nested-typo", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: TE
  amax_history_length: 16
""", "warn:acc-fp8-unknown-key")
add("warn-parallelism-no-prefix", """
distributed_type: FSDP
num_processes: 4
fsdp_config:
  fsdp_version: 2
parallelism_config:
  tp_size: 2
  dp_shard_size: 2
""", "warn:acc-parallelism-unknown-key")
add("warn-megatron-no-prefix", """
distributed_type: MEGATRON_LM
num_processes: 4
megatron_lm_config:
  tp_degree: 2
  megatron_lm_pp_degree: 2
""", "warn:acc-megatron-unknown-key")

# ------------------------------------------------------------------ wrong enum spellings and cases
add("bad-dt-lower", """
distributed_type: multi_gpu
num_processes: 2
""", "err:acc-invalid-distributed-type")
add("bad-dt-ddp", """
distributed_type: DDP
num_processes: 2
""", "err:acc-invalid-distributed-type")
add("bad-dt-tpu-old", """
distributed_type: TPU
num_processes: 8
""", "err:acc-invalid-distributed-type")
add("ok-mp-upper", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: BF16
""", "ok")  # the launcher lower()s it
add("bad-mp-fp32", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp32
""", "err:acc-invalid-mixed-precision")
add("bad-mp-unquoted-no", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: no
""", "err")
add("bad-compute-env-local", """
compute_environment: local
distributed_type: MULTI_GPU
num_processes: 2
""", "err")
add("ok-fsdp-strategy-lower", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 1
  fsdp_sharding_strategy: full_shard
""", "ok")  # upper()ed by the plugin
add("bad-fsdp-prefetch-name", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_backward_prefetch: PRE
""", "err:acc-fsdp-backward-prefetch-invalid")
add("ok-fsdp-wrap-lower", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_auto_wrap_policy: transformer_based_wrap
""", "ok")
add("bad-fsdp-state-dict-short", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_state_dict_type: SHARDED
""", "err:acc-fsdp-state-dict-type-invalid")
add("bad-fp8-backend-lower", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: te
""", "err:acc-fp8-backend-invalid")
add("bad-fp8-backend-msamp-dash", """
distributed_type: DEEPSPEED
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: MS-AMP
deepspeed_config:
  zero_stage: 2
""", "err:acc-fp8-backend-invalid")
add("ok-fp8-format-lower", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: TE
  fp8_format: hybrid
""", "ok")
add("bad-fp8-amax-algo", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: TE
  amax_compute_algo: mean
""", "err")
add("ok-dynamo-backend-lower", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: inductor
""", "ok")  # TorchDynamoPlugin upper()s it
add("bad-dynamo-mode", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_mode: fastest
""", "err:acc-dynamo-mode-invalid")
add("bad-ds-offload-gpu", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 3
  offload_param_device: gpu
""", "err:acc-ds-offload-device-invalid")
add("bad-ds-zero-stage-4", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 4
""", "err:acc-ds-zero-stage-invalid")
add("bad-ds-launcher-slurm-lower", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: 29500
deepspeed_config:
  deepspeed_multinode_launcher: srun
  zero_stage: 2
""", "err")
add("bad-cp-comm-ring", """
distributed_type: FSDP
num_processes: 4
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_shard_size: 2
  parallelism_config_cp_size: 2
  parallelism_config_cp_comm_strategy: ring
""", "err:acc-parallelism-cp-comm-strategy-invalid")

# ------------------------------------------------------------------ wrong types
add("bad-num-processes-string", """
distributed_type: MULTI_GPU
num_processes: four
""", "err")
add("bad-port-string", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: port
""", "err")
add("bad-gpu-ids-int", """
distributed_type: MULTI_GPU
num_processes: 1
gpu_ids: 0
""", "err:acc-gpu-ids-not-string")
add("bad-gpu-ids-list", """
distributed_type: MULTI_GPU
num_processes: 2
gpu_ids: [0, 1]
""", "err")
add("bad-fsdp-offload-maybe", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_offload_params: maybe
""", "err:acc-fsdp-bool-value")
add("bad-fsdp-min-params-1e8", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_auto_wrap_policy: SIZE_BASED_WRAP
  fsdp_min_num_params: 1e8
""", "err")
add("bad-megatron-tp-word", """
distributed_type: MEGATRON_LM
num_processes: 4
megatron_lm_config:
  megatron_lm_tp_degree: two
""", "err:acc-megatron-value-invalid")
add("bad-parallelism-size-zero", """
distributed_type: FSDP
num_processes: 4
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_shard_size: 0
""", "err")
add("bad-ds-gas-auto", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 2
  gradient_accumulation_steps: auto
""", "err:acc-ds-gradient-accumulation-invalid")
add("bad-use-cpu-string", """
distributed_type: 'NO'
num_processes: 1
use_cpu: 'yes please'
""", "err")

# ------------------------------------------------------------------ contradictions
add("bad-multinode-no-ip-simple", """
distributed_type: 'NO'
num_machines: 2
num_processes: 1
""", "err")
add("bad-ds-file-plus-mp", """
distributed_type: DEEPSPEED
num_processes: 2
mixed_precision: bf16
deepspeed_config:
  deepspeed_config_file: ds_config.json
""", "err:acc-ds-config-file-conflict")
add("bad-ds-file-plus-stage", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  deepspeed_config_file: ds_config.json
  zero_stage: 3
  gradient_accumulation_steps: 2
""", "err:acc-ds-config-file-conflict")
add("bad-msamp-zero3", """
distributed_type: DEEPSPEED
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: MSAMP
deepspeed_config:
  zero_stage: 3
""", "err:acc-fp8-msamp-zero3")
add("bad-msamp-fsdp", """
distributed_type: FSDP
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: MSAMP
fsdp_config:
  fsdp_version: 1
""", "err:acc-fp8-msamp-fsdp")
add("bad-ao-fsdp-ram", """
distributed_type: FSDP
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: AO
fsdp_config:
  fsdp_version: 2
""", "err:acc-fp8-ao-fsdp-ram-efficient")
add("bad-ac-offload-fsdp1", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 1
  fsdp_activation_checkpointing: true
  fsdp_activation_checkpointing_offload: true
""", "err:acc-fsdp-ac-offload-requires-fsdp2")
add("bad-ac-offload-without-ac", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_activation_checkpointing_offload: true
""", "err:acc-fsdp-ac-offload-requires-ac")
add("bad-fsdp2-local-sd", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_state_dict_type: LOCAL_STATE_DICT
""", "err:acc-fsdp2-local-state-dict")
add("bad-fsdp2-sync-false", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_sync_module_states: false
""", "err")
add("bad-fsdp2-reshard-strategy", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_reshard_after_forward: FULL_SHARD
""", "err:acc-fsdp-reshard-after-forward-invalid")
add("bad-parallelism-mismatch", """
distributed_type: FSDP
num_processes: 8
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_shard_size: 2
  parallelism_config_tp_size: 2
""", "err:acc-parallelism-size-mismatch")
add("bad-parallelism-cp-fsdp1", """
distributed_type: FSDP
num_processes: 4
fsdp_config:
  fsdp_version: 1
parallelism_config:
  parallelism_config_dp_shard_size: 2
  parallelism_config_cp_size: 2
""", "err")
add("bad-parallelism-cp-sp", """
distributed_type: DEEPSPEED
num_processes: 4
deepspeed_config:
  zero_stage: 3
parallelism_config:
  parallelism_config_cp_size: 2
  parallelism_config_sp_size: 2
""", "err")
add("bad-parallelism-cp-multi-gpu", """
distributed_type: MULTI_GPU
num_processes: 2
parallelism_config:
  parallelism_config_cp_size: 2
""", "err")
add("bad-port-range", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: 70000
""", "err:acc-port-out-of-range")
add("bad-missing-dt", """
compute_environment: LOCAL_MACHINE
num_processes: 2
mixed_precision: bf16
""", "err:acc-missing-distributed-type")
add("bad-gpu-ids-one-multigpu", """
distributed_type: MULTI_GPU
num_processes: 1
gpu_ids: '0'
""", "err:acc-gpu-ids-too-few")
add("bad-fsdp-version-3", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 3
""", "err")

# ------------------------------------------------------------------ silent drops (warnings)
add("warn-fsdp2-sharding-strategy", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_sharding_strategy: SHARD_GRAD_OP
""", "warn:acc-fsdp2-key-ignored")
add("warn-fsdp1-reshard", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 1
  fsdp_reshard_after_forward: false
""", "warn:acc-fsdp1-reshard-after-forward-ignored")
add("warn-ds-block-under-multigpu", """
distributed_type: MULTI_GPU
num_processes: 2
deepspeed_config:
  zero_stage: 3
""", "warn:acc-block-ignored")
add("warn-fsdp-block-under-ds", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 2
fsdp_config:
  fsdp_version: 2
""", "warn:acc-block-ignored")
add("warn-fp8-config-bf16", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: bf16
fp8_config:
  backend: TE
""", "warn:acc-fp8-config-ignored")
add("warn-zero3-init-stage2", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 2
  zero3_init_flag: true
""", "warn:acc-ds-zero3-init-not-stage3")
add("warn-use-cpu-fsdp", """
distributed_type: FSDP
num_processes: 2
use_cpu: true
fsdp_config:
  fsdp_version: 2
""", "warn:acc-use-cpu-ignored")
add("warn-multi-cpu-no-mpirun", """
distributed_type: MULTI_CPU
num_processes: 4
use_cpu: true
""", "warn:acc-multi-cpu-single-process")
add("warn-ds-nvme", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 3
  offload_param_device: nvme
  offload_optimizer_device: nvme
  offload_param_nvme_path: /nvme
""", "warn:acc-ds-nvme-path-dropped")
add("warn-parallelism-under-no", """
distributed_type: 'NO'
num_processes: 1
parallelism_config:
  parallelism_config_tp_size: 1
""", "warn:acc-parallelism-ignored")
add("warn-cls-list", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap:
  - LlamaDecoderLayer
""", "warn:acc-fsdp-cls-to-wrap-list")
add("warn-debug-quoted-false", """
distributed_type: MULTI_GPU
num_processes: 2
debug: 'false'
""", "warn:acc-false-string-is-truthy")
add("warn-dynamo-under-ds", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 2
dynamo_config:
  dynamo_backend: INDUCTOR
""", "warn:acc-dynamo-ignored-under-deepspeed")
add("warn-num-processes-not-divisible", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 5
machine_rank: 0
main_process_ip: 10.0.0.1
main_process_port: 29500
""", "warn:acc-num-processes-not-divisible")
add("warn-zero3-save-yes", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 3
  zero3_save_16bit_model: 'yes'
""", "warn:acc-ds-zero3-save-not-true")
add("warn-legacy-dynamo-replaces", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_backend: INDUCTOR
dynamo_config:
  dynamo_mode: max-autotune
""", "warn:acc-dynamo-config-replaced")

# ------------------------------------------------------------------ YAML 1.1 traps and odd syntax
add("trap-dt-no-unquoted", """
distributed_type: NO
num_processes: 1
""", "ok")
add("trap-leading-zero-port", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: 029500
""", "err:acc-int-value")  # a string for YAML 1.1
add("trap-sexagesimal", """
distributed_type: MULTI_GPU
num_processes: 2
main_process_port: 1:30
""", "warn:yaml-1-1-integer")
add("trap-fsdp-offload-yes", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_offload_params: yes
""", "ok")
add("trap-dup-key", """
distributed_type: MULTI_GPU
num_processes: 2
num_processes: 4
""", "err:yaml-duplicate-key")
add("trap-multidoc", """
distributed_type: MULTI_GPU
num_processes: 2
---
distributed_type: FSDP
""", "err")
add("trap-numeric-key", """
distributed_type: MULTI_GPU
num_processes: 2
8: gpus
""", "err")
add("trap-python-tag", """
distributed_type: MULTI_GPU
num_processes: !!python/object/apply:os.getpid []
""", "err")
add("trap-tab-indent", "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n\tfsdp_version: 2\n", "err")
add("trap-empty-blocks", """
distributed_type: MULTI_GPU
num_processes: 2
fsdp_config:
deepspeed_config: {}
megatron_lm_config: null
dynamo_config: {}
fp8_config: {}
parallelism_config: {}
""", "ok")
add("trap-block-is-list", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
- fsdp_version: 2
""", "warn:acc-block-not-mapping")
add("trap-block-is-string", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config: ds_config.json
""", "err:acc-ds-config-not-mapping")
add("trap-gpu-ids-comma-int", """
distributed_type: MULTI_GPU
num_processes: 2
gpu_ids: 0,1
""", "ok")
add("trap-num-processes-float", """
distributed_type: MULTI_GPU
num_processes: 2.0
""", "err")
add("trap-ipv6", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 16
main_process_ip: "fe80::1"
main_process_port: 29500
""", "ok")
add("trap-ip-as-float", """
distributed_type: 'NO'
num_machines: 2
num_processes: 1
main_process_ip: 10.0
main_process_port: 29500
""", "err")

# ------------------------------------------------------------------ second round (after the first oracle run)
add("ok-fp8-te-override-list", """
distributed_type: MULTI_GPU
num_processes: 8
mixed_precision: fp8
fp8_config:
  backend: TE
  fp8_format: HYBRID
  amax_history_len: 1024
  amax_compute_algo: max
  override_linear_precision: [false, false, false]
""", "ok")
add("ok-multi-cpu-multinode", """
distributed_type: MULTI_CPU
num_machines: 2
num_processes: 8
machine_rank: 0
main_process_ip: 10.0.0.5
main_process_port: 29500
use_cpu: true
mpirun_config:
  mpirun_hostfile: hosts.txt
""", "ok")
add("bad-ds-config-list", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
- zero_stage: 2
- offload_optimizer_device: cpu
""", "err:acc-ds-config-not-mapping")
add("warn-dynamo-config-string", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config: INDUCTOR
""", "warn:acc-block-not-mapping")
add("warn-mpirun-config-path", """
distributed_type: MULTI_CPU
num_processes: 4
use_cpu: true
mpirun_config: /etc/mpi/hostfile
""", "warn:acc-block-not-mapping")

# ------------------------------------------------------------------ third round: subtler mistakes
add("r3-fsdp-min-params-float", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_auto_wrap_policy: SIZE_BASED_WRAP
  fsdp_min_num_params: 1.0e+8
""", "err:acc-fsdp-min-num-params-invalid")
add("r3-fsdp-version-string", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: '2'
  fsdp_reshard_after_forward: true
""", "ok")
add("r3-fsdp1-ram-no-sync", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 1
  fsdp_cpu_ram_efficient_loading: true
  fsdp_sync_module_states: false
""", "err:acc-fsdp-ram-efficient-needs-sync")
add("r3-fsdp-block-under-multigpu", """
distributed_type: MULTI_GPU
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_offload_params: true
""", "warn:acc-block-ignored")
add("r3-fsdp-cls-spaces", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer, LlamaMLP
""", "warn:acc-fsdp-cls-to-wrap-spaces")
add("r3-fsdp-offload-quoted-true", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_offload_params: 'True'
  fsdp_use_orig_params: 'false'
""", "ok")
add("r3-fsdp-strategy-hybrid-int", """
distributed_type: FSDP
num_processes: 8
fsdp_config:
  fsdp_version: 1
  fsdp_sharding_strategy: 6
""", "err:acc-fsdp-sharding-strategy-invalid")
add("r3-fsdp-ac-offload-no-version", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_activation_checkpointing: true
  fsdp_activation_checkpointing_offload: true
""", "err:acc-fsdp-ac-offload-requires-fsdp2")
add("r3-ds-clip-auto", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 2
  gradient_clipping: auto
""", "ok")
add("r3-ds-stage-string", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: '2'
""", "ok")
add("r3-ds-offload-upper", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 3
  offload_optimizer_device: CPU
""", "ok")
add("r3-ds-launcher-mpich", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: 29500
deepspeed_config:
  deepspeed_hostfile: hostfile
  deepspeed_multinode_launcher: mpich
  zero_stage: 2
""", "ok")
add("r3-ds-launcher-upper", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: 29500
deepspeed_config:
  deepspeed_hostfile: hostfile
  deepspeed_multinode_launcher: OpenMPI
  zero_stage: 2
""", "ok")
add("r3-ds-moe", """
distributed_type: DEEPSPEED
num_processes: 8
mixed_precision: bf16
deepspeed_config:
  zero_stage: 3
  deepspeed_moe_layer_cls_names: MixtralSparseMoeBlock
  zero3_init_flag: true
""", "ok")
add("r3-ds-stage0-offload", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 0
  offload_optimizer_device: cpu
""", "ok")  # accepted; whether ZeRO-0 uses the offload is DeepSpeed engine behaviour (not reached)
add("r3-ds-file-mp-no", """
distributed_type: DEEPSPEED
num_processes: 2
mixed_precision: 'no'
deepspeed_config:
  deepspeed_config_file: ds_config.json
""", "err:acc-ds-config-file-conflict")
add("r3-ds-file-missing", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  deepspeed_config_file: /nonexistent/ds.json
""", "err")
add("r3-mp-fp8-no-block", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
""", "ok")
add("r3-mp-fp8-multi-cpu", """
distributed_type: MULTI_CPU
num_processes: 1
use_cpu: true
mixed_precision: fp8
""", "ok")  # accepted; fp8 on CPU fails only when the model runs
add("r3-fp8-backend-no", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: 'NO'
""", "ok")
add("r3-fp8-backend-unquoted-no", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: NO
""", "err:acc-fp8-backend-invalid")
add("r3-fp8-msamp-o3", """
distributed_type: DEEPSPEED
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: MSAMP
  opt_level: O3
deepspeed_config:
  zero_stage: 1
""", "err:acc-fp8-msamp-opt-level")
add("r3-fp8-te-margin-str", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: TE
  margin: one
""", "err:acc-fp8-te-value-invalid")
add("r3-fp8-ao-pad-word", """
distributed_type: FSDP
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: AO
  pad_inner_dim: sometimes
fsdp_config:
  fsdp_version: 2
  fsdp_cpu_ram_efficient_loading: false
""", "err:acc-fp8-ao-value-invalid")
add("r3-dynamo-torch-compile", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: torch_compile
""", "err:acc-invalid-dynamo-backend")
add("r3-dynamo-no-with-mode", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: 'NO'
  dynamo_mode: default
""", "ok")
add("r3-dynamo-fullgraph-word", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_use_fullgraph: sure
""", "err:acc-dynamo-bool-value")
add("r3-dynamo-mode-no-cudagraphs", """
distributed_type: 'NO'
num_processes: 1
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_mode: max-autotune-no-cudagraphs
""", "ok")
add("r3-dynamo-mode-other-backend", """
distributed_type: 'NO'
num_processes: 1
dynamo_config:
  dynamo_backend: EAGER
  dynamo_mode: turbo
""", "ok")  # accepted; torch passes the mode to the eager backend, which ignores it (compile not reached)
add("r3-megatron-clip-none", """
distributed_type: MEGATRON_LM
num_processes: 4
megatron_lm_config:
  megatron_lm_tp_degree: 2
  megatron_lm_gradient_clipping: none
""", "err:acc-megatron-value-invalid")
add("r3-megatron-sp-word", """
distributed_type: MEGATRON_LM
num_processes: 4
megatron_lm_config:
  megatron_lm_tp_degree: 2
  megatron_lm_sequence_parallelism: enabled
""", "err:acc-megatron-value-invalid")
add("r3-parallelism-ds-tp", """
distributed_type: DEEPSPEED
num_processes: 4
deepspeed_config:
  zero_stage: 2
parallelism_config:
  parallelism_config_tp_size: 2
  parallelism_config_dp_shard_size: 2
""", "ok")
add("r3-parallelism-multigpu-ddp-tp", """
distributed_type: MULTI_GPU
num_processes: 4
parallelism_config:
  parallelism_config_dp_replicate_size: 2
  parallelism_config_tp_size: 2
""", "err:acc-parallelism-tp-cp-with-pure-dp")
add("r3-parallelism-sp-backend-ulysses", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  zero_stage: 3
parallelism_config:
  parallelism_config_sp_backend: ulysses
  parallelism_config_sp_size: 2
""", "err:acc-parallelism-backend-invalid")
add("r3-parallelism-size-string", """
distributed_type: FSDP
num_processes: 4
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_shard_size: '4'
""", "ok")
add("r3-parallelism-multinode", """
distributed_type: FSDP
num_machines: 2
num_processes: 16
machine_rank: 0
main_process_ip: 10.0.0.1
main_process_port: 29500
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_replicate_size: 2
  parallelism_config_dp_shard_size: 4
  parallelism_config_tp_size: 2
""", "ok")
add("r3-machine-rank-too-big", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 16
machine_rank: 2
main_process_ip: 10.0.0.1
main_process_port: 29500
""", "warn:acc-machine-rank-out-of-range")
add("r3-num-processes-zero", """
distributed_type: MULTI_GPU
num_processes: 0
""", "err:acc-no-worker-processes")
add("r3-num-processes-minus-one", """
distributed_type: MULTI_GPU
num_processes: -1
""", "err:acc-num-processes-required")
add("r3-num-machines-zero", """
distributed_type: MULTI_GPU
num_machines: 0
num_processes: 2
""", "ok")  # accepted; 0 machines is read as a single-node launch
add("r3-port-quoted", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: '29500'
""", "err:acc-int-value")
add("r3-gpu-ids-spaces", """
distributed_type: MULTI_GPU
num_processes: 2
gpu_ids: 0, 1
""", "ok")  # accepted; CUDA_VISIBLE_DEVICES='0, 1' is parsed by the CUDA runtime (not reached)
add("r3-gpu-ids-fewer", """
distributed_type: MULTI_GPU
num_processes: 4
gpu_ids: 0,1
""", "warn:acc-gpu-ids-fewer-than-processes")
add("r3-key-trailing-space", """
distributed_type: MULTI_GPU
"num_processes ": 2
""", "err:acc-unknown-top-level-key")
add("r3-key-uppercase", """
Distributed_Type: FSDP
num_processes: 2
""", "err")
add("r3-dt-trailing-space-quoted", """
distributed_type: "FSDP "
num_processes: 2
""", "err:acc-invalid-distributed-type")
add("r3-mp-trailing-space-quoted", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: 'bf16 '
""", "err:acc-invalid-mixed-precision")
add("r3-alias-scalar", """
distributed_type: FSDP
num_processes: &n 4
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_shard_size: *n
""", "ok")
add("r3-null-dt", """
distributed_type:
num_processes: 1
""", "ok")
add("r3-sagemaker", """
compute_environment: AMAZON_SAGEMAKER
distributed_type: DATA_PARALLEL
ec2_instance_type: ml.p3.16xlarge
iam_role_name: accelerate_sagemaker_execution_role
mixed_precision: fp16
num_machines: 1
profile: default
region: us-east-1
sagemaker_inputs_file: inputs.tsv
use_cpu: false
""", "err:acc-sagemaker-launch-broken")
add("r3-sagemaker-missing-role", """
compute_environment: AMAZON_SAGEMAKER
distributed_type: 'NO'
ec2_instance_type: ml.p3.2xlarge
mixed_precision: 'no'
""", "err")
add("r3-tpu-cluster", """
distributed_type: XLA
num_processes: 8
tpu_use_cluster: true
tpu_name: my-pod
tpu_zone: us-central2-b
commands:
- pip install accelerate
downcast_bf16: 'no'
""", "ok")
add("r3-tpu-bf16-downcast", """
distributed_type: XLA
num_processes: 8
mixed_precision: bf16
downcast_bf16: true
""", "ok")
add("r3-use-cpu-multigpu", """
distributed_type: MULTI_GPU
num_processes: 2
use_cpu: true
""", "warn:acc-use-cpu-ignored")
add("r3-debug-true", """
distributed_type: MULTI_GPU
num_processes: 2
debug: true
enable_cpu_affinity: true
""", "ok")
add("r3-megatron-with-fsdp-block", """
distributed_type: MEGATRON_LM
num_processes: 4
megatron_lm_config:
  megatron_lm_tp_degree: 2
fsdp_config:
  fsdp_version: 2
""", "warn:acc-block-ignored")
add("r3-multi-gpu-single-proc-all", """
distributed_type: MULTI_GPU
num_processes: 1
gpu_ids: all
""", "ok")
add("r3-no-with-num-processes-4", """
distributed_type: 'NO'
num_processes: 4
""", "warn:acc-num-processes-ignored")
add("r4-fewer-processes-than-machines", """
distributed_type: FSDP
num_machines: 2
num_processes: 1
machine_rank: 0
main_process_ip: 10.0.0.1
main_process_port: 29500
fsdp_config:
  fsdp_version: 2
""", "err:acc-no-worker-processes")
add("r4-ds-standard-zero-per-node", """
distributed_type: DEEPSPEED
num_machines: 4
num_processes: 2
machine_rank: 0
main_process_ip: 10.0.0.1
main_process_port: 29500
deepspeed_config:
  deepspeed_multinode_launcher: standard
  zero_stage: 2
""", "err:acc-no-worker-processes")
add("r4-cls-spaces-size-wrap", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_auto_wrap_policy: SIZE_BASED_WRAP
  fsdp_min_num_params: 1000000
  fsdp_transformer_layer_cls_to_wrap: GPT2Block, GPT2MLP
""", "warn:acc-fsdp-wrap-key-ignored")
add("r4-machine-rank-negative", """
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 16
machine_rank: -1
main_process_ip: 10.0.0.1
main_process_port: 29500
""", "warn:acc-machine-rank-out-of-range")

# ------------------------------------------------------------------ round 5: patterns seen in public repositories
add("r5-blog-fsdp-wrong-policy", """
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_LAYER
  fsdp_transformer_layer_cls_to_wrap: [GemmaDecoderLayer]
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_offload_params: false
  fsdp_cpu_ram_efficiency_effort: 1
""", "err:acc-fsdp-auto-wrap-policy-invalid")
add("r5-ds-with-leftover-fsdp", """
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
num_processes: 8
downcast_bf16: 'no'
deepspeed_config:
  zero_stage: 2
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_forward_prefetch: FALSE
  fsdp_offload_params: false
  fsdp_sharding_strategy: 1
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_transformer_layer_cls_to_wrap: []
""", "warn:acc-block-ignored")
add("r5-trainer-style-lowercase", """
distributed_type: FSDP
num_processes: 4
fsdp_config:
  fsdp_backward_prefetch: backward_pre
  fsdp_state_dict_type: full_state_dict
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
""", "ok")
add("r5-trainer-fsdp-key", """
distributed_type: FSDP
num_processes: 4
fsdp: full_shard auto_wrap
""", "err:acc-unknown-top-level-key")
add("json-multi-gpu", """{
  "compute_environment": "LOCAL_MACHINE",
  "distributed_type": "MULTI_GPU",
  "mixed_precision": "bf16",
  "num_machines": 1,
  "num_processes": 4,
  "use_cpu": false
}
""", "ok", "config.json")
add("json-fsdp2", """{
  "distributed_type": "FSDP",
  "num_processes": 8,
  "fsdp_config": {"fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                  "fsdp_transformer_layer_cls_to_wrap": "LlamaDecoderLayer", "fsdp_reshard_after_forward": true}
}
""", "ok", "config.json")
add("json-trailing-comma", """{
  "distributed_type": "MULTI_GPU",
  "num_processes": 4,
}
""", "err", "config.json")
add("json-no-as-string-ok", """{"distributed_type": "NO", "num_processes": 1, "mixed_precision": "no"}
""", "ok", "config.json")
add("json-gpu-ids-int", """{"distributed_type": "MULTI_GPU", "num_processes": 2, "gpu_ids": 0}
""", "err:acc-gpu-ids-not-string", "config.json")
add("json-fsdp-typo", """{"distributed_type": "FSDP", "num_processes": 2, "fsdp_config": {"fsdp_verison": 2}}
""", "warn:acc-fsdp-unknown-key", "config.json")
add("json-dup-key", """{"distributed_type": "MULTI_GPU", "num_processes": 2, "num_processes": 4}
""", "err", "config.json")
add("json-ds-inline", """{
  "distributed_type": "DEEPSPEED",
  "num_processes": 2,
  "mixed_precision": "bf16",
  "deepspeed_config": {"zero_stage": 3, "offload_param_device": "cpu", "zero3_init_flag": true}
}
""", "ok", "config.json")
add("json-unknown-top", """{"distributed_type": "MULTI_GPU", "num_processes": 2, "gradient_accumulation_steps": 4}
""", "err:acc-unknown-top-level-key", "config.json")

# ------------------------------------------------------------------ round 6: found by mutating the valid configs above
add("r6-ds-offload-auto", """
distributed_type: DEEPSPEED
num_processes: 4
mixed_precision: bf16
deepspeed_config:
  zero_stage: 3
  offload_optimizer_device: auto
  offload_param_device: auto
""", "err:acc-ds-offload-auto")
add("r6-ds-offload-AUTO", """
distributed_type: DEEPSPEED
num_processes: 4
deepspeed_config:
  zero_stage: 3
  offload_optimizer_device: AUTO
""", "err:acc-ds-offload-auto")  # the launcher lower()s the device
add("r6-machine-rank-float", """
distributed_type: FSDP
num_machines: 2
num_processes: 16
machine_rank: 1.0
main_process_ip: 10.0.0.1
main_process_port: 29500
fsdp_config:
  fsdp_version: 2
""", "ok")
add("r6-ds-runner-port-bool", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
machine_rank: 0
main_process_ip: 192.168.0.10
main_process_port: true
deepspeed_config:
  deepspeed_hostfile: /etc/hostfile
  zero_stage: 2
""", "err:acc-int-value")
add("r6-ds-runner-port-word-rank1", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
machine_rank: 1
main_process_ip: 192.168.0.10
main_process_port: default
deepspeed_config:
  deepspeed_hostfile: /etc/hostfile
  zero_stage: 2
""", "err:acc-int-value")
add("r6-ds-config-file-int", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  deepspeed_config_file: 2
""", "err:acc-ds-config-file-not-path")
add("r6-ds-config-file-inline-mapping", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  deepspeed_config_file:
    zero_optimization:
      stage: 2
""", "err:acc-ds-config-file-not-path")
add("r6-ds-config-file-inline-json-string", """
distributed_type: DEEPSPEED
num_processes: 2
deepspeed_config:
  deepspeed_config_file: '{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}'
""", "ok")

# ------------------------------------------------------------------ round 7: odd but legal YAML (accelerate decides)
add("r7-merge-list", """
distributed_type: FSDP
num_processes: 2
fsdp_config:
  <<: [{fsdp_version: 2}, {fsdp_offload_params: true}]
""", "ok")
add("r7-complex-keys", """
? distributed_type
: MULTI_GPU
? num_processes
: 2
""", "ok")
add("r7-explicit-int-tag", """
distributed_type: MULTI_GPU
num_processes: !!int '2'
""", "ok")
add("r7-explicit-float-tag", """
distributed_type: MULTI_GPU
num_processes: !!float 2
""", "err:acc-int-value")
add("r7-str-tag-no", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: !!str no
""", "ok")
add("r7-hex-and-underscore", """
distributed_type: MULTI_GPU
num_processes: 0x8
main_process_port: 29_500
""", "ok")
add("r7-yaml12-octal", """
distributed_type: MULTI_GPU
num_processes: 0o2
""", "err:acc-int-value")
add("r7-yaml-directive", """
%YAML 1.1
---
distributed_type: MULTI_GPU
num_processes: 2
""", "ok")
add("r7-null-key", """
distributed_type: MULTI_GPU
num_processes: 2
~: x
""", "err:acc-unknown-top-level-key")
add("r7-omap-block", """
distributed_type: FSDP
num_processes: 2
fsdp_config: !!omap [{fsdp_version: 2}]
""", "warn:acc-block-not-mapping")
add("r7-only-comment", """
# accelerate config (to be filled in)
""", "err")
add("r7-mode-null-tag", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_mode: !!null
""", "err:acc-dynamo-mode-invalid")
add("r7-python-name-tag", """
distributed_type: MULTI_GPU
num_processes: 2
enable_cpu_affinity: !!python/name:os.system
""", "err:yaml-unsafe-tag")
add("r7-flow-trailing-comma", """
{distributed_type: FSDP, num_processes: 2, fsdp_config: {fsdp_version: 2,}}
""", "ok")
add("r7-crlf", "distributed_type: FSDP\r\nnum_processes: 2\r\nfsdp_config:\r\n  fsdp_version: 2\r\n", "ok")
add("r7-typo-num-processes-only-one-error", """
distributed_type: MULTI_GPU
num_proceses: 4
""", "err:acc-unknown-top-level-key")

# ------------------------------------------------------------------ round 8: fp8 keys for another recipe
add("r8-te-with-opt-level", """
distributed_type: MULTI_GPU
num_processes: 8
mixed_precision: fp8
fp8_config:
  backend: TE
  fp8_format: HYBRID
  opt_level: O2
""", "warn:acc-fp8-key-other-backend")
add("r8-msamp-with-te-keys", """
distributed_type: DEEPSPEED
num_processes: 4
mixed_precision: fp8
fp8_config:
  backend: MSAMP
  opt_level: O1
  amax_history_len: 16
deepspeed_config:
  zero_stage: 2
""", "warn:acc-fp8-key-other-backend")
add("r8-ao-bad-te-value", """
distributed_type: FSDP
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: AO
  fp8_format: hybrid-ish
fsdp_config:
  fsdp_version: 2
  fsdp_cpu_ram_efficient_loading: false
""", "warn:acc-fp8-key-other-backend")
add("r8-te-bad-ao-value", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: TE
  pad_inner_dim: sometimes
""", "warn:acc-fp8-key-other-backend")

# ------------------------------------------------------------------ round 9: wrap keys without the policy that reads them
add("r9-cls-without-policy", """
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_processes: 8
mixed_precision: bf16
fsdp_config:
  fsdp_version: 2
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_state_dict_type: SHARDED_STATE_DICT
""", "warn:acc-fsdp-wrap-key-ignored")
add("r9-min-params-with-transformer-wrap", """
distributed_type: FSDP
num_processes: 8
fsdp_config:
  fsdp_version: 1
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: GPT2Block
  fsdp_min_num_params: 1000000
""", "warn:acc-fsdp-wrap-key-ignored")
add("r9-min-params-size-wrap-lower", """
distributed_type: FSDP
num_processes: 8
fsdp_config:
  fsdp_version: 1
  fsdp_auto_wrap_policy: size_based_wrap
  fsdp_min_num_params: 1000000
""", "ok")

# ------------------------------------------------------------------ round 10: dynamo settings without a backend
add("r10-dynamo-mode-only", """
distributed_type: MULTI_GPU
num_processes: 4
mixed_precision: bf16
dynamo_config:
  dynamo_mode: max-autotune
  dynamo_use_fullgraph: true
""", "warn:acc-dynamo-settings-without-backend")
add("r10-dynamo-backend-no-regional", """
distributed_type: 'NO'
num_processes: 1
dynamo_config:
  dynamo_backend: 'NO'
  dynamo_use_regional_compilation: true
""", "warn:acc-dynamo-settings-without-backend")
add("r10-dynamo-written-by-config-no", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: 'NO'
  dynamo_mode: default
  dynamo_use_dynamic: false
  dynamo_use_fullgraph: false
""", "ok")

# ------------------------------------------------------------------ round 11: found by mutating distributed_type / values
add("r11-fp8-backend-list", """
distributed_type: MULTI_GPU
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: []
  fp8_format: HYBRID
""", "err:acc-fp8-backend-invalid")  # crashed acc-fp8-key-other-backend (unhashable list) before the fix
add("r11-auto-processes-parallelism", """
distributed_type: FSDP
num_processes: auto
fsdp_config:
  fsdp_version: 2
parallelism_config:
  parallelism_config_dp_replicate_size: 2
  parallelism_config_dp_shard_size: 4
""", "ok")  # torchrun counts this machine's GPUs: the size check is not the file's to decide

# ------------------------------------------------------------------ round 12: hostile values in every slot (oracle-checked)
add("r12-te-null-history", """
distributed_type: MULTI_GPU
num_processes: 8
mixed_precision: fp8
fp8_config:
  backend: TE
  amax_history_len: null
""", "ok")  # setup_fp8_env skips None: the recipe default applies (was a false error)
add("r12-ds-runner-port-false", """
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
machine_rank: 0
main_process_ip: 192.168.0.10
main_process_port: false
deepspeed_config:
  deepspeed_hostfile: /etc/hostfile
  zero_stage: 2
""", "ok")  # false == 0: a free port is picked (was a false error)
add("r12-num-processes-true-multinode", """
distributed_type: FSDP
num_machines: 4
num_processes: true
machine_rank: 0
main_process_ip: node0
main_process_port: 29500
fsdp_config:
  fsdp_version: 2
""", "err:acc-no-worker-processes")
add("r12-multi-cpu-port-mapping", """
distributed_type: MULTI_CPU
num_machines: 2
num_processes: 8
machine_rank: 0
main_process_ip: 10.0.0.5
main_process_port:
  port: 29500
use_cpu: true
mpirun_config:
  mpirun_hostfile: hosts.txt
""", "err:acc-multinode-missing-port")
add("r12-megatron-clip-null", """
distributed_type: MEGATRON_LM
num_processes: 8
megatron_lm_config:
  megatron_lm_tp_degree: 2
  megatron_lm_gradient_clipping: null
""", "err:acc-megatron-value-invalid")
add("r12-megatron-tp-null", """
distributed_type: MEGATRON_LM
num_processes: 8
megatron_lm_config:
  megatron_lm_tp_degree:
  megatron_lm_pp_degree: 2
""", "err:acc-megatron-value-invalid")
add("r12-fsdp1-parallelism-auto-processes", """
distributed_type: FSDP
num_processes: auto
fsdp_config: []
parallelism_config:
  parallelism_config_dp_replicate_size: 2
  parallelism_config_dp_shard_size: 4
""", "err:acc-parallelism-unsupported-distributed-type")
add("r12-dynamo-mode-empty", """
distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_mode: ''
""", "ok")
add("r12-override-bool-auto-backend", """
distributed_type: MULTI_GPU
num_processes: 8
mixed_precision: fp8
fp8_config:
  fp8_format: HYBRID
  override_linear_precision: false
""", "err:acc-fp8-te-value-invalid")  # setup_fp8_env indexes it for every backend
add("r12-override-list-ao-backend", """
distributed_type: FSDP
num_processes: 2
mixed_precision: fp8
fp8_config:
  backend: AO
  override_linear_precision: [1, x, 2]
fsdp_config:
  fsdp_version: 2
  fsdp_cpu_ram_efficient_loading: false
""", "warn:acc-fp8-key-other-backend")  # indexable: exported, never read by the AO recipe
add("r12-float-machines-float-ip", """
distributed_type: 'NO'
num_machines: 1.5
num_processes: 1
main_process_ip: 10.0
main_process_port: 29500
""", "err:acc-env-value-not-text")
add("r13-leftover-ds-file-multi-gpu", """
distributed_type: MULTI_GPU
num_processes: 2
deepspeed_config:
  deepspeed_config_file: '{"zero_optimization": {"stage": 2}}'
""", "warn:acc-block-ignored")  # the JSON is never read under MULTI_GPU: its problems are not errors
