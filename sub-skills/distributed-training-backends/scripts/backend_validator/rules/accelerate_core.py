"""Accelerate config rules: loading, launch validation, environment preparation, top-level keys,
dynamo, megatron and mpirun blocks (accelerate 1.15.0)."""
from __future__ import annotations

import importlib.util
import shutil

from ..core import rule
from . import accelerate_schema as S
from ._acc import eff, fmt, report_unknown

CFG = "accelerate/commands/config/config_args.py"
LAUNCH = "accelerate/commands/launch.py::_validate_launch_command"
ULAUNCH = "accelerate/utils/launch.py"


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


@rule(id="acc-sagemaker-distributed-type-no", severity="error", family="accelerate",
      summary="SageMaker config with distributed_type 'NO' cannot load (num_processes is injected)",
      source=f"{CFG}::BaseConfig.process_config")
def sagemaker_no(ctx):
    """For ``distributed_type: 'NO'`` the loader adds ``num_processes: 1``, which is not a
    SageMakerConfig field, so the unknown-key check then refuses the file.

    Fails:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: 'NO'
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    Passes:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    """
    d = ctx.doc.data
    if d.get("compute_environment") == "AMAZON_SAGEMAKER" and d.get("distributed_type") == "NO" \
            and "num_processes" not in d:
        ctx.report(("distributed_type",), "SageMaker config with distributed_type 'NO': accelerate injects "
                   "num_processes, which SageMakerConfig does not have, and refuses the file",
                   "use DATA_PARALLEL (or run locally with compute_environment: LOCAL_MACHINE)")
    return ()


@rule(id="acc-sagemaker-launch-broken", severity="error", family="accelerate",
      summary="accelerate 1.15.0 launch fails on every SageMaker config (no parallelism_config attribute)",
      source=LAUNCH)
def sagemaker_launch_broken(ctx):
    """When no paradigm flag is passed, ``_validate_launch_command`` reads
    ``defaults.parallelism_config``, which ``SageMakerConfig`` does not have: ``accelerate launch``
    stops with AttributeError for any AMAZON_SAGEMAKER config in 1.15.0.

    Fails:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    Passes:
    ```yaml
    compute_environment: LOCAL_MACHINE
    distributed_type: MULTI_GPU
    num_processes: 8
    ```
    """
    d = ctx.doc.data
    if d.get("compute_environment") == "AMAZON_SAGEMAKER":
        ctx.report(("compute_environment",), "accelerate 1.15.0's launch reads parallelism_config, which "
                   "SageMakerConfig lacks: `accelerate launch` fails with AttributeError for SageMaker configs",
                   "pass a paradigm flag such as --multi_gpu on the command line, or launch the SageMaker job "
                   "with the sagemaker SDK directly")
    return ()


@rule(id="acc-sagemaker-missing-required", severity="error", family="accelerate",
      summary="SageMaker config without ec2_instance_type or iam_role_name",
      source=f"{CFG}::SageMakerConfig")
def sagemaker_missing(ctx):
    """``ec2_instance_type`` and ``iam_role_name`` have no default in SageMakerConfig.

    Fails:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    ```
    Passes:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    """
    d = ctx.doc.data
    if d.get("compute_environment") == "AMAZON_SAGEMAKER":
        for k in S.SAGEMAKER_REQUIRED:
            if k not in d:
                ctx.report((), f"SageMaker config without {k}: SageMakerConfig cannot be built",
                           f"add {k}")
    return ()


@rule(id="acc-json-not-strict", severity="error", family="accelerate",
      summary="a .json Accelerate config uses comments/trailing commas (accelerate uses json.load)",
      source=f"{CFG}::BaseConfig.from_json_file")
def json_not_strict(ctx):
    """Config files whose name ends in ``.json`` are read with strict ``json.load``.

    Fails:
    ```json
    {"distributed_type": "NO", "num_processes": 1,}
    ```
    Passes:
    ```json
    {"distributed_type": "NO", "num_processes": 1}
    ```
    """
    # json.load accepts NaN/Infinity; everything else the lenient loader tolerated (comments, trailing
    # commas, unquoted keys, single quotes, a UTF-8 BOM ...) makes it fail
    strict_fails = [f for f in ctx.doc.lenient_features if f[0] != "nan-infinity"] if ctx.doc.kind == "json" else []
    if strict_fails:
        kind, line, col = strict_fails[0]
        ctx.report((), f"not strict JSON ({kind}); accelerate reads .json configs with json.load and fails",
                   "remove comments / trailing commas, or write the config as YAML", line=line, col=col)
    return ()


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
    from ._acc import suggest
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


@rule(id="acc-use-cpu-invalid", severity="error", family="accelerate",
      summary="use_cpu is not a boolean (the simple launcher exports it and parses it back)",
      source=f"{ULAUNCH}::prepare_simple_launcher_cmd_env")
def use_cpu_invalid(ctx):
    """The simple launcher writes ``str(use_cpu)`` to ``ACCELERATE_USE_CPU`` and immediately reads
    it back with ``str_to_bool``; ``null`` or a word like ``cpu`` fails.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    use_cpu: cpu
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    use_cpu: true
    ```
    """
    e = eff(ctx)
    d = ctx.doc.data
    if not e.sagemaker and isinstance(d.get("use_cpu"), dict):
        # a mapping is merged like a config block, so the launch arguments never get use_cpu at all
        ctx.report(("use_cpu",), "use_cpu is a mapping; accelerate launch then has no use_cpu value and fails",
                   "write use_cpu: true or false")
    elif e.launcher == "simple" and "use_cpu" in d and not S.is_truth_word(d["use_cpu"]):
        ctx.report(("use_cpu",), f"use_cpu is {fmt(d['use_cpu'])}; the launcher parses it as a boolean and fails",
                   "write use_cpu: true or false")
    return ()


@rule(id="acc-gpu-ids-not-string", severity="error", family="accelerate",
      summary="gpu_ids is a YAML number/list instead of a string such as '0,1' or all",
      source=LAUNCH)
def gpu_ids_not_string(ctx):
    """Launch calls ``gpu_ids.split(',')``; YAML reads ``gpu_ids: 0`` as an integer (and ``0,1``
    as the string it should be), so a single id must be quoted.

    Fails:
    ```yaml
    distributed_type: 'NO'
    gpu_ids: 0
    num_processes: 1
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    gpu_ids: '0'
    num_processes: 1
    ```
    """
    d = ctx.doc.data
    v = d.get("gpu_ids")
    if "gpu_ids" in d and v is not None and not isinstance(v, str):
        ctx.report(("gpu_ids",), f"gpu_ids is {fmt(v)} ({type(v).__name__}), not a string: accelerate launch "
                   "fails calling .split(',') on it", "quote it: gpu_ids: '0' (or '0,1', or all)")
    return ()


@rule(id="acc-gpu-ids-too-few", severity="error", family="accelerate",
      summary="multi-GPU single-machine run with fewer than two gpu_ids", source=LAUNCH)
def gpu_ids_too_few(ctx):
    """With a MULTI_* distributed_type on one machine, ``gpu_ids`` must list at least two ids
    (or be ``all``).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    gpu_ids: '0'
    num_processes: 2
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    gpu_ids: '0,1'
    num_processes: 2
    ```
    """
    e = eff(ctx)
    v = ctx.doc.data.get("gpu_ids")
    nm = e.num_machines
    if e.is_multi and isinstance(v, str) and v != "all" and len(v.split(",")) < 2 \
            and isinstance(nm, int) and nm <= 1:
        ctx.report(("gpu_ids",), f"gpu_ids {fmt(v)} names fewer than two GPUs for {e.dt} on one machine; "
                   "accelerate launch refuses it", "list at least two ids ('0,1') or use all; for one GPU use "
                   "distributed_type: 'NO'")
    return ()


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
    e = eff(ctx)
    ip = ctx.doc.data.get("main_process_ip")
    if e.launcher == "simple" and e.multi_machine() and (ip is None or isinstance(ip, dict)):
        ctx.report(("num_machines",), "num_machines > 1 without main_process_ip: the launcher asserts and stops",
                   "add main_process_ip (the address of machine rank 0)")
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
    e = eff(ctx)
    port = ctx.doc.data.get("main_process_port")
    if e.launcher == "simple" and e.multi_machine() and (port is None or isinstance(port, dict)):
        # (a mapping is merged like a config block, so the launch argument stays unset)
        ctx.report(("num_machines",), "num_machines > 1 without main_process_port: the launcher asserts and stops",
                   "add main_process_port (e.g. 29500)")
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


def _dynamo_backend(e):
    if e.has("dynamo_backend"):
        return e.get("dynamo_backend"), e.path("dynamo_backend")
    return None, ()


@rule(id="acc-dynamo-settings-without-backend", severity="warning", family="accelerate",
      summary="dynamo_mode / dynamo_use_* set while the dynamo backend is NO (nothing is compiled)",
      source="accelerate/accelerator.py::Accelerator.prepare_model")
def dynamo_without_backend(ctx):
    """``Accelerator`` calls ``torch.compile`` only when the dynamo backend is not ``NO``, the
    default when ``dynamo_backend`` is omitted; mode, fullgraph, dynamic and regional compilation
    are then read and thrown away.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    dynamo_config:
      dynamo_mode: max-autotune
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_mode: max-autotune
    ```
    """
    e = eff(ctx)
    if e.sagemaker or e.launcher not in ("simple", "torchrun") or e.dynamo_replaced:
        return ()
    b = ctx.doc.data.get("dynamo_config")
    backend, _ = _dynamo_backend(e)
    if not isinstance(b, dict) or not (backend is None or (isinstance(backend, str) and backend.upper() == "NO")):
        return ()
    for k, v in b.items():
        name = S.prefixed("dynamo_config", k)
        if name in S.DYNAMO_KEYS and name != "dynamo_backend" and v not in (None, False, "default", "false", "False"):
            ctx.report(("dynamo_config", k), f"dynamo_config.{k} has no effect: the dynamo backend is "
                       f"{'omitted (NO)' if backend is None else fmt(backend)}, so nothing is compiled",
                       "add dynamo_backend: INDUCTOR (or another backend), or remove the setting")
    return ()


@rule(id="acc-invalid-dynamo-backend", severity="error", family="accelerate",
      summary="dynamo backend is not a DynamoBackend name", source=f"{ULAUNCH}::prepare_multi_gpu_env")
def invalid_dynamo_backend(ctx):
    """The simple and torchrun launchers upper-case the backend and convert it to
    ``DynamoBackend``; YAML's unquoted ``no`` (false) has no ``.upper()``.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: inductr
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
    ```
    """
    e = eff(ctx)
    if e.launcher not in ("simple", "torchrun"):
        return ()
    v, path = _dynamo_backend(e)
    if v is None:
        return ()
    if not isinstance(v, str):
        ctx.report(path, f"dynamo backend is {fmt(v)} ({type(v).__name__}); the launcher fails calling .upper() "
                   "on it", "quote it ('NO') or name a backend such as INDUCTOR")
    elif v.upper() not in S.DYNAMO_BACKENDS:
        from ..core import did_you_mean
        m = did_you_mean(v.upper(), S.DYNAMO_BACKENDS)
        ctx.report(path, f"dynamo backend {fmt(v)} is not a DynamoBackend; the launcher refuses it",
                   f"did you mean '{m}'?" if m else f"use one of: {', '.join(S.DYNAMO_BACKENDS)}")
    return ()


@rule(id="acc-dynamo-bool-value", severity="error", family="accelerate",
      summary="dynamo_use_fullgraph / _use_dynamic / _use_regional_compilation is not a truth word",
      source="accelerate/utils/dataclasses.py::TorchDynamoPlugin.__post_init__")
def dynamo_bool(ctx):
    """TorchDynamoPlugin parses these flags from the environment with ``str_to_bool``.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_use_fullgraph: maybe
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_use_fullgraph: true
    ```
    """
    e = eff(ctx)
    if e.launcher not in ("simple", "torchrun"):
        return ()
    for k in ("dynamo_use_fullgraph", "dynamo_use_dynamic", "dynamo_use_regional_compilation"):
        if e.has(k) and not S.is_truth_word(e.get(k)):
            ctx.report(e.path(k), f"{k} is {fmt(e.get(k))}; TorchDynamoPlugin rejects it (not a truth word)",
                       "use true or false")
    return ()


@rule(id="acc-dynamo-mode-invalid", severity="error", family="accelerate",
      summary="dynamo_mode is not a torch.compile mode (inductor backend)",
      source="torch/_inductor/__init__.py::list_mode_options")
def dynamo_mode(ctx):
    """The file bypasses the ``--dynamo_mode`` choices; ``torch.compile`` then refuses an unknown
    mode when the model is compiled.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_mode: fast
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_mode: max-autotune
    ```
    """
    e = eff(ctx)
    if e.launcher not in ("simple", "torchrun"):
        return ()
    b, _ = _dynamo_backend(e)
    if not isinstance(b, str) or b.upper() != "INDUCTOR":
        return ()  # torch.compile validates the mode for the inductor backend
    if e.has("dynamo_mode") and e.get("dynamo_mode") not in S.DYNAMO_MODES and e.get("dynamo_mode") != "":
        # ('' is falsy: torch.compile's inductor wrapper applies no mode, i.e. the default)
        ctx.report(e.path("dynamo_mode"), f"dynamo_mode {fmt(e.get('dynamo_mode'))} is not a torch.compile mode",
                   f"use one of: {', '.join(S.DYNAMO_MODES)}")
    return ()


@rule(id="acc-dynamo-ignored-under-deepspeed", severity="warning", family="accelerate",
      summary="dynamo_config under DEEPSPEED: the DeepSpeed launcher exports no dynamo settings",
      source=f"{ULAUNCH}::prepare_deepspeed_cmd_env")
def dynamo_ignored_ds(ctx):
    """``prepare_deepspeed_cmd_env`` never writes ``ACCELERATE_DYNAMO_*``, so compilation is off.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
    dynamo_config:
      dynamo_backend: INDUCTOR
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
    ```
    """
    e = eff(ctx)
    b, path = _dynamo_backend(e)
    if e.launcher == "deepspeed" and isinstance(b, str) and b.upper() != "NO":
        ctx.report(path, "dynamo backend is set but the DeepSpeed launcher does not export it: torch.compile "
                   "is not applied", "call torch.compile in the script, or pass dynamo options in code")
    return ()


@rule(id="acc-dynamo-unknown-key", severity="warning", family="accelerate",
      summary="unknown key in dynamo_config (silently ignored)", source=LAUNCH)
def dynamo_unknown(ctx):
    """Keys of ``dynamo_config`` are copied onto the launch arguments with a ``dynamo_`` prefix;
    unknown ones are never read.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_full_graph: true
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_use_fullgraph: true
    ```
    """
    b = ctx.doc.data.get("dynamo_config")
    if isinstance(b, dict) and not eff(ctx).dynamo_replaced:
        bad = [k for k in b if S.prefixed("dynamo_config", k) not in S.DYNAMO_KEYS]
        report_unknown(ctx, "dynamo_config", bad, S.DYNAMO_KEYS, "ignored by accelerate launch",
                       strip=("dynamo_",))
    return ()


@rule(id="acc-launch-ignored-key", severity="warning", family="accelerate",
      summary="rdzv_backend / same_network / enable_cpu_affinity / downcast_bf16 / tpu_use_sudo never "
              "reach the launcher", source=LAUNCH)
def launch_ignored(ctx):
    """Top-level scalars are copied only when the launch argument is None, and these five have
    non-None argparse defaults, so the file's value is silently replaced by the default.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    rdzv_backend: c10d
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 2
    num_processes: 16
    main_process_ip: 10.0.0.1
    main_process_port: 29500
    rdzv_backend: static
    ```
    """
    e = eff(ctx)
    if e.sagemaker:
        return ()
    d = ctx.doc.data
    for k, default in S.LAUNCH_IGNORED_TOP_LEVEL.items():
        if k not in d or d[k] is None:
            continue
        v = d[k]
        changed = (v != default) if k == "rdzv_backend" else (S.truth(v) is True)
        relevant = {"rdzv_backend": e.multi_machine() and e.launcher in ("torchrun", "deepspeed"),
                    "same_network": e.multi_machine() and e.launcher in ("torchrun", "deepspeed"),
                    "enable_cpu_affinity": True,
                    "downcast_bf16": e.is_xla,
                    "tpu_use_sudo": e.is_xla and bool(S.truth(d.get("tpu_use_cluster")))}[k]
        if changed and relevant:
            ctx.report((k,), f"{k}: {fmt(v)} is not applied by accelerate launch (the flag default "
                       f"{fmt(default)} wins)", f"pass --{k} on the accelerate launch command line instead")
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


@rule(id="acc-use-cpu-ignored", severity="warning", family="accelerate",
      summary="use_cpu: true with a launcher that does not honour it (only --cpu does)",
      source=f"{ULAUNCH}::prepare_multi_gpu_env")
def use_cpu_ignored(ctx):
    """``use_cpu`` is exported (``ACCELERATE_USE_CPU``) by the simple launcher only; under
    MULTI_GPU, FSDP, DeepSpeed or Megatron-LM the run still targets the accelerators.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    use_cpu: true
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 1
    use_cpu: true
    ```
    """
    e = eff(ctx)
    if S.truth(ctx.doc.data.get("use_cpu")) and e.launcher in ("torchrun", "deepspeed", "tpu"):
        ctx.report(("use_cpu",), f"use_cpu is ignored with distributed_type {fmt(e.dt)} (only the simple "
                   "launcher exports it)", "use distributed_type MULTI_CPU or 'NO', or pass --cpu")
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


@rule(id="acc-mpirun-unknown-key", severity="warning", family="accelerate",
      summary="unknown key in mpirun_config (silently ignored)", source=LAUNCH)
def mpirun_unknown(ctx):
    """``mpirun_config`` keys are copied verbatim; only ``mpirun_hostfile`` is read.

    Fails:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 4
    mpirun_config:
      hostfile: /etc/hostfile
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 4
    mpirun_config:
      mpirun_hostfile: /etc/hostfile
    ```
    """
    b = ctx.doc.data.get("mpirun_config")
    if isinstance(b, dict):
        report_unknown(ctx, "mpirun_config", [k for k in b if k not in S.MPIRUN_KEYS], S.MPIRUN_KEYS,
                       "ignored by accelerate launch", strip=("mpirun_",))
    return ()


@rule(id="acc-megatron-unknown-key", severity="warning", family="accelerate",
      summary="unknown key in megatron_lm_config (keys need the megatron_lm_ prefix)", source=LAUNCH)
def megatron_unknown(ctx):
    """``megatron_lm_config`` keys are copied verbatim and must carry the ``megatron_lm_`` prefix;
    others are silently ignored.

    Fails:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      tp_degree: 2
    ```
    Passes:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      megatron_lm_tp_degree: 2
    ```
    """
    b = ctx.doc.data.get("megatron_lm_config")
    if isinstance(b, dict):
        report_unknown(ctx, "megatron_lm_config", [k for k in b if k not in S.MEGATRON_KEYS], S.MEGATRON_KEYS,
                       "ignored by accelerate launch", strip=("megatron_lm_",))
    return ()


@rule(id="acc-megatron-value-invalid", severity="error", family="accelerate",
      summary="megatron_lm_config value the plugin cannot parse (int / float / truth word)",
      source="accelerate/utils/dataclasses.py::MegatronLMPlugin.__post_init__")
def megatron_value(ctx):
    """MegatronLMPlugin reads every launcher-exported value back with ``int()``, ``float()`` or
    ``str_to_bool``.

    Fails:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      megatron_lm_tp_degree: two
    ```
    Passes:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      megatron_lm_tp_degree: 2
    ```
    """
    e = eff(ctx)
    if not e.is_megatron:
        return ()
    # prepare_multi_gpu_env exports these four even when null (as the text 'None'); the rest only when set
    always = ("megatron_lm_tp_degree", "megatron_lm_pp_degree", "megatron_lm_gradient_clipping",
              "megatron_lm_use_custom_fsdp")
    for n in always:
        if e.has(n) and e.get(n) is None:
            ctx.report(e.path(n), f"{n} is null: the launcher exports it as the text 'None', which "
                       "MegatronLMPlugin cannot read", "give a value or delete the key (the default applies)")
    for k in S.MEGATRON_INT_KEYS:
        n = "megatron_lm_" + k
        if e.has(n) and e.get(n) is not None and S.as_int(e.get(n)) is None:
            ctx.report(e.path(n), f"{n} is {fmt(e.get(n))}; MegatronLMPlugin reads it with int()", "use an integer")
    for k in S.MEGATRON_FLOAT_KEYS:
        n = "megatron_lm_" + k
        if e.has(n) and e.get(n) is not None:
            try:
                float(str(e.get(n)))
            except ValueError:
                ctx.report(e.path(n), f"{n} is {fmt(e.get(n))}; MegatronLMPlugin reads it with float()",
                           "use a number")
    for k in S.MEGATRON_BOOL_KEYS:
        n = "megatron_lm_" + k
        if e.has(n) and e.get(n) is not None and not S.is_truth_word(e.get(n)):
            ctx.report(e.path(n), f"{n} is {fmt(e.get(n))}; MegatronLMPlugin parses it with str_to_bool",
                       "use true or false")
    return ()


_PACKAGES = {
    "deepspeed": ("deepspeed", "DEEPSPEED needs the deepspeed package (pip install deepspeed)"),
    "megatron": ("megatron", "MEGATRON_LM needs Megatron-LM (megatron.core) installed"),
    "torch_xla": ("torch_xla", "XLA needs torch_xla"),
    "sagemaker": ("sagemaker", "AMAZON_SAGEMAKER needs the sagemaker SDK (pip install accelerate[sagemaker])"),
    "transformers": ("transformers", "needs transformers"),
}


def _missing(mod: str) -> bool:
    try:
        return importlib.util.find_spec(mod) is None
    except (ImportError, ValueError):
        return True


@rule(id="acc-missing-package", severity="info", family="accelerate",
      summary="(--check-imports) an optional package the config needs is not importable here",
      source="accelerate/utils/imports.py")
def missing_package(ctx):
    """Only with ``--check-imports``: uses ``importlib.util.find_spec`` (nothing is imported) to
    say which optional packages the selected features need (deepspeed, Megatron-LM, torch_xla,
    sagemaker, transformers for TP / zero3_init_flag, an FP8 backend, mpirun).

    Fails:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    ```
    """
    if not ctx.options.check_imports:
        return ()
    e = eff(ctx)
    need = []
    if e.launcher == "deepspeed":
        need.append(("deepspeed", "DEEPSPEED needs the deepspeed package"))
        if S.truth(e.get("zero3_init_flag")):
            need.append(("transformers", "zero3_init_flag needs transformers"))
    if e.is_megatron:
        need.append(("megatron", "MEGATRON_LM needs Megatron-LM (megatron.core)"))
    if e.is_xla:
        need.append(("torch_xla", "XLA needs torch_xla"))
    if e.sagemaker:
        need.append(("sagemaker", "AMAZON_SAGEMAKER needs the sagemaker SDK"))
    tp = S.as_int(e.get("parallelism_config_tp_size", 1))
    if e.uses_parallelism() and tp is not None and tp > 1:
        need.append(("transformers", "tensor parallelism needs transformers >= 4.52"))
    if e.fp8 and e.launcher in ("simple", "torchrun", "deepspeed"):
        b = e.fp8_backend()
        mods = {"TE": ["transformer_engine"], "MSAMP": ["msamp"], "AO": ["torchao"]}.get(
            b, ["torchao", "transformer_engine", "msamp"])
        if all(_missing(m) for m in mods):
            ctx.report(("mixed_precision",), f"fp8 needs {' or '.join(mods)}, none is importable here "
                       "(launch raises 'FP8 is not available')", "install an FP8 backend on the training nodes")
    for mod, why in need:
        if _missing(mod):
            ctx.report(("distributed_type",), f"{why}; '{mod}' is not importable here",
                       f"install {mod} where the job runs")
    if e.launcher == "simple" and e.get("mpirun_hostfile") and not (shutil.which("mpirun") or shutil.which("mpiexec")):
        ctx.report(("mpirun_config",), "mpirun_hostfile needs mpirun or mpiexec on PATH (not found here)",
                   "install Open MPI, Intel MPI or MVAPICH where the job runs")
    return ()


def _port_checked(e, d):
    """prepare_multi_gpu_env / prepare_deepspeed_cmd_env probe the port on one machine or on rank 0."""
    mr = d.get("machine_rank", 0)
    return not e.multi_machine() or (int(mr) if isinstance(mr, (bool, int)) else S.as_int(mr)) == 0


def _gpu_launcher(e):
    return e.launcher in ("torchrun", "deepspeed")


@rule(id="acc-gpu-ids-fewer-than-processes", severity="warning", family="accelerate",
      summary="gpu_ids lists fewer GPUs than processes per machine", source=f"{ULAUNCH}::prepare_multi_gpu_env")
def gpu_ids_fewer(ctx):
    """``gpu_ids`` becomes ``CUDA_VISIBLE_DEVICES`` while ``num_processes / num_machines`` processes are
    started per machine; the surplus ranks have no GPU of their own (invalid device ordinal at run time).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    gpu_ids: '0,1'
    num_processes: 4
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    gpu_ids: '0,1,2,3'
    num_processes: 4
    ```
    """
    e = eff(ctx)
    ids = ctx.doc.data.get("gpu_ids")
    n = e.world_size()
    nm = e.num_machines if isinstance(e.num_machines, int) and not isinstance(e.num_machines, bool) else None
    if not _gpu_launcher(e) or not isinstance(ids, str) or ids == "all" or n is None or not nm or nm < 1:
        return ()
    per_node = n // nm
    count = len([x for x in ids.split(",") if x.strip() != ""])
    if 0 < count < per_node:
        ctx.report(("gpu_ids",), f"gpu_ids names {count} GPU(s) but {per_node} processes start on each machine",
                   f"list {per_node} GPU ids, or lower num_processes")
    return ()


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


@rule(id="acc-port-out-of-range", severity="error", family="accelerate",
      summary="main_process_port is outside 0-65535", source="accelerate/utils/other.py::is_port_in_use")
def port_range(ctx):
    """The torchrun and DeepSpeed launchers probe the port with a socket before starting; a port
    outside 0-65535 fails there (0 picks a free port).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    main_process_port: 295000
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    main_process_port: 29500
    ```
    """
    e = eff(ctx)
    v = ctx.doc.data.get("main_process_port")
    if _gpu_launcher(e) and isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= 65535 \
            and _port_checked(e, ctx.doc.data):
        ctx.report(("main_process_port",), f"main_process_port {v} is not a TCP port (0-65535)",
                   "use a free port such as 29500, or 0 to pick one automatically")
    return ()


@rule(id="acc-false-string-is-truthy", severity="warning", family="accelerate",
      summary="debug / tpu_use_cluster given as a quoted false word, which Python treats as true",
      source=LAUNCH)
def false_string_truthy(ctx):
    """``debug`` and ``tpu_use_cluster`` are tested with Python truthiness, so the string
    ``'false'`` (or ``'no'``, ``'0'``) switches them on.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    debug: 'false'
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    debug: false
    ```
    """
    e = eff(ctx)
    if e.sagemaker:
        return ()
    for k in ("debug", "tpu_use_cluster"):
        v = ctx.doc.data.get(k)
        if isinstance(v, str) and v != "" and S.truth(v) is False:
            if k == "tpu_use_cluster" and not e.is_xla:
                continue
            ctx.report((k,), f"{k} is the string {fmt(v)}, which is truthy: {k} is switched ON",
                       f"write {k}: false (unquoted)")
    return ()


@rule(id="acc-dynamo-config-replaced", severity="warning", family="accelerate",
      summary="legacy top-level dynamo_backend replaces the whole dynamo_config block",
      source=f"{CFG}::BaseConfig.process_config")
def dynamo_replaced(ctx):
    """When loading, a top-level ``dynamo_backend`` (the pre-0.18 layout) is turned into a new
    ``dynamo_config`` holding only that backend, discarding the block's mode and flags.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_backend: INDUCTOR
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_mode: max-autotune
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    dynamo_config:
      dynamo_backend: INDUCTOR
      dynamo_mode: max-autotune
    ```
    """
    d = ctx.doc.data
    if "dynamo_backend" in d and isinstance(d.get("dynamo_config"), dict) and d["dynamo_config"]:
        ctx.report(("dynamo_config",), "dynamo_config is discarded: the legacy top-level dynamo_backend replaces it "
                   "when accelerate loads the file", "delete the top-level dynamo_backend and keep dynamo_config")
    return ()


@rule(id="acc-env-value-not-text", severity="error", family="accelerate",
      summary="simple launcher: dynamo_mode or main_process_ip is not text, so the process cannot be started",
      source=f"{ULAUNCH}::prepare_simple_launcher_cmd_env")
def env_not_text(ctx):
    """The simple launcher (NO, MULTI_CPU) copies ``dynamo_mode`` and ``main_process_ip`` into the
    child environment without ``str()``; ``subprocess.Popen`` refuses a number or boolean there.
    YAML makes ``main_process_ip: 10`` or ``dynamo_mode: 010`` numbers.

    Fails:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 2
    main_process_ip: 1234
    mpirun_config:
      mpirun_hostfile: /etc/hostfile
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_CPU
    num_processes: 2
    main_process_ip: '1234'
    mpirun_config:
      mpirun_hostfile: /etc/hostfile
    ```
    """
    e = eff(ctx)
    if e.launcher != "simple":
        return ()
    d = ctx.doc.data
    if e.has("dynamo_mode") and not isinstance(e.get("dynamo_mode"), str):
        ctx.report(e.path("dynamo_mode"), f"dynamo_mode is {fmt(e.get('dynamo_mode'))} "
                   f"({type(e.get('dynamo_mode')).__name__}); the launcher puts it in the child environment "
                   "as is and the process cannot start", "quote it, e.g. dynamo_mode: 'default'")
    ip = d.get("main_process_ip")
    n, nm = d.get("num_processes"), d.get("num_machines", 1)
    many = (isinstance(n, (int, float)) and not isinstance(n, bool) and n > 1) or \
        (isinstance(nm, (int, float)) and not isinstance(nm, bool) and nm > 1)  # `num_machines > 1`
    if ip is not None and not isinstance(ip, (str, dict)) and many:
        ctx.report(("main_process_ip",), f"main_process_ip is {fmt(ip)} ({type(ip).__name__}); the launcher sets "
                   "MASTER_ADDR to it as is and the process cannot start", "quote the address")
    return ()
