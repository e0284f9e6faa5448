"""The launches the checker computes start for real on CPU: a correct two-node SLURM script (two
simulated nodes on this machine, one process each) and a PyTorchJob's Master + Worker pods with the
environment the operator injects (torchrun reads PET_* as its defaults: no flag in the command).
Each worker joins a gloo process group and reports its rank and world size."""
from __future__ import annotations

import os
import subprocess
import sys

from backend_validator.jobspec import k8s, slurm
from backend_validator.jobspec.model import JobSpec
from _procs import collect_json, free_port

TRAIN = """import json, os, torch.distributed as dist
dist.init_process_group("gloo")
t = __import__("torch").ones(1)
dist.all_reduce(t)
print(json.dumps({"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": t.item(),
                  "node_rank": os.environ.get("GROUP_RANK")}), flush=True)
dist.destroy_process_group()
"""

SBATCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:1
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=PORT
srun bash -c 'torchrun --nnodes $SLURM_NNODES --nproc-per-node 1 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR --master-port $MASTER_PORT train.py'
"""

MANIFEST = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  nprocPerNode: "1"
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: trainer:latest
            command: ["torchrun", "train.py"]
            ports: [{name: pytorchjob-port, containerPort: PORT}]
    Worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: trainer:latest
            command: ["torchrun", "train.py"]
"""




def _start(launches, tmp_path, hostmap):
    (tmp_path / "train.py").write_text(TRAIN)
    procs = []
    bindir = os.path.dirname(sys.executable)
    for la in launches:
        argv = [hostmap.get(w.text, w.text) for w in la.words]
        argv = [a.replace("node0", "127.0.0.1") if a.startswith("node0") else a for a in argv]
        env = {k: hostmap.get(v, v) for k, v in la.env.items() if "\x00" not in v}
        env.update({"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"})
        procs.append(subprocess.Popen([os.path.join(bindir, argv[0])] + argv[1:], cwd=tmp_path, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return collect_json(procs)


def test_slurm_script_launches_start(tmp_path):
    port = free_port()
    text = SBATCH.replace("PORT", str(port))
    spec = JobSpec("slurm", "job", text)
    slurm.load(spec, str(tmp_path))
    launches = [la for st in spec.steps for la in st.launches]
    assert [(la.node, la.local) for la in launches] == [(0, 0), (1, 0)]
    outs = _start(launches, tmp_path, {"node0": "127.0.0.1"})
    assert sorted(o["rank"] for o in outs) == [0, 1]
    assert {o["world"] for o in outs} == {2} and {o["sum"] for o in outs} == {2.0}
    assert sorted(o["node_rank"] for o in outs) == ["0", "1"]


def test_pytorchjob_operator_env_starts_torchrun_without_flags(tmp_path):
    port = free_port()
    spec = JobSpec("", "job", MANIFEST.replace("PORT", str(port)))
    k8s.load(spec, str(tmp_path))
    st = spec.steps[0]
    assert st.operator_env["PET_NNODES"] == "2" and st.operator_env["PET_MASTER_ADDR"] == "ddp-master-0"
    launches = st.launches
    assert [la.env["PET_NODE_RANK"] for la in launches] == ["0", "1"]
    assert all(la.env["PET_MASTER_PORT"] == str(port) for la in launches)
    outs = _start(launches, tmp_path, {"ddp-master-0": "127.0.0.1"})
    assert sorted(o["rank"] for o in outs) == [0, 1]
    assert {o["world"] for o in outs} == {2}
    assert sorted(o["node_rank"] for o in outs) == ["0", "1"]
