"""Accelerate launch rules for several machines (accelerate 1.15.0): main_process_ip/port missing or unset,
machine_rank out of range, and the multi-node DeepSpeed hostfile and launcher, when num_machines > 1. Split from accelerate_processes so that a one-machine
config does not compile them (rules/__init__.py, SILENT_WHEN).
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import ULAUNCH, eff, fmt
from ._acc_ds import DS_ENV as ENV, ds_eff as _ds

# Each rule returns at once unless num_machines is a number above 1 (Effective.multi_machine):
# rules/__init__.py does not compile the module for a config where _acc.single_machine is true.
SILENT_WHEN = "_acc.single_machine"


def _simple_launcher_lacks(ctx, key, fix):
    """The simple launcher asserts on a multi-machine run whose `key` is unset (a mapping is merged
    like a config block, so the launch argument stays unset too)."""
    e = eff(ctx)
    value = ctx.doc.data.get(key)
    if e.launcher == "simple" and e.multi_machine() and (value is None or isinstance(value, dict)):
        ctx.report(("num_machines",), f"num_machines > 1 without {key}: the launcher asserts and stops", fix)


@rule(id="acc-multinode-missing-ip", severity="error", family="accelerate",
      summary="multi-machine run of the simple launcher without main_process_ip",
      source=f"{ULAUNCH}::prepare_simple_launcher_cmd_env")
def multinode_missing_ip(ctx):
    """The simple launcher (distributed_type NO / MULTI_CPU) asserts that a multi-machine run
    names the main process IP.

    Fails:
    ```yaml
    distributed_type: MULTI_CPU
    num_machines: 2
    num_processes: 4
    main_process_port: 29500
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_CPU
    num_machines: 2
    num_processes: 4
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    _simple_launcher_lacks(ctx, "main_process_ip", "add main_process_ip (the address of machine rank 0)")
    return ()


@rule(id="acc-multinode-missing-port", severity="error", family="accelerate",
      summary="multi-machine run of the simple launcher without main_process_port",
      source=f"{ULAUNCH}::prepare_simple_launcher_cmd_env")
def multinode_missing_port(ctx):
    """The simple launcher asserts that a multi-machine run names the main process port.

    Fails:
    ```yaml
    distributed_type: MULTI_CPU
    num_machines: 2
    num_processes: 4
    main_process_ip: 10.0.0.1
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_CPU
    num_machines: 2
    num_processes: 4
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    _simple_launcher_lacks(ctx, "main_process_port", "add main_process_port (e.g. 29500)")
    return ()


@rule(id="acc-multinode-ip-unset", severity="warning", family="accelerate",
      summary="multi-machine torchrun launch without main_process_ip (rendezvous at 'None:port')",
      source=f"{ULAUNCH}::prepare_multi_gpu_env")
def multinode_ip_unset(ctx):
    """torchrun-based launchers build ``rdzv_endpoint`` from ``main_process_ip`` without
    checking it, so the machines try to meet at the host name ``None``.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    e = eff(ctx)
    std_ds = e.launcher == "deepspeed" and e.get("deepspeed_multinode_launcher") == "standard"
    if (e.launcher == "torchrun" or std_ds) and e.multi_machine() and ctx.doc.data.get("main_process_ip") is None:
        ctx.report(("num_machines",), "num_machines > 1 without main_process_ip: torchrun gets the rendezvous "
                   "endpoint 'None:<port>' and the nodes never meet", "add main_process_ip (machine rank 0)")
    return ()


@rule(id="acc-machine-rank-out-of-range", severity="warning", family="accelerate",
      summary="machine_rank is not in 0 .. num_machines-1 (the rendezvous can never complete)",
      source=f"{ULAUNCH}::prepare_multi_gpu_env")
def machine_rank_range(ctx):
    """``machine_rank`` is passed on as torchrun's ``--node_rank`` (``MACHINE_RANK`` for the simple
    launcher) without a range check; ranks are 0-based, so the last of N machines is N-1. A rank
    outside the range waits for peers that never come (or collides with another machine).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 2
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 1
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    e = eff(ctx)
    d = ctx.doc.data
    r = d.get("machine_rank")
    if e.sagemaker or not e.multi_machine() or isinstance(r, bool) or not isinstance(r, int):
        return ()
    nm = e.num_machines
    if r < 0 or r >= nm:
        ctx.report(("machine_rank",), f"machine_rank {r} is outside 0..{int(nm) - 1} for num_machines {fmt(nm)} "
                   "(ranks are 0-based): this machine never joins a complete rendezvous",
                   "use 0 on the main machine and " + ("1 on the other" if int(nm) == 2 else
                                                       f"1..{int(nm) - 1} on the others") + " (one config per machine)")
    return ()


@rule(id="acc-ds-hostfile-missing", severity="warning", family="accelerate",
      summary="multi-node DeepSpeed (pdsh/openmpi/...) without deepspeed_hostfile", source=ENV)
def hostfile_missing(ctx):
    """For ``num_machines > 1`` with a launcher other than ``standard`` accelerate runs
    ``deepspeed --hostfile <deepspeed_hostfile>``; unset, the literal path ``None`` is passed and
    DeepSpeed falls back to local resources only.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_machines: 2
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    deepspeed_config:
      zero_stage: 2
      deepspeed_multinode_launcher: pdsh
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_machines: 2
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    deepspeed_config:
      zero_stage: 2
      deepspeed_multinode_launcher: pdsh
      deepspeed_hostfile: /job/hostfile
    ```
    """
    e = _ds(ctx)
    if e and e.multi_machine() and e.get("deepspeed_multinode_launcher", "pdsh") != "standard" \
            and not e.get("deepspeed_hostfile"):
        ctx.report(("deepspeed_config",), "multi-node DeepSpeed launch without deepspeed_hostfile: '--hostfile "
                   "None' is passed and DeepSpeed runs on this machine only",
                   "set deepspeed_config.deepspeed_hostfile, or deepspeed_multinode_launcher: standard (torchrun)")
    return ()


# deepspeed/launcher/constants.py: names runner.main dispatches on (after .lower())
DS_RUNNER_LAUNCHERS = ("pdsh", "openmpi", "mpich", "impi", "mvapich", "slurm")


@rule(id="acc-ds-multinode-launcher-invalid", severity="error", family="accelerate",
      summary="multi-node deepspeed_multinode_launcher that neither accelerate nor the deepspeed runner knows",
      source="deepspeed/launcher/runner.py::main")
def multinode_launcher(ctx):
    """For ``num_machines > 1`` accelerate passes ``--launcher <deepspeed_multinode_launcher>`` to the
    ``deepspeed`` runner unchecked (``standard`` means torchrun, ``nossh`` means ``--no_ssh``); the
    runner knows pdsh, openmpi, mpich, impi, mvapich and slurm only.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_machines: 2
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    deepspeed_config:
      zero_stage: 2
      deepspeed_hostfile: /job/hostfile
      deepspeed_multinode_launcher: mpi
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_machines: 2
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    deepspeed_config:
      zero_stage: 2
      deepspeed_hostfile: /job/hostfile
      deepspeed_multinode_launcher: openmpi
    ```
    """
    e = _ds(ctx)
    if not e or not e.multi_machine() or not e.has("deepspeed_multinode_launcher"):
        return ()
    v = e.get("deepspeed_multinode_launcher")
    if v is None or v in ("standard", "nossh"):
        return ()
    if str(v).lower() not in DS_RUNNER_LAUNCHERS:
        from ..core import did_you_mean
        m = did_you_mean(str(v).lower(), S.DS_MULTINODE_LAUNCHERS)
        ctx.report(e.path("deepspeed_multinode_launcher"), f"deepspeed_multinode_launcher {fmt(v)} is not a launcher "
                   "the deepspeed runner knows", f"did you mean '{m}'?" if m else
                   f"use one of: {', '.join(S.DS_MULTINODE_LAUNCHERS)}")
    return ()
