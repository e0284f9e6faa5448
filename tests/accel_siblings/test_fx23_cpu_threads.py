"""What `accelerate launch --num_cpu_threads_per_process` does in the launched process (accelerate 1.15.0, torch
2.13.0, simple launcher, one process; set-22 miss s22-K2-05). Backs the "What the value is for" paragraph of
sub-skills/configuration-and-cli/references/cpu-multiprocess.md:

- the flag reaches the process as OMP_NUM_THREADS, and torch's intra-op pool has that many threads (at most the machine's CPUs);
- without the flag and without OMP_NUM_THREADS, a non-CPU launch (what a GPU run takes) gets 1, since the
  physical-cores rule is only for `--cpu` runs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """import json, os, sys, torch
json.dump({"omp": os.environ.get("OMP_NUM_THREADS"), "torch_threads": torch.get_num_threads()}, open(sys.argv[1], "w"))
"""


def _launch(tmp, name, extra):
    out = tmp / f"{name}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "OMP_", "MKL_"))}
    env.update(HF_HOME=str(tmp / "hf"), PYTHONDONTWRITEBYTECODE="1", CUDA_VISIBLE_DEVICES="")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", *extra, str(tmp / "s.py"), str(out)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fx23threads")
    (tmp / "s.py").write_text(SCRIPT)
    procs = {"flag3": _launch(tmp, "flag3", ["--num_cpu_threads_per_process", "3"]),
             "default_non_cpu": _launch(tmp, "default_non_cpu", [])}
    res = {}
    for k, (p, out) in procs.items():
        log, _ = p.communicate(timeout=120)
        assert out.exists(), log[-3000:]
        res[k] = json.loads(out.read_text())
    return res


def test_flag_becomes_omp_num_threads_and_torch_pool_size(runs):
    # torch 2.13.0 does not start more intra-op threads than the machine has CPUs (a 2-CPU machine: 3 -> 2)
    assert runs["flag3"]["omp"] == "3"
    assert runs["flag3"]["torch_threads"] in {min(3, len(os.sched_getaffinity(0))), min(3, os.cpu_count())}


def test_non_cpu_launch_defaults_to_one_thread(runs):
    assert runs["default_non_cpu"] == {"omp": "1", "torch_threads": 1}
