"""Rules for a whole launch command (`--launch-command`) and for node sets (`--node-set`).

They see ``ctx.launch`` (backend_validator/launch/check.py::LaunchView): the parsed command, the
merged accelerate view or the torchrun/deepspeed analysis, and the problems the merge met.
Findings point at the word of the command (``<launch-command>:LINE:COL``) or at the file key.
The examples are a command (``$ ...``) and, after ``# config.yaml``, the config file it names;
tests/launch runs them through the validator and through the real launchers' code.
"""
from __future__ import annotations

from ..core import Context, rule

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Iterator

ACC = "accelerate/commands/launch.py::_validate_launch_command"


def _emit(ctx: Context, rid: str) -> Iterator[Any]:
    view = getattr(ctx, "launch", None)
    if view is None:
        return
    for issue in view.issues:
        if issue.rule == rid:
            view.report(ctx, issue)
            yield None


@rule(id="launch-parse-error", severity="error", family="launch",
      summary="the launcher's own argument parser refuses the command (unknown or ambiguous flag, bad value, no script)",
      source="accelerate launch_command_parser / deepspeed runner parse_args / torchrun get_args_parser (argparse)")
def parse_error(ctx: Context):
    """The launcher stops in argparse (exit status 2) before anything runs: an unknown flag, an
    abbreviation that matches two options (``--mixed`` matches ``--mixed_precision`` and
    ``--mixed-precision``), a value of the wrong type or outside the choices, a flag without its
    value, or no training script.

    Fails:
    ```text
    $ accelerate launch --num_processes two train.py
    ```

    Passes:
    ```text
    $ accelerate launch --num_processes 2 --multi_gpu train.py
    ```
    """
    yield from _emit(ctx, "launch-parse-error")


@rule(id="launch-exclusive-flags", severity="error", family="launch",
      summary="more than one of --cpu, --multi_gpu, --tpu, --use_deepspeed, --use_fsdp", source=ACC)
def exclusive(ctx: Context):
    """accelerate checks these flags before reading any config file and accepts at most one.

    Fails:
    ```text
    $ accelerate launch --multi_gpu --use_fsdp --num_processes 2 train.py
    ```

    Passes:
    ```text
    $ accelerate launch --use_fsdp --num_processes 2 train.py
    ```
    """
    yield from _emit(ctx, "launch-exclusive-flags")


@rule(id="launch-multi-gpu-one-process", severity="error", family="launch",
      summary="--multi_gpu with --num_processes below 2 (checked before the config file is read)", source=ACC)
def multi_gpu_one(ctx: Context):
    """``--multi_gpu`` needs at least two processes; the flag value is checked before the file.

    Fails:
    ```text
    $ accelerate launch --multi_gpu --num_processes 1 train.py
    ```

    Passes:
    ```text
    $ accelerate launch --multi_gpu --num_processes 2 train.py
    ```
    """
    yield from _emit(ctx, "launch-multi-gpu-one-process")


@rule(id="launch-parallelism-flag-without-fsdp", severity="error", family="launch",
      summary="--use_parallelism_config without --use_fsdp on the command line (a FSDP config file does not help)",
      source=ACC)
def parallelism_flag(ctx: Context):
    """The check runs before the config file is merged, so ``distributed_type: FSDP`` in the file does
    not satisfy it. (The flag's ``--fsdp_version`` is text, so its comparison with the number 1
    never holds: ``--use_fsdp`` alone is enough to pass.)

    Fails:
    ```text
    $ accelerate launch --config_file config.yaml --use_parallelism_config train.py
    # config.yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml --use_fsdp --fsdp_version 2 --use_parallelism_config train.py
    # config.yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    ```
    """
    yield from _emit(ctx, "launch-parallelism-flag-without-fsdp")


@rule(id="launch-config-file-missing", severity="error", family="launch",
      summary="--config_file names a file that does not exist (relative paths resolve against the launch directory)",
      source="accelerate/commands/config/config_args.py::load_config_from_file")
def config_missing(ctx: Context):
    """accelerate raises FileNotFoundError; the path is taken relative to where the command runs
    (``--cwd`` emulates another launch directory).

    Fails:
    ```text
    $ accelerate launch --config_file no_such_config.yaml train.py
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml train.py
    # config.yaml
    distributed_type: NO
    num_processes: 1
    ```
    """
    yield from _emit(ctx, "launch-config-file-missing")


@rule(id="launch-num-processes-missing", severity="error", family="launch",
      summary="neither the config file nor the command gives num_processes", source=ACC)
def num_processes_missing(ctx: Context):
    """A config file without ``num_processes`` leaves it at -1, and accelerate stops unless the
    command passes ``--num_processes``.

    Fails:
    ```text
    $ accelerate launch --config_file config.yaml train.py
    # config.yaml
    distributed_type: MULTI_GPU
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml --num_processes 2 train.py
    # config.yaml
    distributed_type: MULTI_GPU
    ```
    """
    yield from _emit(ctx, "launch-num-processes-missing")


@rule(id="launch-gpu-ids-too-few", severity="error", family="launch",
      summary="a multi-GPU launch on one machine with fewer than two gpu_ids", source=ACC)
def gpu_ids_few(ctx: Context):
    """When a config file is read, a multi-GPU launch on one machine needs two or more ``gpu_ids``
    (or ``all``); the id list may come from the flag or the file. Without a config file accelerate
    skips this check.

    Fails:
    ```text
    $ accelerate launch --config_file config.yaml --gpu_ids 0 train.py
    # config.yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml --gpu_ids 0,1 train.py
    # config.yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    ```
    """
    yield from _emit(ctx, "launch-gpu-ids-too-few")


@rule(id="launch-multinode-endpoint-missing", severity="error", family="launch",
      summary="several machines on the simple launcher (NO / MULTI_CPU) without main_process_ip or main_process_port",
      source="accelerate/utils/launch.py::prepare_simple_launcher_cmd_env")
def multinode_endpoint(ctx: Context):
    """The simple launcher asserts both values when ``num_machines`` is above 1.

    Fails:
    ```text
    $ accelerate launch --cpu --num_processes 4 --num_machines 2 train.py
    ```

    Passes:
    ```text
    $ accelerate launch --cpu --num_processes 4 --num_machines 2 --main_process_ip 10.0.0.1 --main_process_port 29500 train.py
    ```
    """
    yield from _emit(ctx, "launch-multinode-endpoint-missing")


@rule(id="launch-module-and-no-python", severity="error", family="launch",
      summary="--module together with --no_python", source="accelerate/utils/launch.py / torch/distributed/run.py")
def module_no_python(ctx: Context):
    """Every launcher refuses to run a module without Python.

    Fails:
    ```text
    $ accelerate launch --num_processes 1 -m --no_python mypkg.train
    ```

    Passes:
    ```text
    $ accelerate launch --num_processes 1 -m mypkg.train
    ```
    """
    yield from _emit(ctx, "launch-module-and-no-python")


@rule(id="launch-tpu-no-python", severity="error", family="launch",
      summary="--no_python on the TPU launcher", source="accelerate/commands/launch.py::tpu_launcher")
def tpu_no_python(ctx: Context):
    """The TPU launcher imports the training script as a Python module, so ``--no_python`` is refused.

    Fails:
    ```text
    $ accelerate launch --tpu --num_processes 8 --no_python train.py
    ```

    Passes:
    ```text
    $ accelerate launch --tpu --num_processes 8 train.py
    ```
    """
    yield from _emit(ctx, "launch-tpu-no-python")


@rule(id="launch-fsdp-ram-loading-without-sync", severity="error", family="launch",
      summary="FSDP: cpu_ram_efficient_loading on with sync_module_states off, set from the command line",
      source="accelerate/utils/launch.py::prepare_multi_gpu_env")
def fsdp_ram(ctx: Context):
    """``prepare_multi_gpu_env`` refuses efficient RAM loading without module-state sync. It tests
    the raw values: a flag's text ``false`` is a non-empty string and counts as on.

    Fails:
    ```text
    $ accelerate launch --config_file config.yaml --fsdp_cpu_ram_efficient_loading true train.py
    # config.yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_sync_module_states: false
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml --fsdp_sync_module_states true train.py
    # config.yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_sync_module_states: false
    ```
    """
    yield from _emit(ctx, "launch-fsdp-ram-loading-without-sync")


@rule(id="launch-flag-repeated", severity="warning", family="launch",
      summary="the same flag given twice: the last one wins silently", source="argparse store action")
def repeated(ctx: Context):
    """argparse keeps the last value; the earlier one is dropped without a message.

    Fails:
    ```text
    $ accelerate launch --num_processes 2 --multi_gpu --num_processes 4 train.py
    ```

    Passes:
    ```text
    $ accelerate launch --multi_gpu --num_processes 4 train.py
    ```
    """
    yield from _emit(ctx, "launch-flag-repeated")


@rule(id="launch-paradigm-flag-overrides-file", severity="warning", family="launch",
      summary="a --multi_gpu/--use_deepspeed/--use_fsdp/... flag replaces the file's distributed_type", source=ACC)
def paradigm_override(ctx: Context):
    """With any paradigm flag on the command line, the file's ``distributed_type`` is not read: the
    flag picks the launcher, and the file's blocks for the other backend are ignored.

    Fails:
    ```text
    $ accelerate launch --config_file config.yaml --multi_gpu train.py
    # config.yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml train.py
    # config.yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
    ```
    """
    yield from _emit(ctx, "launch-paradigm-flag-overrides-file")


@rule(id="launch-flag-ignored", severity="warning", family="launch",
      summary="a flag the chosen launcher never reads (e.g. --zero_stage under FSDP, --main_process_ip on one machine)",
      source="accelerate/commands/launch.py::launch_command + accelerate/utils/launch.py env builders")
def flag_ignored(ctx: Context):
    """The value is parsed but the launcher that runs does not pass it on: DeepSpeed flags outside
    DeepSpeed, FSDP flags outside FSDP, Megatron-LM flags outside Megatron-LM, torchrun-only flags
    (``--rdzv_backend``, ``--max_restarts`` ...) on the simple launcher, ``--main_process_ip`` and
    ``--machine_rank`` on a single machine, a lower-priority paradigm flag
    (``--use_megatron_lm`` next to ``--use_deepspeed``), paradigm flags next to ``--cpu``.

    Fails:
    ```text
    $ accelerate launch --use_fsdp --num_processes 2 --zero_stage 3 train.py
    ```

    Passes:
    ```text
    $ accelerate launch --use_deepspeed --num_processes 2 --zero_stage 3 train.py
    ```
    """
    yield from _emit(ctx, "launch-flag-ignored")


@rule(id="launch-flag-loses-to-deepspeed-json", severity="warning", family="launch",
      summary="a DeepSpeed flag (--zero_stage, --gradient_accumulation_steps ...) next to a deepspeed_config_file whose explicit value wins",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin.__post_init__ (fill_match(..., must_match=False))")
def flag_loses_to_json(ctx: Context):
    """With a DeepSpeed JSON, the typed flag only replaces ``auto`` values; an explicit value in the
    JSON is kept and the flag is dropped without a message. (The same key written in the config
    file is an error instead: acc-ds-config-file-conflict.)

    Fails:
    ```text
    $ accelerate launch --config_file config.yaml --zero_stage 2 train.py
    # config.yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: ds.json
    # ds.json
    {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml --zero_stage 2 train.py
    # config.yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: ds.json
    # ds.json
    {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": "auto"}}
    ```
    """
    yield from _emit(ctx, "launch-flag-loses-to-deepspeed-json")


@rule(id="launch-bool-flag-value", severity="warning", family="launch",
      summary="a Megatron-LM flag parsed with type=bool: any non-empty text, 'False' too, becomes True",
      source="accelerate/commands/launch.py::launch_command_parser (megatron_lm_* type=bool)")
def bool_flag(ctx: Context):
    """``bool('False')`` is True, so writing false on the command line turns the option on.

    Fails:
    ```text
    $ accelerate launch --use_megatron_lm --num_processes 2 --megatron_lm_no_load_optim False train.py
    ```

    Passes:
    ```text
    $ accelerate launch --use_megatron_lm --num_processes 2 train.py
    ```
    """
    yield from _emit(ctx, "launch-bool-flag-value")


@rule(id="launch-machine-rank-default", severity="warning", family="launch",
      summary="a multi-machine launch with a config file but no machine_rank in it or on the command (every node is rank 0)",
      source=ACC)
def machine_rank_default(ctx: Context):
    """With ``num_machines`` above 1 each node needs its own ``machine_rank``; a config file without
    it gives 0 (``ClusterConfig`` default), so every node starts as rank 0. (Without any config file
    the launch fails instead: launch-machine-rank-missing.)

    Fails:
    ```text
    $ accelerate launch --config_file config.yaml --num_machines 2 train.py
    # config.yaml
    distributed_type: MULTI_GPU
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```

    Passes:
    ```text
    $ accelerate launch --config_file config.yaml --num_machines 2 --machine_rank 1 train.py
    # config.yaml
    distributed_type: MULTI_GPU
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    yield from _emit(ctx, "launch-machine-rank-default")


@rule(id="launch-machine-rank-missing", severity="error", family="launch",
      summary="several machines on torchrun/deepspeed without a config file and without --machine_rank",
      source="accelerate/utils/launch.py::prepare_multi_gpu_env / prepare_deepspeed_cmd_env (int(machine_rank))")
def machine_rank_missing(ctx: Context):
    """Without a config file nothing fills ``machine_rank``; the env builder's ``int(None)`` fails.

    Fails:
    ```text
    $ accelerate launch --use_deepspeed --num_processes 16 --num_machines 2 train.py
    ```

    Passes:
    ```text
    $ accelerate launch --use_deepspeed --num_processes 16 --num_machines 2 --machine_rank 0 train.py
    ```
    """
    yield from _emit(ctx, "launch-machine-rank-missing")


@rule(id="launch-abbreviated-flag", severity="info", family="launch",
      summary="an abbreviated torchrun/deepspeed flag that argparse expands (breaks when a new flag shares the prefix)",
      source="argparse allow_abbrev")
def abbreviated(ctx: Context):
    """torchrun and deepspeed accept any unique prefix of a flag (accelerate accepts none); a later
    release that adds a flag with the same prefix turns the abbreviation into an error.

    Fails:
    ```text
    $ torchrun --standalone --nproc-per 2 train.py
    ```

    Passes:
    ```text
    $ torchrun --standalone --nproc-per-node 2 train.py
    ```
    """
    yield from _emit(ctx, "launch-abbreviated-flag")


@rule(id="launch-torchrun-bad-value", severity="error", family="launch",
      summary="torchrun refuses --nnodes, --nproc-per-node, --max-restarts or --local-ranks-filter",
      source="torch/distributed/run.py::config_from_args")
def torchrun_bad(ctx: Context):
    """``--nnodes`` must be N or MIN:MAX with 0 < MIN <= MAX, ``--nproc-per-node`` an integer above 0
    or auto/cpu/gpu/xpu, ``--max-restarts`` at least 0.

    Fails:
    ```text
    $ torchrun --nnodes 2:1 --nproc-per-node 4 train.py
    ```

    Passes:
    ```text
    $ torchrun --nnodes 1:2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29400 train.py
    ```
    """
    yield from _emit(ctx, "launch-torchrun-bad-value")


@rule(id="launch-torchrun-standalone-overrides", severity="warning", family="launch",
      summary="--standalone replaces the rendezvous flags with a local one (no other node can join)",
      source="torch/distributed/run.py::run")
def torchrun_standalone(ctx: Context):
    """``--standalone`` sets ``rdzv_backend=c10d``, ``rdzv_endpoint=localhost:0`` and a random id,
    whatever the command says.

    Fails:
    ```text
    $ torchrun --standalone --rdzv-endpoint 10.0.0.1:29400 --nproc-per-node 2 train.py
    ```

    Passes:
    ```text
    $ torchrun --standalone --nproc-per-node 2 train.py
    ```
    """
    yield from _emit(ctx, "launch-torchrun-standalone-overrides")


@rule(id="launch-torchrun-ignored-flag", severity="warning", family="launch",
      summary="--master-addr/--master-port/--node-rank that the chosen rendezvous does not use",
      source="torch/distributed/run.py::get_rdzv_endpoint / config_from_args")
def torchrun_ignored(ctx: Context):
    """Master address, port and node rank are read only by the static rendezvous without
    ``--rdzv-endpoint``.

    Fails:
    ```text
    $ torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29400 --node-rank 1 train.py
    ```

    Passes:
    ```text
    $ torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29400 train.py
    ```
    """
    yield from _emit(ctx, "launch-torchrun-ignored-flag")


@rule(id="launch-torchrun-multinode-rendezvous", severity="warning", family="launch",
      summary="torchrun on several nodes without a reachable rendezvous (static without --master-addr/--node-rank, c10d without endpoint)",
      source="torch/distributed/run.py::get_args_parser defaults")
def torchrun_multinode(ctx: Context):
    """The static rendezvous defaults to ``--master-addr 127.0.0.1`` and ``--node-rank 0``; on
    several nodes each would wait for itself.

    Fails:
    ```text
    $ torchrun --nnodes 2 --nproc-per-node 4 train.py
    ```

    Passes:
    ```text
    $ torchrun --nnodes 2 --nproc-per-node 4 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500 train.py
    ```
    """
    yield from _emit(ctx, "launch-torchrun-multinode-rendezvous")


@rule(id="launch-ds-filter-conflict", severity="error", family="launch",
      summary="deepspeed: --num_nodes/--num_gpus with --include/--exclude, both filters, --num_nodes > 1 without a hostfile, --no_ssh rank out of range",
      source="deepspeed/launcher/runner.py::main / parse_resource_filter")
def ds_filter(ctx: Context):
    """The DeepSpeed runner selects machines either by count or by filter, and needs a hostfile
    for more than one node.

    Fails:
    ```text
    $ deepspeed --num_gpus 2 --include localhost:0,1 train.py --deepspeed_config ds.json
    ```

    Passes:
    ```text
    $ deepspeed --include localhost:0,1 train.py
    ```
    """
    yield from _emit(ctx, "launch-ds-filter-conflict")


@rule(id="launch-ds-filter-invalid", severity="error", family="launch",
      summary="deepspeed --include/--exclude names a host the hostfile lacks, a missing slot, or is malformed",
      source="deepspeed/launcher/runner.py::parse_resource_filter / parse_node_config")
def ds_filter_invalid(ctx: Context):
    """Filters are ``HOST[:SLOT,...]`` joined by ``@``; every host must be in the hostfile (only
    ``localhost`` without one) and every slot below its ``slots=`` count.

    Fails:
    ```text
    $ deepspeed --hostfile hostfile --include worker-3 train.py
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```

    Passes:
    ```text
    $ deepspeed --hostfile hostfile --include worker-2:0,1 train.py
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```
    """
    yield from _emit(ctx, "launch-ds-filter-invalid")


@rule(id="launch-ds-gpus-exceed-slots", severity="warning", family="launch",
      summary="deepspeed --num_gpus above a host's slots= count: that many processes start anyway",
      source="deepspeed/launcher/runner.py::apply_num_nodes_and_gpus")
def ds_gpus_slots(ctx: Context):
    """``--num_gpus N`` replaces each host's slots with ``range(N)`` without looking at ``slots=``.

    Fails:
    ```text
    $ deepspeed --hostfile hostfile --num_gpus 12 train.py
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```

    Passes:
    ```text
    $ deepspeed --hostfile hostfile --num_gpus 8 train.py
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```
    """
    yield from _emit(ctx, "launch-ds-gpus-exceed-slots")


@rule(id="launch-ds-hostfile-invalid", severity="error", family="launch",
      summary="the DeepSpeed hostfile has a line that is not 'HOST slots=N', a host twice, or no host",
      source="deepspeed/launcher/runner.py::_parse_hostfile")
def ds_hostfile(ctx: Context):
    """Each non-comment line must be ``HOST slots=N``; the finding points at the hostfile line.

    Fails:
    ```text
    $ deepspeed --hostfile hostfile train.py
    # hostfile
    worker-1 slots=8
    worker-2 gpus=8
    ```

    Passes:
    ```text
    $ deepspeed --hostfile hostfile train.py
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```
    """
    yield from _emit(ctx, "launch-ds-hostfile-invalid")


@rule(id="launch-ds-hostfile-missing", severity="warning", family="launch",
      summary="deepspeed --hostfile names a file that does not exist (the runner trains on this machine only)",
      source="deepspeed/launcher/runner.py::fetch_hostfile")
def ds_hostfile_missing(ctx: Context):
    """The runner only logs a warning and falls back to the local devices.

    Fails:
    ```text
    $ deepspeed --hostfile no_such_hostfile train.py
    ```

    Passes:
    ```text
    $ deepspeed train.py
    ```
    """
    yield from _emit(ctx, "launch-ds-hostfile-missing")


@rule(id="launch-ds-unknown-launcher", severity="error", family="launch",
      summary="deepspeed --launcher is not pdsh, openmpi, mpich, impi, mvapich or slurm (multi-node)",
      source="deepspeed/launcher/runner.py::main")
def ds_launcher(ctx: Context):
    """With a hostfile of several machines the runner picks its multi-node runner by name and stops
    on an unknown one.

    Fails:
    ```text
    $ deepspeed --hostfile hostfile --launcher ssh train.py
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```

    Passes:
    ```text
    $ deepspeed --hostfile hostfile --launcher openmpi train.py
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```
    """
    yield from _emit(ctx, "launch-ds-unknown-launcher")


@rule(id="nodeset-machine-rank", severity="error", family="launch",
      summary="node set: machine_rank values are not exactly 0..num_machines-1, once each",
      source="torch rendezvous (static): one node per rank")
def nodeset_rank(ctx: Context):
    """Each node of a multi-machine job needs a distinct ``machine_rank``; a duplicate or a gap
    leaves the rendezvous waiting. Passing files: ``--node-set node0.yaml node1.yaml``.

    Fails:
    ```text
    $ --node-set node0.yaml node1.yaml
    # node0.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    # node1.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```

    Passes:
    ```text
    $ --node-set node0.yaml node1.yaml
    # node0.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    # node1.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 1
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    yield from _emit(ctx, "nodeset-machine-rank")


@rule(id="nodeset-mismatch", severity="error", family="launch",
      summary="node set: nodes disagree on world size, machines, rendezvous endpoint, backend, precision, DeepSpeed JSON or multinode launcher",
      source="accelerate env builders: every node must build the same job")
def nodeset_mismatch(ctx: Context):
    """Values every node must share: ``num_machines``, ``num_processes``, ``main_process_ip``,
    ``main_process_port``, ``distributed_type``, ``mixed_precision``, ``rdzv_backend``,
    ``same_network``, the content of the DeepSpeed JSON and ``deepspeed_multinode_launcher``.
    Exception: nodes with different GPU counts need their own ``num_processes`` (the node's GPU
    count times ``num_machines``), since each node starts ``num_processes // num_machines``.

    Fails:
    ```text
    $ --node-set node0.yaml node1.yaml
    # node0.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    # node1.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 1
    main_process_ip: 10.0.0.1
    main_process_port: 29501
    ```

    Passes:
    ```text
    $ --node-set node0.yaml node1.yaml
    # node0.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    # node1.yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    machine_rank: 1
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    ```
    """
    yield from _emit(ctx, "nodeset-mismatch")


@rule(id="nodeset-hostfile-slots", severity="warning", family="launch",
      summary="node set: the DeepSpeed hostfile's hosts or slots do not match num_machines / num_processes",
      source="deepspeed/launcher/runner.py (hostfile slots) vs accelerate --num_gpus = num_processes // num_machines")
def nodeset_slots(ctx: Context):
    """accelerate asks the DeepSpeed runner for ``num_processes // num_machines`` GPUs per host; the
    hostfile should list ``num_machines`` hosts with at least that many slots.

    Fails:
    ```text
    $ --node-set node0.yaml
    # node0.yaml
    distributed_type: DEEPSPEED
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    deepspeed_config:
      zero_stage: 2
      deepspeed_hostfile: hostfile
    # hostfile
    worker-1 slots=4
    worker-2 slots=4
    ```

    Passes:
    ```text
    $ --node-set node0.yaml
    # node0.yaml
    distributed_type: DEEPSPEED
    num_machines: 2
    num_processes: 16
    machine_rank: 0
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    deepspeed_config:
      zero_stage: 2
      deepspeed_hostfile: hostfile
    # hostfile
    worker-1 slots=8
    worker-2 slots=8
    ```
    """
    yield from _emit(ctx, "nodeset-hostfile-slots")
