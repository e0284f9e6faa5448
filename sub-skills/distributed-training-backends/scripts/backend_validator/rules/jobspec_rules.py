"""Rules for job specs (`--job-spec`): a SLURM batch script or a Kubeflow PyTorchJob/TrainJob manifest.

They see ``ctx.jobspec`` (backend_validator/jobspec/check.py): the spec and the issues its analysis
found (each simulated node and task, their launch commands, the allocation). Findings point at the
file's line and column. The examples are whole job specs; tests/jobspec runs them through the
validator, and runs the SLURM ones task by task with real bash and the SLURM variables.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..core import Context, rule

SRUN = "srun(1)/sbatch(1) OUTPUT ENVIRONMENT VARIABLES (https://slurm.schedmd.com/srun.html)"
OPERATOR = "kubeflow/training-operator v1.9.0 pkg/controller.v1/pytorch/envvar.go::setPodEnv"


def _emit(ctx: Context, rid: str) -> Iterator[Any]:
    js = getattr(ctx, "jobspec", None)
    if js is None:
        return
    spec, issues = js
    for i in issues:
        if i.rule == rid:
            line, col = spec.line_col(i.offset)
            ctx.report((), i.message, i.hint, line=line, col=col)
            yield None


@rule(id="jobspec-node-rank-same", severity="error", family="jobspec",
      summary="a multi-node job gives two nodes the same node rank (constant, expanded by the batch shell, or unset)",
      source=f"{SRUN}; torch/distributed/run.py --node-rank; accelerate --machine_rank")
def node_rank_same(ctx: Context):
    """With a static rendezvous (torchrun's default, accelerate's multi-node launch) each node must
    pass its own ``--node-rank``/``--machine_rank``. ``srun bash -c "... $SLURM_NODEID"`` has the
    batch shell replace the variable on the first node, so every task gets 0; a number written in
    the command is the same everywhere too.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c "torchrun --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py"
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'torchrun --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py'
    ```
    """
    yield from _emit(ctx, "jobspec-node-rank-same")


@rule(id="jobspec-launcher-outside-srun", severity="error", family="jobspec",
      summary="torchrun/accelerate launch in the batch body of a multi-node job: it runs on the first node only",
      source="sbatch(1): the batch script runs on the first node of the allocation")
def outside_srun(ctx: Context):
    """The batch script is one process on the first node; a launcher started there without ``srun``
    never starts on the other nodes, so the rendezvous waits for them (or, with ``--nnodes 1``, the
    job trains on one node while the others idle).

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --gres=gpu:2
    torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint node0:29500 train.py
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint $HEAD:29500 train.py
    ```
    """
    yield from _emit(ctx, "jobspec-launcher-outside-srun")


@rule(id="jobspec-launcher-per-task", severity="error", family="jobspec",
      summary="several srun tasks per node each start a launcher (a task per GPU and a launcher per task)",
      source=SRUN)
def launcher_per_task(ctx: Context):
    """``--ntasks-per-node=N`` starts the command N times on each node. A launcher already starts one
    process per GPU, so N launchers per node start N x that many, with the same node rank and port.
    Use one task per node with a launcher, or one task per GPU running the script directly.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --ntasks-per-node=4
    #SBATCH --gres=gpu:4
    srun torchrun --nproc-per-node 4 train.py
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:4
    srun torchrun --nproc-per-node 4 train.py
    ```
    """
    yield from _emit(ctx, "jobspec-launcher-per-task")


@rule(id="jobspec-processes-exceed-gpus", severity="error", family="jobspec",
      summary="tasks per node x processes per task is more than the GPUs requested per node (or per pod, or per task)",
      source=f"{SRUN} --gres/--gpus-per-node/--gpus-per-task; torch/distributed/run.py --nproc-per-node")
def exceed_gpus(ctx: Context):
    """A plain torch script takes ``cuda:LOCAL_RANK``: with more processes than GPUs visible, the
    extra ones fail with 'invalid device ordinal'. Accelerate takes ``LOCAL_RANK % device_count()``:
    the extra ones share a GPU and NCCL stops with 'Duplicate GPU detected'. Neither launcher checks
    the count. With ``--gpus-per-task`` each task sees only its own GPUs.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --gres=gpu:4
    srun torchrun --nproc-per-node 8 train.py
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --gres=gpu:8
    srun torchrun --nproc-per-node 8 train.py
    ```
    """
    yield from _emit(ctx, "jobspec-processes-exceed-gpus")


@rule(id="jobspec-gpus-idle", severity="warning", family="jobspec",
      summary="fewer processes per node than GPUs requested per node: GPUs are allocated and never used",
      source=f"{SRUN} --gres; torch/distributed/run.py --nproc-per-node")
def gpus_idle(ctx: Context):
    """A number of processes per node written into the command that is below the GPUs requested.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --gres=gpu:8
    srun torchrun --nproc-per-node 4 train.py
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --gres=gpu:8
    srun torchrun --nproc-per-node gpu train.py
    ```
    """
    yield from _emit(ctx, "jobspec-gpus-idle")


@rule(id="jobspec-nodes-mismatch", severity="error", family="jobspec",
      summary="the launcher's node count (--nnodes / num_machines) differs from the nodes allocated or the replicas",
      source=f"{SRUN}; {OPERATOR} (PET_NNODES = total replicas)")
def nodes_mismatch(ctx: Context):
    """torchrun's rendezvous waits for ``--nnodes`` agents (MIN for ``MIN:MAX``); more than the job has
    never arrive, fewer leave nodes out. With a PyTorchJob, every replica (Master and Workers) is
    a node.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'torchrun --nnodes 4 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py'
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'torchrun --nnodes $SLURM_NNODES --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py'
    ```
    """
    yield from _emit(ctx, "jobspec-nodes-mismatch")


@rule(id="jobspec-rendezvous-local", severity="error", family="jobspec",
      summary="multi-node job whose rendezvous host is localhost, 127.0.0.1 or empty (no MASTER_ADDR behind it)",
      source="torch/distributed/run.py --master-addr default 127.0.0.1; SLURM sets no MASTER_ADDR")
def rendezvous_local(ctx: Context):
    """SLURM does not set ``MASTER_ADDR``; a PyTorchJob sets it only when it has a Master replica.
    An unset variable expands to nothing, and torchrun's default is 127.0.0.1: each node then
    waits for a rendezvous on itself.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    srun bash -c 'torchrun --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr localhost train.py'
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'torchrun --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py'
    ```
    """
    yield from _emit(ctx, "jobspec-rendezvous-local")


@rule(id="jobspec-rendezvous-differs", severity="error", family="jobspec",
      summary="the rendezvous host is computed per node ($(hostname) in each task's shell): each node waits on itself",
      source=SRUN)
def rendezvous_differs(ctx: Context):
    """``$(hostname)`` or ``$SLURMD_NODENAME`` evaluated in each task names that task's own node.
    The batch script runs on the first node, so the same expression there (exported) is right.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    srun bash -c 'torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint $(hostname):29500 train.py'
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export HEAD=$(hostname)
    srun bash -c 'torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint $HEAD:29500 train.py'
    ```
    """
    yield from _emit(ctx, "jobspec-rendezvous-differs")


@rule(id="jobspec-operator-env-overridden", severity="warning", family="jobspec",
      summary="a PyTorchJob command writes a launcher size torchrun would read from the operator's PET_* variables",
      source=f"{OPERATOR}; torch/distributed/argparse_util.py::env (PET_<DEST> is only the default)")
def operator_env(ctx: Context):
    """torchrun takes each option's default from ``PET_<NAME>``, which the operator sets per pod
    (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR/PORT, PET_RDZV_*). A flag
    written in the command wins over it, and goes stale when the replicas or nprocPerNode change.
    The check models training-operator v1.9.0: the PET_* sizes exist from v1.7.0 (PR #1840) only.
    kubeflow/pytorch-operator and training-operator <= v1.6.0 (without elasticPolicy) set just
    MASTER_ADDR/MASTER_PORT/WORLD_SIZE (pods)/RANK (pod index): there the flags are needed
    (--nnodes=$(WORLD_SIZE) --node_rank=$(RANK) --master_addr=$(MASTER_ADDR) --master_port=$(MASTER_PORT)),
    or ${PET_NNODES:-$WORLD_SIZE} / ${PET_NODE_RANK:-$RANK} inside sh -c for either release
    (with a Master replica, which gives RANK/MASTER_ADDR, and no elasticPolicy).

    Fails:
    ```yaml
    apiVersion: kubeflow.org/v1
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
                command: ["torchrun", "--nnodes", "2", "train.py"]
        Worker:
          replicas: 1
          template:
            spec:
              containers:
              - name: pytorch
                image: trainer:latest
                command: ["torchrun", "--nnodes", "2", "train.py"]
    ```

    Passes:
    ```yaml
    apiVersion: kubeflow.org/v1
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
        Worker:
          replicas: 1
          template:
            spec:
              containers:
              - name: pytorch
                image: trainer:latest
                command: ["torchrun", "train.py"]
    ```
    """
    yield from _emit(ctx, "jobspec-operator-env-overridden")


@rule(id="jobspec-accelerate-num-processes-per-node", severity="warning", family="jobspec",
      summary="multi-node accelerate launch with num_processes equal to one node's GPUs: it is the total over machines",
      source="accelerate/utils/launch.py::prepare_multi_gpu_env (nproc_per_node = num_processes // num_machines)")
def acc_per_node(ctx: Context):
    """accelerate divides ``num_processes`` by ``num_machines`` to get the processes per node, so the
    GPU count of one node starts only a fraction of the GPUs.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:4
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'accelerate launch --multi_gpu --num_machines 2 --num_processes 4 --machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port 29500 train.py'
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:4
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'accelerate launch --multi_gpu --num_machines 2 --num_processes 8 --machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port 29500 train.py'
    ```
    """
    yield from _emit(ctx, "jobspec-accelerate-num-processes-per-node")


@rule(id="jobspec-shm-default", severity="warning", family="jobspec",
      summary="a multi-GPU pod without a memory-backed /dev/shm (container default: 64 MB)",
      source="Docker/containerd default shm size 64 MB; Kubernetes emptyDir medium: Memory")
def shm(ctx: Context):
    """NCCL's intra-node shared-memory transport and DataLoader workers use ``/dev/shm``; the
    container default of 64 MB is too small for several GPU processes (NCCL 'unhandled system
    error', DataLoader 'bus error').

    Fails:
    ```yaml
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: ddp}
    spec:
      nprocPerNode: "4"
      pytorchReplicaSpecs:
        Master:
          replicas: 1
          template:
            spec:
              containers:
              - name: pytorch
                image: trainer:latest
                command: ["torchrun", "train.py"]
                resources: {limits: {nvidia.com/gpu: 4}}
    ```

    Passes:
    ```yaml
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: ddp}
    spec:
      nprocPerNode: "4"
      pytorchReplicaSpecs:
        Master:
          replicas: 1
          template:
            spec:
              volumes:
              - name: dshm
                emptyDir: {medium: Memory}
              containers:
              - name: pytorch
                image: trainer:latest
                command: ["torchrun", "train.py"]
                resources: {limits: {nvidia.com/gpu: 4}}
                volumeMounts:
                - {name: dshm, mountPath: /dev/shm}
    ```
    """
    yield from _emit(ctx, "jobspec-shm-default")


@rule(id="jobspec-sbatch-directive-ignored", severity="warning", family="jobspec",
      summary="an #SBATCH line after the first command: sbatch ignores it",
      source="sbatch(1): directives are read until the first non-comment, non-blank line")
def directive_ignored(ctx: Context):
    """sbatch stops reading ``#SBATCH`` options at the first command of the script; later lines are
    plain comments, so the resource they ask for is never requested.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    module load cuda
    #SBATCH --gres=gpu:4
    srun torchrun --nproc-per-node 4 train.py
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --gres=gpu:4
    module load cuda
    srun torchrun --nproc-per-node 4 train.py
    ```
    """
    yield from _emit(ctx, "jobspec-sbatch-directive-ignored")


@rule(id="jobspec-variable-not-exported", severity="warning", family="jobspec",
      summary="a variable set in the batch script without export is read by the tasks' shells, which do not see it",
      source="srun(1) --export (default ALL: the exported environment of the batch shell)")
def not_exported(ctx: Context):
    """srun passes the batch shell's environment, which holds exported variables only. A plain
    ``MASTER_ADDR=...`` is expanded fine in the batch script itself but is unset in
    ``srun bash -c '... $MASTER_ADDR'``.

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'torchrun --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py'
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:2
    export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    srun bash -c 'torchrun --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr $MASTER_ADDR train.py'
    ```
    """
    yield from _emit(ctx, "jobspec-variable-not-exported")


@rule(id="jobspec-not-checked", severity="info", family="jobspec",
      summary="part of the job spec the checker does not follow (no launch command, eval/source, a file not found)",
      source="backend_validator/jobspec (what the shell subset covers)")
def not_checked(ctx: Context):
    """Said so that a clean report is not read as a full check: no launcher was found, the script
    uses ``source``/``eval``/``mpirun``, or a config file named by the launch was not found from
    the launch directory (``--cwd``).

    Fails:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    srun ./run_training.sh
    ```

    Passes:
    ```bash
    #!/bin/bash
    #SBATCH --nodes=1
    #SBATCH --gres=gpu:2
    srun torchrun --nproc-per-node 2 train.py
    ```
    """
    yield from _emit(ctx, "jobspec-not-checked")
