"""Accelerate launch rules for optional top-level keys (accelerate 1.15.0): gpu_ids, use_cpu, mpirun_config,
main_process_port, the truthiness of debug / tpu_use_cluster, top-level flags the launcher never copies
(rdzv_backend, same_network, ...), and values put in the child environment as they are (dynamo_mode,
main_process_ip). Split from accelerate_processes and
accelerate_core so that a config without these keys does not compile them (start time without bytecode,
benchmarks/bench_validator.py --start-only); every rule here reports nothing unless the config has one of the
NEEDS keys.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import LAUNCH, ULAUNCH, eff, fmt, report_unknown
from .accelerate_processes import _gpu_launcher

# each rule reads one of these keys (dynamo_mode also as dynamo_config.mode); a config without any of them
# skips the module
NEEDS = ("gpu_ids", "use_cpu", "mpirun_config", "main_process_port", "debug", "tpu_use_cluster", "rdzv_backend",
         "same_network", "enable_cpu_affinity", "downcast_bf16", "tpu_use_sudo", "dynamo", "main_process_ip")


def _port_checked(e, d):
    """prepare_multi_gpu_env / prepare_deepspeed_cmd_env probe the port on one machine or on rank 0."""
    mr = d.get("machine_rank", 0)
    return not e.multi_machine() or (int(mr) if isinstance(mr, (bool, int)) else S.as_int(mr)) == 0


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
