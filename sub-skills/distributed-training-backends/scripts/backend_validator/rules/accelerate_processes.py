"""Accelerate config rules: processes, GPUs, machines and ports - what launch requires, what the chosen
launcher ignores (accelerate 1.15.0). The rules on gpu_ids, use_cpu, mpirun_config and main_process_port are
in accelerate_launch_keys, the multi-node endpoints and machine_rank in accelerate_multinode.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import LAUNCH, ULAUNCH, eff, fmt


@rule(id="acc-num-processes-required", severity="error", family="accelerate",
      summary="num_processes missing (or -1) for a distributed_type other than 'NO'",
      source=LAUNCH)
def num_processes_required(ctx):
    """Only ``distributed_type: 'NO'`` gets ``num_processes`` filled in at load; otherwise the
    dataclass default -1 survives and launch stops unless ``--num_processes`` is passed.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: bf16
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: bf16
    num_processes: 2
    ```
    """
    e = eff(ctx)
    d = ctx.doc.data
    if e.sagemaker or "distributed_type" not in d:
        return ()
    from ._acc import LAUNCH, ULAUNCH, suggest
    if any(k not in S.CLUSTER_FIELDS and suggest(k, S.CLUSTER_FIELDS) == "num_processes" for k in d):
        return ()  # a misspelled num_processes is reported as an unknown key with its did-you-mean
    if "num_processes" not in d and d.get("distributed_type") != "NO":
        ctx.report((), "num_processes is missing: accelerate launch stops with 'You need to manually pass in "
                   "--num_processes' unless it is given on the command line",
                   "add num_processes (total processes over all machines)")
    elif d.get("num_processes") == -1 and not isinstance(d.get("num_processes"), bool):
        ctx.report(("num_processes",), "num_processes: -1 makes accelerate launch stop unless "
                   "--num_processes is passed", "set the total number of processes")
    return ()


@rule(id="acc-multi-cpu-single-process", severity="warning", family="accelerate",
      summary="MULTI_CPU without mpirun_config starts a single process",
      source=f"{ULAUNCH}::prepare_simple_launcher_cmd_env")
def multi_cpu_single(ctx):
    """MULTI_CPU uses the simple launcher, which only fans out through ``mpirun`` when
    ``mpirun_config.mpirun_hostfile`` is set; otherwise one process runs.

    Fails:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 4
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 4
    mpirun_config:
      mpirun_hostfile: /etc/hostfile
    ```
    """
    e = eff(ctx)
    n = e.world_size()
    if e.dt == "MULTI_CPU" and not e.sagemaker and n is not None and n > 1 and not e.get("mpirun_hostfile") \
            and not e.multi_machine():
        ctx.report(("distributed_type",), f"MULTI_CPU with num_processes {n} but no mpirun_config.mpirun_hostfile: "
                   "accelerate launch starts one process", "add mpirun_config: {mpirun_hostfile: ...} "
                   "(needs mpirun on PATH)")
    return ()


def _gpu_launcher(e):
    return e.launcher in ("torchrun", "deepspeed")


@rule(id="acc-num-processes-not-divisible", severity="warning", family="accelerate",
      summary="num_processes is not a multiple of num_machines (the remainder is dropped)",
      source=f"{ULAUNCH}::prepare_multi_gpu_env")
def not_divisible(ctx):
    """Multi-machine launches start ``num_processes // num_machines`` processes per machine, so a
    remainder is silently lost (num_processes is the total over all machines).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 9
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 8
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    e = eff(ctx)
    n = e.world_size()
    if not _gpu_launcher(e) or n is None or not e.multi_machine():
        return ()
    nm = e.num_machines
    if n % nm and n // nm > 0:  # 0 per machine is an error (acc-no-worker-processes)
        ctx.report(("num_processes",), f"num_processes {n} is not a multiple of num_machines {nm}: "
                   f"{n // nm} per machine start, {(n // nm) * nm} in total",
                   "num_processes is the total over all machines: use a multiple of num_machines")
    return ()


def _torchrun_path(e):
    """True when accelerate hands the run to torch.distributed.run (torchrun launcher, or DeepSpeed on
    one machine / with the 'standard' multi-node launcher)."""
    if e.launcher == "torchrun":
        return True
    return e.launcher == "deepspeed" and (not e.multi_machine()
                                          or e.get("deepspeed_multinode_launcher", "pdsh") == "standard")


@rule(id="acc-no-worker-processes", severity="error", family="accelerate",
      summary="torchrun would start no worker per machine (num_processes 0 or negative, or fewer than num_machines)",
      source="torch/distributed/launcher/api.py::launch_agent")
def no_workers(ctx):
    """torchrun gets ``--nproc_per_node num_processes // num_machines``; torch's ``WorkerSpec``
    refuses a local world size of 0 or less before anything starts. ``num_processes`` is the
    total over all machines, so 1 process on 2 machines is 0 per machine.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 0
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    ```
    """
    e = eff(ctx)
    if e.sagemaker or not _torchrun_path(e):
        return ()
    n = e.world_size()
    if n is None and isinstance(e.num_processes, bool) and e.multi_machine():
        n = int(e.num_processes)  # true // num_machines is still integer division
    if n is None or n == -1:
        return ()  # not an integer (acc-int-value) or -1 (acc-num-processes-required)
    nm = e.num_machines if e.multi_machine() else 1
    per = n // int(nm) if isinstance(nm, (int, float)) else n
    if per <= 0:
        where = f" over {int(nm)} machines" if nm != 1 else ""
        ctx.report(("num_processes",), f"num_processes {n}{where} gives torchrun --nproc_per_node {per}: "
                   "torch refuses to start with no worker per machine",
                   "num_processes is the total over all machines: use at least one per machine "
                   f"(e.g. {max(1, int(nm)) * 8} for 8 GPUs on each of {max(1, int(nm))} machines)")
    return ()


@rule(id="acc-num-processes-ignored", severity="warning", family="accelerate",
      summary="distributed_type 'NO' with num_processes > 1: the simple launcher starts one process",
      source="accelerate/commands/launch.py::launch_command")
def num_processes_ignored(ctx):
    """With ``distributed_type: 'NO'`` (or an unquoted NO read as false) ``launch_command`` picks the
    simple launcher, which runs ``python script.py`` once; ``num_processes`` is never used.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 4
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 4
    ```
    """
    e = eff(ctx)
    d = ctx.doc.data
    n = d.get("num_processes")
    if e.sagemaker or e.launcher != "simple" or d.get("distributed_type") == "MULTI_CPU" or e.multi_machine():
        return ()
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        ctx.report(("num_processes",), f"num_processes {n} is ignored with distributed_type {fmt(e.dt)}: "
                   "accelerate launch starts a single process",
                   "use distributed_type: MULTI_GPU (or FSDP / DEEPSPEED) for several processes, "
                   "or set num_processes: 1")
    return ()
