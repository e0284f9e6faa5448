"""Accelerate config rules: loading (distributed_type, compute_environment), top-level keys and value types
and blocks the chosen distributed_type ignores (accelerate 1.15.0); JSON strictness is in accelerate_json,
optional packages (--check-imports) in accelerate_imports.
Process counts and machines are in accelerate_processes, dynamo in accelerate_dynamo, SageMaker and
Megatron-LM in accelerate_platforms; use_cpu, the debug / tpu_use_cluster truthiness, top-level flags the
launcher never copies and values it puts in the child environment as they are in accelerate_launch_keys
(compiled only for a config with one of those keys).
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import CFG, LAUNCH, ULAUNCH, eff, fmt, report_unknown


@rule(id="acc-missing-distributed-type", severity="error", family="accelerate",
      summary="the config has no distributed_type", source=f"{CFG}::BaseConfig.process_config")
def missing_distributed_type(ctx):
    """accelerate refuses to load a config without ``distributed_type``.

    Fails:
    ```yaml
    compute_environment: LOCAL_MACHINE
    mixed_precision: bf16
    num_processes: 1
    ```
    Passes:
    ```yaml
    compute_environment: LOCAL_MACHINE
    distributed_type: 'NO'
    mixed_precision: bf16
    num_processes: 1
    ```
    """
    if "distributed_type" not in ctx.doc.data:
        ctx.report((), "no distributed_type: accelerate refuses to load the config",
                   "add distributed_type (NO, MULTI_GPU, DEEPSPEED, FSDP, ...)")
    return ()


@rule(id="acc-invalid-compute-environment", severity="error", family="accelerate",
      summary="compute_environment is not LOCAL_MACHINE or AMAZON_SAGEMAKER",
      source=f"{CFG}::BaseConfig.__post_init__")
def invalid_compute_environment(ctx):
    """Only the exact, case-sensitive ``ComputeEnvironment`` names load; any other value also
    selects the SageMaker config class.

    Fails:
    ```yaml
    compute_environment: local
    distributed_type: 'NO'
    num_processes: 1
    ```
    Passes:
    ```yaml
    compute_environment: LOCAL_MACHINE
    distributed_type: 'NO'
    num_processes: 1
    ```
    """
    v = ctx.doc.data.get("compute_environment", "LOCAL_MACHINE")
    if v not in S.COMPUTE_ENVIRONMENTS:
        ctx.report(("compute_environment",), f"compute_environment {fmt(v)} is not a ComputeEnvironment; "
                   "accelerate refuses to load it", "use LOCAL_MACHINE or AMAZON_SAGEMAKER (exact case)")
    return ()


@rule(id="acc-invalid-distributed-type", severity="error", family="accelerate",
      summary="distributed_type is not a DistributedType name (exact case)",
      source=f"{CFG}::BaseConfig.__post_init__")
def invalid_distributed_type(ctx):
    """``distributed_type`` strings are converted with the enum constructor: exact, upper-case
    names only (SageMaker configs: NO, DATA_PARALLEL, MODEL_PARALLEL).

    Fails:
    ```yaml
    distributed_type: multi_gpu
    num_processes: 2
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    ```
    """
    e = eff(ctx)
    v = e.dt
    if not isinstance(v, str) or e.ce not in S.COMPUTE_ENVIRONMENTS:
        return ()
    allowed = S.SAGEMAKER_DISTRIBUTED_TYPES if e.sagemaker else S.DISTRIBUTED_TYPES
    if v not in allowed:
        up = v.upper().replace("-", "_")
        hint = f"did you mean '{up}'?" if up in allowed else f"use one of: {', '.join(allowed)}"
        ctx.report(("distributed_type",), f"distributed_type {fmt(v)} is not a valid "
                   f"{'SageMakerDistributedType' if e.sagemaker else 'DistributedType'}; accelerate refuses "
                   "to load the config", hint)
    return ()


@rule(id="acc-distributed-type-not-string", severity="warning", family="accelerate",
      summary="distributed_type is not a string (YAML 1.1 reads unquoted NO as false)",
      source=f"{CFG}::BaseConfig.__post_init__")
def distributed_type_not_string(ctx):
    """An unquoted ``NO`` is the boolean false under YAML 1.1. accelerate neither converts nor
    rejects it: the simple launcher is used and ``num_processes`` is no longer filled in.

    Fails:
    ```yaml
    distributed_type: NO
    num_processes: 1
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    ```
    """
    d = ctx.doc.data
    if "distributed_type" in d and not isinstance(d["distributed_type"], str):
        ctx.report(("distributed_type",), f"distributed_type is {fmt(d['distributed_type'])}, not a string; "
                   "accelerate keeps it unconverted and treats the run as a plain single-process launch",
                   "quote it: distributed_type: 'NO'")
    return ()


@rule(id="acc-unknown-top-level-key", severity="error", family="accelerate",
      summary="top-level key accelerate does not know (the config is refused)",
      source=f"{CFG}::BaseConfig.from_yaml_file")
def unknown_top_level_key(ctx):
    """accelerate compares the top-level keys with the config dataclass fields and refuses the
    file when any is left over.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_process: 2
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    ```
    """
    e = eff(ctx)
    if e.ce not in S.COMPUTE_ENVIRONMENTS:
        return ()
    fields = S.SAGEMAKER_FIELDS if e.sagemaker else S.CLUSTER_FIELDS
    extra = [k for k in ctx.doc.data if k not in fields and k not in S.LEGACY_TOP_LEVEL]
    for k in extra:
        if k in S.REMOVED_TOP_LEVEL:
            ctx.report((k,), f"unknown key {fmt(k)}: {S.REMOVED_TOP_LEVEL[k]}; accelerate refuses the config",
                       "remove the block")
    report_unknown(ctx, None, [k for k in extra if k not in S.REMOVED_TOP_LEVEL], fields,
                   f"{'SageMakerConfig' if e.sagemaker else 'ClusterConfig'} refuses the config",
                   also=[] if e.sagemaker else sorted(S.LEGACY_TOP_LEVEL))
    return ()


@rule(id="acc-int-value", severity="error", family="accelerate",
      summary="num_processes / num_machines / machine_rank / main_process_port is not an integer",
      source=f"{ULAUNCH}::prepare_simple_launcher_cmd_env")
def int_value(ctx):
    """The launcher compares and divides these values as integers (``num_processes > 1``,
    ``num_processes // num_machines``, ``int(machine_rank)``); a quoted number or a word fails.

    Fails:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: '2'
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 2
    mpirun_config:
      mpirun_hostfile: /etc/hostfile
    ```
    """
    e = eff(ctx)
    if e.sagemaker:
        return ()
    d = ctx.doc.data

    def arg(k, default=None):
        # a mapping value is treated like a config block by the launch merge and never copied
        v = d.get(k, default)
        return None if isinstance(v, dict) else v

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    def is_num(v):
        return isinstance(v, (int, float))

    def bad(k, why):
        ctx.report((k,), f"{k} is {fmt(d.get(k))}: {why}", f"write {k} as a plain integer")

    np_, nm = arg("num_processes"), arg("num_machines", 1)
    if "num_processes" in d and d.get("use_cpu") and not is_num(np_):
        # _validate_launch_command: `args.use_cpu and args.num_processes >= 1`, for every launcher
        return bad("num_processes", "with use_cpu, accelerate launch compares it with 1 and fails")
    if d.get("use_cpu") and is_num(np_) and np_ >= 1 and "num_machines" in d and (not is_num(nm) or nm == 0):
        return bad("num_machines", "with use_cpu, accelerate launch divides num_processes by it and fails")
    if e.launcher not in ("simple", "torchrun", "deepspeed"):
        return ()
    if "num_machines" in d and not is_num(nm):
        return bad("num_machines", "the launcher compares it with 1 and fails")
    multi = is_num(nm) and nm > 1
    if multi and (e.launcher == "torchrun" or (e.launcher == "deepspeed" and
                                                e.get("deepspeed_multinode_launcher") == "standard")) \
            and not is_int(nm):
        return bad("num_machines", "torchrun cannot read it as the node count")
    std = e.launcher == "deepspeed" and e.get("deepspeed_multinode_launcher") == "standard"
    runner = e.launcher == "deepspeed" and multi and not std
    if "num_processes" in d:
        if e.launcher == "simple":
            if np_ is not None and not is_num(np_):
                return bad("num_processes", "the simple launcher compares it with 1 and fails")
        elif multi and (e.launcher == "torchrun" or std):
            if not isinstance(np_, int):  # bool // int is still an int
                return bad("num_processes", "the launcher divides it by num_machines and torchrun cannot use the "
                           "result")
        elif runner:
            if e.get("deepspeed_exclusion_filter") is None and e.get("deepspeed_inclusion_filter") is None:
                if not isinstance(np_, int):
                    return bad("num_processes", "the launcher divides it by num_machines for deepspeed --num_gpus")
                if not is_int(nm):
                    return bad("num_machines", "num_processes // num_machines must be an integer for deepspeed "
                               "--num_gpus")
        elif S.as_int(np_) is None and str(np_) not in ("cpu", "gpu", "xpu", "auto"):
            return bad("num_processes", "torchrun cannot read it as --nproc_per_node")
    mr = arg("machine_rank", 0)
    if isinstance(mr, float) and mr == mr and mr not in (float("inf"), float("-inf")):
        rank = int(mr)  # int() truncates a float; torchrun's static rendezvous reads it the same way
    else:
        rank = int(mr) if isinstance(mr, (bool, int)) else (S.as_int(mr) if isinstance(mr, str) else None)
    if multi and e.launcher in ("torchrun", "deepspeed") and "machine_rank" in d and rank is None:
        return bad("machine_rank", "the launcher calls int() on it")
    port = arg("main_process_port")
    if port is not None and not isinstance(port, int) and e.launcher in ("torchrun", "deepspeed") and \
            (not multi or rank == 0):
        return bad("main_process_port", "the port check before launch needs an integer (0 picks a free port)")
    if runner and port is not None and port != 0 and (isinstance(port, bool) or S.as_int(port) is None):
        # (0 / false: prepare_deepspeed_cmd_env picks a free port)
        # deepspeed/launcher/runner.py::parse_args: --master_port type=int
        return bad("main_process_port", "the deepspeed runner reads --master_port as an integer and stops")
    return ()


@rule(id="acc-invalid-mixed-precision", severity="error", family="accelerate",
      summary="mixed_precision is not no / fp16 / bf16 / fp8 (YAML 1.1 reads unquoted no as false)",
      source=f"{ULAUNCH}::prepare_simple_launcher_cmd_env")
def invalid_mixed_precision(ctx):
    """Every launcher lower-cases ``mixed_precision`` and converts it to ``PrecisionType``. An
    unquoted ``no`` is the boolean false in YAML 1.1 and has no ``.lower()``.

    Fails:
    ```yaml
    distributed_type: 'NO'
    mixed_precision: no
    num_processes: 1
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    mixed_precision: 'no'
    num_processes: 1
    ```
    """
    e = eff(ctx)
    if e.launcher not in ("simple", "torchrun", "deepspeed", "sagemaker"):
        return ()
    d = ctx.doc.data
    path = ("mixed_precision",) if "mixed_precision" in d else ("fp16",)
    v = e.mixed_precision
    if v is None:
        return ()
    if not isinstance(v, str):
        ctx.report(path, f"mixed_precision is {fmt(v)} ({type(v).__name__}); the launcher fails calling "
                   ".lower() on it", "quote it: mixed_precision: 'no' (or fp16, bf16, fp8)")
    elif v.lower() not in S.PRECISIONS:
        ctx.report(path, f"mixed_precision {fmt(v)} is not one of no, fp16, bf16, fp8; the launcher refuses it",
                   "use no, fp16, bf16 or fp8")
    return ()


@rule(id="acc-block-ignored", severity="warning", family="accelerate",
      summary="a config block that the selected distributed_type never reads",
      source="accelerate/commands/launch.py::launch_command")
def block_ignored(ctx):
    """``launch_command`` picks one launcher from ``distributed_type``; blocks for the others are
    copied into arguments nobody reads.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    ```
    """
    e = eff(ctx)
    if e.sagemaker:
        return ()
    d = ctx.doc.data
    wanted = {"deepspeed_config": e.launcher == "deepspeed",
              "fsdp_config": e.is_fsdp,
              "megatron_lm_config": e.is_megatron,
              "mpirun_config": e.launcher == "simple"}
    for block, used in wanted.items():
        b = d.get(block)
        if isinstance(b, dict) and b and not used and "distributed_type" in d:
            ctx.report((block,), f"{block} is ignored with distributed_type {fmt(e.dt)}",
                       "remove the block, or set the distributed_type that uses it")
    return ()


BLOCKS = ("deepspeed_config", "fsdp_config", "megatron_lm_config", "dynamo_config", "fp8_config",
          "parallelism_config", "mpirun_config")


def _not_mapping(d, block):
    b = d.get(block)
    return block in d and b is not None and not isinstance(b, dict)


@rule(id="acc-ds-config-not-mapping", severity="error", family="accelerate",
      summary="distributed_type DEEPSPEED with a deepspeed_config that is not a mapping (a path, list, ...)",
      source="accelerate/commands/launch.py::launch_command")
def ds_config_not_mapping(ctx):
    """The DeepSpeed launcher calls ``defaults.deepspeed_config.keys()``; a block written as a
    path (the JSON belongs in ``deepspeed_config_file``), a list or a scalar makes it fail.
    ``deepspeed_config:`` with nothing after it (null) is fine: it becomes ``{}``.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config: ds_config.json
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```
    """
    e = eff(ctx)
    d = ctx.doc.data
    if not e.sagemaker and e.launcher == "deepspeed" and _not_mapping(d, "deepspeed_config"):
        v = d["deepspeed_config"]
        hint = ("nest it: deepspeed_config: {deepspeed_config_file: " + v + "}" if isinstance(v, str) and v
                else "write the block as a mapping (zero_stage: 2, ...) or leave it empty")
        ctx.report(("deepspeed_config",), f"deepspeed_config is {fmt(v)} ({type(v).__name__}), not a mapping: "
                   "the DeepSpeed launcher fails calling .keys() on it", hint)
    return ()


@rule(id="acc-block-not-mapping", severity="warning", family="accelerate",
      summary="a nested block (fsdp_config, dynamo_config, ...) that is not a mapping is silently skipped",
      source="accelerate/commands/launch.py::_validate_launch_command")
def block_not_mapping(ctx):
    """``_validate_launch_command`` copies a block's keys only when it is a dict; a block written as
    a string, list or number is skipped without a message, so every setting in it is lost (the
    plugin runs on launch defaults).

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
    - fsdp_version: 2
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    ```
    """
    e = eff(ctx)
    if e.sagemaker:
        return ()
    d = ctx.doc.data
    for block in BLOCKS:
        if block == "deepspeed_config" and e.launcher == "deepspeed":
            continue  # an error (acc-ds-config-not-mapping)
        if block == "dynamo_config" and e.dynamo_replaced:
            continue
        if _not_mapping(d, block) and d[block] not in ("", [], False, 0):  # empty: nothing is lost
            v = d[block]
            ctx.report((block,), f"{block} is {fmt(v)} ({type(v).__name__}), not a mapping: accelerate launch "
                       "skips it and none of its settings apply",
                       "write the block as indented key: value lines (no '- ' list items)")
    return ()
