#!/usr/bin/env python3
"""Benchmark `validate_backend_config.py --launch-command` (prints figures; not a test).

    python benchmarks/bench_launch.py [--runs 10]

Each figure is a fresh process, interpreter start included, median (and minimum) of --runs, with
Python's bytecode cache in a temporary PYTHONPYCACHEPREFIX (never in the repository). Target for
one command: <= 0.15 s. Printed: bare interpreter start; an `accelerate launch` command with a
DeepSpeed config file and JSON (every file rule runs on the merged result); the same with
--explain; a torchrun command; a deepspeed command with a hostfile and a DeepSpeed JSON; a node set
of two per-node configs; and, for scale, accelerate 1.15.0's own launch_command_parser +
_validate_launch_command in a fresh process (imports accelerate and torch).
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

CFG = """compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
num_machines: 2
machine_rank: 0
num_processes: 16
main_process_ip: 10.0.0.1
main_process_port: 29500
mixed_precision: bf16
deepspeed_config:
  deepspeed_config_file: ds.json
  deepspeed_multinode_launcher: standard
"""
DS = '{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", ' \
     '"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}\n'


def timed(cmd, runs, cwd, env):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as cache:
        Path(d, "node0.yaml").write_text(CFG)
        Path(d, "node1.yaml").write_text(CFG.replace("machine_rank: 0", "machine_rank: 1"))
        Path(d, "ds.json").write_text(DS)
        Path(d, "hostfile").write_text("worker-1 slots=8\nworker-2 slots=8\n")
        Path(d, "hf").mkdir()
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache, HF_HOME=str(Path(d, "hf")))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        v = [py, str(SCRIPT)]
        acc = "accelerate launch --config_file node0.yaml --num_processes 16 --mixed_precision bf16 train.py --lr 1e-4"
        cases = [
            ("bare interpreter (python -c pass)", [py, "-c", "pass"]),
            ("accelerate launch + config + DeepSpeed JSON", v + ["--launch-command", acc]),
            ("  the same with --explain", v + ["--launch-command", acc, "--explain"]),
            ("torchrun command", v + ["--launch-command", "torchrun --nnodes 2 --nproc-per-node 8 --node-rank 1 "
                                      "--master-addr 10.0.0.1 train.py"]),
            ("deepspeed command + hostfile + JSON", v + ["--launch-command", "deepspeed --hostfile hostfile "
                                                          "train.py --deepspeed_config ds.json"]),
            ("node set of 2 configs", v + ["--node-set", "node0.yaml", "node1.yaml"]),
        ]
        subprocess.run(v + ["--launch-command", acc], capture_output=True, cwd=d, env=env)  # warm the cache
        print(f"validate_backend_config.py --launch-command, {a.runs} runs each (fresh process, median / min):")
        worst = 0.0
        for name, cmd in cases:
            med, mn = timed(cmd, a.runs, d, env)
            if "interpreter" not in name:
                worst = max(worst, med)
            print(f"  {name:<46} {med * 1000:7.1f} ms  / {mn * 1000:7.1f} ms")
        oracle = ("import sys\nfrom accelerate.commands.launch import launch_command_parser, _validate_launch_command\n"
                  "a = launch_command_parser().parse_args(['--config_file', 'node0.yaml', '--num_processes', '16', "
                  "'train.py'])\n_validate_launch_command(a)\n")
        try:
            med, mn = timed([py, "-c", oracle], max(1, min(3, a.runs)), d, env)
            print(f"  {'accelerate 1.15.0 parser + merge (for scale)':<46} {med * 1000:7.1f} ms  / {mn * 1000:7.1f} ms")
        except OSError:
            pass
        print(f"worst validator median {worst * 1000:.1f} ms; target <= 150 ms: {'met' if worst <= 0.15 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
