"""The generated grid of launch commands x configs shared by the launch tests (data only)."""
from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
ACC_ORACLE = REPO / "tests" / "oracle" / "accelerate_oracle.py"
RUN_ORACLE = Path(__file__).with_name("runner_oracle.py")
SEED = 20261201

if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

CONFIGS = {
    "none": None,
    "gpu2": "distributed_type: MULTI_GPU\nnum_processes: 2\n",
    "gpu_2m": "distributed_type: MULTI_GPU\nnum_processes: 8\nnum_machines: 2\nmachine_rank: 1\n"
              "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n",
    "ds2": "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 2\n",
    "ds_2m": "distributed_type: DEEPSPEED\nnum_processes: 16\nnum_machines: 2\nmachine_rank: 0\n"
             "main_process_ip: 10.0.0.1\nmain_process_port: 29500\ndeepspeed_config:\n  zero_stage: 3\n"
             "  deepspeed_multinode_launcher: standard\n",
    "fsdp2": "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
             "  fsdp_auto_wrap_policy: NO_WRAP\n",
    "no1": "distributed_type: 'NO'\nnum_processes: 1\n",
    "cpu4": "distributed_type: MULTI_CPU\nnum_processes: 4\n",
    "gpu_nonproc": "distributed_type: MULTI_GPU\n",
    "fsdp_pc": "distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
               "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 2\n",
    "gpu_id0": "distributed_type: MULTI_GPU\nnum_processes: 2\ngpu_ids: '0'\n",
    "fsdp_nosync": "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sync_module_states: false\n"
                   "  fsdp_cpu_ram_efficient_loading: false\n",
    "ds_file": "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n",
    "ds_file_mp": "distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: bf16\ndeepspeed_config:\n"
                  "  deepspeed_config_file: ds.json\n",
    "tpu": "distributed_type: XLA\nnum_processes: 8\n",
    "dyn": "distributed_type: MULTI_GPU\nnum_processes: 2\ndynamo_config:\n  dynamo_backend: INDUCTOR\n"
           "  dynamo_mode: default\ndebug: true\n",
    "mp_fp16": "distributed_type: MULTI_GPU\nnum_processes: 4\nmixed_precision: fp16\nmain_process_port: 29600\n",
}
PARADIGM = ["", "--multi_gpu", "--use_deepspeed", "--use_fsdp", "--cpu", "--use_megatron_lm", "--tpu",
            "--use_megatron_lm --use_deepspeed"]
NPROC = ["", "--num_processes 1", "--num_processes 2", "--num-processes 8"]
EXTRA = ["", "--num_machines 2", "--num_machines 2 --machine_rank 1 --main_process_ip 10.0.0.2 --main_process_port 29555",
         "--mixed_precision fp16", "--gpu_ids 0", "--gpu_ids 0,1", "--zero_stage 3", "--fsdp_version 2 --use_parallelism_config",
         "--use_parallelism_config", "--main_process_port 0", "--same_network --num_machines 2 --main_process_ip 10.0.0.3",
         "--fsdp_sync_module_states false", "--fsdp_cpu_ram_efficient_loading true", "--dynamo_backend inductor",
         "--num_proc 2", "--mixed_precision fp17", "-m --no_python", "--megatron_lm_tp_degree 2",
         "--num_processes 4 --num_processes 2", "--deepspeed_multinode_launcher standard", "--machine_rank 1",
         "--num_processes two", "--gradient_accumulation_steps 4", "--mixed_precision no",
         "--mixed_precision fp8 --fp8_backend te", "--debug", "--dynamo_backend no --dynamo_mode max-autotune",
         "--fsdp_sharding_strategy SHARD_GRAD_OP", "--deepspeed_config_file ds.json", "--num_machines 1 --machine_rank 0",
         "--megatron_lm_no_load_optim False", "--rdzv_backend c10d --num_machines 2 --main_process_ip 10.0.0.4"]
N_ACC = 520


def accelerate_grid():
    rng = random.Random(SEED)
    full = list(itertools.product(CONFIGS, PARADIGM, NPROC, EXTRA))
    picks = rng.sample(full, N_ACC)
    out = []
    for i, (cfg, par, npr, extra) in enumerate(picks):
        flags = " ".join(x for x in (par, npr, extra) if x)
        if CONFIGS[cfg] is not None:
            flags = "--config_file config.yaml " + flags
        elif "num_processes" not in npr + extra and "num-processes" not in npr:
            flags += " --num_processes 2"  # no file: the machine's GPU count would decide
        out.append({"id": f"acc:{i}", "config": cfg, "command": f"accelerate launch {flags} train.py --lr 1e-4"})
    return out


TORCHRUN = ["--standalone --nproc-per-node 2", "--nnodes 2 --nproc-per-node 4", "--nnodes 2:1 --nproc-per-node 4",
            "--nnodes 1:2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29400",
            "--nnodes 2 --nproc_per_node 4 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500",
            "--nproc-per-node 0", "--nproc-per-node auto", "--nproc-per-node many", "--nproc 2",
            "--nproc-per 2", "--nnodes x", "--max-restarts -1 --nproc-per-node 2", "--standalone --rdzv-endpoint h:1",
            "--nnodes 2 --rdzv-backend c10d --node-rank 1 --rdzv-endpoint h:1", "--local-ranks-filter a,b",
            "--local-ranks-filter 0,1 --nproc-per-node 2", "-m --no-python", "--nnodes 0", "--master-port 29501",
            "--start-method thread", "--nnodes=2 --nproc-per-node=8 --node-rank=1 --master-addr=10.1.1.1"]
DEEPSPEED = ["--num_gpus 2", "--num_gpus 2 --include localhost:0", "--include localhost:0 --exclude localhost:1",
             "--hostfile hostfile", "--hostfile bad_hostfile", "--hostfile hostfile --num_nodes 1",
             "--num_nodes 2", "--hostfile hostfile --launcher ssh", "--hostfile hostfile --launcher openmpi",
             "--hostfile dup_hostfile", "--num_gpu 2", "--num_gpus two", "--master_port 29501 --num_gpus 1",
             "--hostfile hostfile --num_gpus 2 --include worker-1", "--autotuning maybe", "--no_ssh --node_rank 0",
             "--hostfile hostfile --num_gpus 12", "--hostfile hostfile --num_gpus 4 --num_nodes 1",
             "--hostfile hostfile --include worker-2", "--hostfile hostfile --exclude worker-1:0,1",
             "--hostfile hostfile --include worker-9", "--hostfile hostfile --no_ssh --node_rank 3",
             "--include localhost:0,1", "--include worker-1", "--hostfile hostfile --include worker-1:0,9",
             "--hostfile hostfile --exclude worker-2", "--hostfile hostfile --include worker-1@worker-2:3",
             "--include a:b", "--hostfile hostfile --no_ssh --node_rank 1 --exclude worker-1"]


def runner_grid():
    out = []
    for i, f in enumerate(TORCHRUN):
        out.append({"id": f"tr:{i}", "launcher": "torchrun", "command": f"torchrun {f} train.py --epochs 1"})
        out.append({"id": f"trm:{i}", "launcher": "torchrun",
                    "command": f"python -m torch.distributed.run {f} train.py"})
    for i, f in enumerate(DEEPSPEED):
        out.append({"id": f"ds:{i}", "launcher": "deepspeed", "command": f"deepspeed {f} train.py --deepspeed_config ds.json"})
    return out
