#!/usr/bin/env python3
"""Benchmark `validate_backend_config.py --job-spec` (prints figures; not a test).

    python benchmarks/bench_jobspec.py [--runs 10]

Each figure is a fresh process, interpreter start included, median (and minimum) of --runs, first
with Python's bytecode cache in a temporary PYTHONPYCACHEPREFIX (never in the repository), then with
no bytecode cache at all (PYTHONDONTWRITEBYTECODE=1: every module compiled on every run). Target for
one job spec: <= 0.15 s. Cases: a two-node SLURM script with torchrun (two simulated nodes, each launch
checked), a SLURM script with accelerate launch and its config file, a task-per-GPU script with no
launcher, a PyTorchJob manifest (PyYAML), the same SLURM script with --output json, and for scale the
torchrun and accelerate commands alone through --launch-command. CPU time (user + system of the child)
is printed beside wall time: on a shared, loaded machine wall time mostly measures waiting for a core.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "sub-skills" / "distributed-training-backends" / "scripts" / "validate_backend_config.py"

TORCHRUN = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --cpus-per-task=32
module load cuda
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
srun bash -c 'torchrun --nnodes $SLURM_NNODES --nproc-per-node 8 --node-rank $SLURM_NODEID \\
  --master-addr $MASTER_ADDR --master-port $MASTER_PORT train.py --lr 1e-4'
"""
ACCEL = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun bash -c 'accelerate launch --config_file cfg.yaml --num_machines $SLURM_NNODES --num_processes 16 \\
  --machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port 29500 train.py'
"""
CFG = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_processes: 16\n"
PER_GPU = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
srun bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS python train.py'
"""
PTJ = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  nprocPerNode: "8"
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          volumes: [{name: dshm, emptyDir: {medium: Memory}}]
          containers:
          - name: pytorch
            image: trainer:latest
            command: ["torchrun", "train.py"]
            resources: {limits: {nvidia.com/gpu: 8}}
            volumeMounts: [{name: dshm, mountPath: /dev/shm}]
    Worker:
      replicas: 3
      template:
        spec:
          volumes: [{name: dshm, emptyDir: {medium: Memory}}]
          containers:
          - name: pytorch
            image: trainer:latest
            command: ["torchrun", "train.py"]
            resources: {limits: {nvidia.com/gpu: 8}}
            volumeMounts: [{name: dshm, mountPath: /dev/shm}]
"""


def timed(cmd, runs, cwd, env):
    """(median wall, min wall, median CPU) of a fresh process; CPU = user + system time of the child,
    the figure that holds on a shared, loaded machine where wall time mostly measures waiting."""
    import resource
    times, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
        times.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return statistics.median(times), min(times), statistics.median(cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as cache:
        for name, text in (("torchrun.sbatch", TORCHRUN), ("accel.sbatch", ACCEL), ("cfg.yaml", CFG),
                           ("pergpu.sbatch", PER_GPU), ("ptj.yaml", PTJ)):
            Path(d, name).write_text(text)
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        v = [py, str(SCRIPT), "--job-spec"]
        cases = [("bare interpreter (python -c pass)", [py, "-c", "pass"]),
                 ("SLURM + torchrun, 2 nodes", v + ["torchrun.sbatch"]),
                 ("SLURM + accelerate launch + config", v + ["accel.sbatch"]),
                 ("SLURM task per GPU, no launcher", v + ["pergpu.sbatch"]),
                 ("PyTorchJob, Master + 3 Workers", v + ["ptj.yaml"]),
                 ("SLURM + torchrun --output json", v + ["torchrun.sbatch", "--output", "json"]),
                 # for scale: the same launches as --launch-command (what the job-spec mode adds is the rest)
                 ("  --launch-command torchrun (for scale)",
                  [py, str(SCRIPT), "--launch-command", "torchrun --nnodes 2 --nproc-per-node 8 --node-rank 1 "
                   "--master-addr node0 --master-port 29500 train.py --lr 1e-4"]),
                 ("  --launch-command accelerate (for scale)",
                  [py, str(SCRIPT), "--launch-command", "accelerate launch --config_file cfg.yaml --num_machines 2 "
                   "--num_processes 16 --machine_rank 1 --main_process_ip node0 --main_process_port 29500 train.py"])]
        subprocess.run(cases[1][1], capture_output=True, cwd=d, env=env)  # warm the cache
        for label, e in (("bytecode cache", env),
                         ("no bytecode cache (PYTHONDONTWRITEBYTECODE=1)",
                          {k: x for k, x in dict(env, PYTHONDONTWRITEBYTECODE="1").items()
                           if k != "PYTHONPYCACHEPREFIX"})):
            print(f"validate_backend_config.py --job-spec, {label}, {a.runs} runs each (fresh process; wall median / "
                  "wall min / CPU median):")
            worst = worst_cpu = 0.0
            for name, cmd in cases:
                med, mn, cpu = timed(cmd, a.runs, d, e)
                if "interpreter" not in name and "for scale" not in name:
                    worst, worst_cpu = max(worst, med), max(worst_cpu, cpu)
                print(f"  {name:<40} {med * 1000:7.1f} ms / {mn * 1000:7.1f} ms / {cpu * 1000:7.1f} ms")
            print(f"worst wall median {worst * 1000:.1f} ms, worst CPU median {worst_cpu * 1000:.1f} ms; target <= 150 ms: "
                  f"{'met' if worst <= 0.15 else 'MISSED'} (wall), {'met' if worst_cpu <= 0.15 else 'MISSED'} (CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
