"""The shapes the issue names: correct scripts get no error (one task per node with a launcher, one task
per GPU without one, escaped or single-quoted per-task variables, the operator's environment), and the
wrong ones get their rule at the right line."""
from __future__ import annotations

import textwrap

import pytest

from backend_validator.jobspec import k8s
from backend_validator.jobspec.check import check_job_spec

HEAD = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node={tpn}
#SBATCH --gres=gpu:4
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
"""

GOOD = {
    "launcher-per-node-single-quotes": (1, "srun bash -c 'torchrun --nnodes $SLURM_NNODES --nproc-per-node 4 "
                                           "--node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py'"),
    "launcher-per-node-escaped": (1, 'srun bash -c "torchrun --nnodes $SLURM_NNODES --nproc-per-node 4 '
                                     '--node-rank \\$SLURM_NODEID --master-addr $MASTER_ADDR train.py"'),
    "launcher-per-node-c10d": (1, "srun torchrun --nnodes $SLURM_NNODES --nproc-per-node 4 --rdzv-backend c10d "
                                  "--rdzv-endpoint $MASTER_ADDR:29500 --rdzv-id $SLURM_JOB_ID train.py"),
    "python-m-run": (1, "srun bash -c 'python -m torch.distributed.run --nnodes=2 --nproc_per_node=4 "
                        "--node_rank=$SLURM_PROCID --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT train.py'"),
    "legacy-launch-use-env": (1, "srun bash -c 'python -m torch.distributed.launch --use_env --nnodes 2 "
                                 "--nproc_per_node 4 --node_rank $SLURM_NODEID --master_addr $MASTER_ADDR train.py'"),
    "task-per-gpu-no-launcher": (4, "srun bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID "
                                    "WORLD_SIZE=$SLURM_NTASKS python train.py'"),
    "task-per-gpu-python-directly": (4, "srun python -u train.py --epochs 3"),
    "deepspeed-no-ssh": (1, "srun bash -c 'deepspeed --no_ssh --num_nodes 2 --num_gpus 4 --node_rank $SLURM_NODEID "
                            "--master_addr $MASTER_ADDR train.py'"),
    "accelerate": (1, "srun bash -c 'accelerate launch --multi_gpu --num_machines $SLURM_NNODES --num_processes "
                      "$((SLURM_NNODES * 4)) --machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR "
                      "--main_process_port $MASTER_PORT train.py'"),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_correct_scripts_get_no_error_or_warning(name, tmp_path):
    tpn, line = GOOD[name]
    p = tmp_path / "job.sbatch"
    p.write_text(HEAD.format(tpn=tpn) + line + "\n")
    res = check_job_spec(str(p), "job", cwd=str(tmp_path))
    assert not [f for f in res.findings if f.severity in ("error", "warning")], \
        [(f.rule, f.message) for f in res.findings]
    assert res.steps and res.steps[0]["launches"], res.steps


BAD = {
    "dq-node-rank": (1, 'srun bash -c "torchrun --nnodes 2 --nproc-per-node 4 --node-rank $SLURM_NODEID '
                        '--master-addr $MASTER_ADDR train.py"', "jobspec-node-rank-same"),
    "constant-machine-rank": (1, "srun accelerate launch --multi_gpu --num_machines 2 --num_processes 8 "
                                 "--machine_rank 0 --main_process_ip $MASTER_ADDR --main_process_port 29500 train.py",
                              "jobspec-node-rank-same"),
    "rank-in-batch-variable": (1, "NODE_RANK=$SLURM_NODEID\nexport NODE_RANK\nsrun bash -c 'torchrun --nnodes 2 "
                                  "--nproc-per-node 4 --node-rank $NODE_RANK --master-addr $MASTER_ADDR train.py'",
                               "jobspec-node-rank-same"),
    "launcher-per-gpu-task": (4, "srun torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d "
                                 "--rdzv-endpoint $MASTER_ADDR:29500 train.py", "jobspec-launcher-per-task"),
    "too-many-processes": (1, "srun bash -c 'torchrun --nnodes 2 --nproc-per-node 8 --node-rank $SLURM_NODEID "
                              "--master-addr $MASTER_ADDR train.py'", "jobspec-processes-exceed-gpus"),
    "task-per-gpu-too-many": (8, "srun python train.py", "jobspec-processes-exceed-gpus"),
    "nnodes-too-many": (1, "srun bash -c 'torchrun --nnodes 3 --nproc-per-node 4 --node-rank $SLURM_NODEID "
                           "--master-addr $MASTER_ADDR train.py'", "jobspec-nodes-mismatch"),
    "no-master-addr": (1, "srun bash -c 'torchrun --nnodes 2 --nproc-per-node 4 --node-rank $SLURM_NODEID train.py'",
                       "jobspec-rendezvous-local"),
    "deepspeed-no-ssh-dq": (1, 'srun bash -c "deepspeed --no_ssh --num_nodes 2 --num_gpus 4 --node_rank $SLURM_NODEID '
                               '--master_addr $MASTER_ADDR train.py"', "jobspec-node-rank-same"),
    "rank-via-env-python": (4, 'srun bash -c "RANK=$SLURM_PROCID python train.py"', "jobspec-node-rank-same"),
    "batch-body": (1, "torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 "
                      "train.py", "jobspec-launcher-outside-srun"),
    "acc-per-node": (1, "srun bash -c 'accelerate launch --multi_gpu --num_machines 2 --num_processes 4 "
                        "--machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port 29500 "
                        "train.py'", "jobspec-accelerate-num-processes-per-node"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_wrong_scripts_get_their_rule_at_the_line(name, tmp_path):
    tpn, line, rule = BAD[name]
    p = tmp_path / "job.sbatch"
    text = HEAD.format(tpn=tpn) + line + "\n"
    p.write_text(text)
    res = check_job_spec(str(p), "job", cwd=str(tmp_path))
    hits = [f for f in res.findings if f.rule == rule]
    assert hits, [(f.rule, f.message) for f in res.findings]
    assert all(f.file == "job" and 1 <= (f.line or 0) <= text.count("\n") and f.col for f in hits)


PTJ = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: ddp}}
spec:
{extra}  pytorchReplicaSpecs:
{master}    Worker:
      replicas: {workers}
      template:
        spec:
          containers:
          - name: pytorch
            image: trainer:latest
            command: {command}
"""
MASTER = """    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: trainer:latest
            command: {command}
"""


def _ptj(tmp_path, command, workers=1, master=True, extra='  nprocPerNode: "1"\n'):
    text = PTJ.format(extra=extra, master=MASTER.format(command=command) if master else "", workers=workers,
                      command=command)
    p = tmp_path / "job.yaml"
    p.write_text(text)
    return check_job_spec(str(p), "job.yaml", cwd=str(tmp_path))


def test_pytorchjob_plain_torchrun_is_clean(tmp_path):
    res = _ptj(tmp_path, '["torchrun", "train.py"]', workers=3)
    assert not [f for f in res.findings if f.severity != "info"], res.findings
    env = res.steps[0]["operator_env"]
    assert env["PET_NNODES"] == "4" and env["WORLD_SIZE"] == "4" and env["MASTER_PORT"] == "23456"


def test_pytorchjob_k8s_variable_expansion_and_shell(tmp_path):
    res = _ptj(tmp_path, '["bash", "-c", "accelerate launch --multi_gpu --num_machines $PET_NNODES --num_processes 2 '
                         '--machine_rank $(PET_NODE_RANK) --main_process_ip $MASTER_ADDR --main_process_port '
                         '$MASTER_PORT train.py"]')
    assert not [f for f in res.findings if f.severity == "error"], res.findings
    ranks = [l["node_rank"] for l in res.steps[0]["launches"]]
    assert ranks == ["0", "1"]


def test_pytorchjob_worker_only_without_master_has_no_rendezvous(tmp_path):
    res = _ptj(tmp_path, '["torchrun", "train.py"]', workers=2, master=False)
    rules = {f.rule for f in res.findings}
    assert {"jobspec-node-rank-same", "jobspec-rendezvous-local"} <= rules, res.findings


def test_pytorchjob_elastic_is_clean(tmp_path):
    res = _ptj(tmp_path, '["torchrun", "train.py"]', workers=2, master=False,
               extra="  elasticPolicy: {rdzvBackend: c10d, minReplicas: 1, maxReplicas: 3, nProcPerNode: 1}\n")
    assert not [f for f in res.findings if f.severity != "info"], res.findings
    assert res.steps[0]["operator_env"]["PET_RDZV_ENDPOINT"] == "ddp-worker-0:23456"
    assert res.steps[0]["operator_env"]["PET_NNODES"] == "1:3"


def test_pytorchjob_sizes_in_command(tmp_path):
    res = _ptj(tmp_path, '["torchrun", "--nnodes", "3", "--nproc-per-node", "1", "train.py"]')
    rules = sorted(f.rule for f in res.findings)
    assert "jobspec-nodes-mismatch" in rules and rules.count("jobspec-operator-env-overridden") == 2, rules
    f = next(f for f in res.findings if f.rule == "jobspec-nodes-mismatch")
    assert f.file == "job.yaml" and f.line is not None


def test_trainjob_env(tmp_path):
    p = tmp_path / "tj.yaml"
    p.write_text(textwrap.dedent("""\
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata: {name: tj}
        spec:
          runtimeRef: {name: torch-distributed}
          trainer:
            numNodes: 2
            numProcPerNode: 4
            command: ["torchrun", "train.py"]
            resourcesPerNode: {limits: {nvidia.com/gpu: 4}}
        """))
    res = check_job_spec(str(p), "tj.yaml", cwd=str(tmp_path))
    assert not [f for f in res.findings if f.severity == "error"], res.findings
    st = res.steps[0]
    assert st["operator_env"]["PET_MASTER_ADDR"] == "tj-trainer-node-0-0.tj"
    assert [l["node_rank"] for l in st["launches"]] == ["0", "1"]


def test_pytorchjob_env_matches_operator_source_table():
    """envvar.go::setPodEnv for Master 1 + Worker 2, nprocPerNode 4, port 23456."""
    job = {"metadata": {"name": "j"}, "spec": {"nprocPerNode": "4", "pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": {}}, "Worker": {"replicas": 2, "template": {}}}}}
    pods = k8s.pytorchjob_env(job)
    assert [p[0] for p in pods] == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert [p[4]["RANK"] for p in pods] == ["0", "1", "2"] == [p[4]["PET_NODE_RANK"] for p in pods]
    assert {p[4]["WORLD_SIZE"] for p in pods} == {"12"} and {p[4]["PET_NNODES"] for p in pods} == {"3"}
    assert {p[4]["MASTER_ADDR"] for p in pods} == {"j-master-0"} and {p[4]["PET_NPROC_PER_NODE"] for p in pods} == {"4"}
