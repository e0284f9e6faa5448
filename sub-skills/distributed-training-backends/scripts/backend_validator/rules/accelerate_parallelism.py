"""Accelerate ``parallelism_config`` rules (ND parallelism: dp_replicate x dp_shard x tp x cp x sp).

The torchrun and DeepSpeed launchers export the block as ``PARALLELISM_CONFIG_*``;
``ParallelismConfig()`` reads it back and ``Accelerator`` validates it against the
world size and the FSDP plugin (accelerate 1.15.0). The cp/sp backend, CP communication and SP
attention rules are in accelerate_parallelism_cp_sp.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import eff, fmt, report_unknown

# Imported only for a document that mentions a parallelism_config block
# (rules/__init__.py): every rule here reports nothing on any other document.
NEEDS = ("parallelism",)

PC = "accelerate/parallelism_config.py::ParallelismConfig.__post_init__"
VAL = "accelerate/parallelism_config.py::ParallelismConfig._validate_accelerator"


def _pc(ctx):
    e = eff(ctx)
    return e if e.uses_parallelism() else None


def _size(e, s):
    """The size as ParallelismConfig reads it back (int(env)), or None if that fails. cp/sp sizes are
    also compared with 1 by the launcher, so they must be real integers."""
    v = e.get(f"parallelism_config_{s}_size", 1)
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if s in ("cp", "sp"):
        return None
    return S.as_int(v)


def _sizes(e):
    """Parsed sizes, or None when any is unreadable (reported by acc-parallelism-size-invalid)."""
    out = {}
    for s in S.PARALLELISM_SIZES:
        v = _size(e, s)
        if v is None:
            return None
        out[s] = v
    return out


@rule(id="acc-parallelism-unknown-key", severity="warning", family="accelerate",
      summary="unknown key in parallelism_config (keys need the parallelism_config_ prefix)",
      source="accelerate/utils/launch.py::prepare_extend_env_parallelism_config")
def pc_unknown(ctx):
    """Only the eleven ``parallelism_config_*`` names are exported; an unprefixed ``dp_shard_size``
    is silently ignored and every size stays 1.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      dp_shard_size: 4
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 4
    ```
    """
    b = ctx.doc.data.get("parallelism_config")
    if isinstance(b, dict):
        report_unknown(ctx, "parallelism_config", [k for k in b if k not in S.PARALLELISM_KEYS], S.PARALLELISM_KEYS,
                       "ignored by accelerate launch", strip=("parallelism_config_",))
    return ()


@rule(id="acc-parallelism-ignored", severity="warning", family="accelerate",
      summary="parallelism_config with a launcher that does not export it (NO, MULTI_CPU, XLA)",
      source="accelerate/utils/launch.py::prepare_simple_launcher_cmd_env")
def pc_ignored(ctx):
    """Only the torchrun (MULTI_*, FSDP, MEGATRON_LM) and DeepSpeed launchers export the block.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    parallelism_config:
      parallelism_config_tp_size: 2
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    ```
    """
    e = eff(ctx)
    b = ctx.doc.data.get("parallelism_config")
    if isinstance(b, dict) and b and not e.sagemaker and e.launcher in ("simple", "tpu"):
        ctx.report(("parallelism_config",), f"parallelism_config is not exported with distributed_type {fmt(e.dt)}",
                   "use distributed_type FSDP (fsdp_version 2), MULTI_GPU or DEEPSPEED, or remove the block")
    return ()


@rule(id="acc-parallelism-size-invalid", severity="error", family="accelerate",
      summary="a parallelism size is not an integer >= 1", source=PC)
def size_invalid(ctx):
    """Sizes are read back with ``int()`` and must be at least 1.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 0
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 4
    ```
    """
    e = _pc(ctx)
    if not e:
        return ()
    for s in S.PARALLELISM_SIZES:
        k = f"parallelism_config_{s}_size"
        if not e.has(k):
            continue
        v = e.get(k)
        n = _size(e, s)
        if n is None:
            ctx.report(e.path(k), f"{k} is {fmt(v)}, not an integer; the launcher/ParallelismConfig fails on it",
                       "write a plain integer >= 1")
        elif n < 1:
            ctx.report(e.path(k), f"{k} is {v}; ParallelismConfig requires at least 1", "use 1 to disable")
    return ()


@rule(id="acc-parallelism-tp-cp-with-pure-dp", severity="error", family="accelerate",
      summary="tp/cp > 1 combined with pure data parallel replication (dp_replicate > 1, dp_shard 1)", source=PC)
def tp_cp_pure_dp(ctx):
    """TP/CP compose with FSDP (dp_shard > 1) or HSDP, not with pure replication.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_replicate_size: 2
      parallelism_config_tp_size: 2
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 2
      parallelism_config_tp_size: 2
    ```
    """
    e = _pc(ctx)
    sz = _sizes(e) if e else None
    if sz and (sz["tp"] > 1 or sz["cp"] > 1) and sz["dp_replicate"] > 1 and sz["dp_shard"] == 1:
        ctx.report(e.path("parallelism_config_dp_replicate_size"), "tp/cp > 1 with dp_replicate > 1 and "
                   "dp_shard 1: ParallelismConfig refuses pure replication with TP/CP",
                   "use parallelism_config_dp_shard_size > 1 (FSDP/HSDP) instead of pure replication")
    return ()


def _world(e):
    n = e.world_size()
    nm = e.num_machines if isinstance(e.num_machines, int) and not isinstance(e.num_machines, bool) else 1
    if n is None or nm < 1:
        return None
    return (n // nm) * nm  # what torchrun's nproc_per_node x nnodes gives


@rule(id="acc-parallelism-size-mismatch", severity="error", family="accelerate",
      summary="product of parallelism sizes differs from the world size (num_processes)", source=VAL)
def size_mismatch(ctx):
    """``Accelerator`` checks dp_replicate x dp_shard x tp x cp x sp == number of processes
    (skipped for DeepSpeed sequence parallelism).

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 2
      parallelism_config_tp_size: 2
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 4
      parallelism_config_tp_size: 2
    ```
    """
    e = _pc(ctx)
    sz = _sizes(e) if e else None
    w = _world(e) if e else None
    if not sz or w is None or min(sz.values()) < 1:
        return ()
    total = 1
    for v in sz.values():
        total *= v
    if sz["sp"] > 1 and str(e.get("parallelism_config_sp_backend", "deepspeed")) == "deepspeed":
        return ()
    multi = w > 1 and (e.is_multi or e.is_fsdp or e.launcher == "deepspeed")
    if total == 1:
        return ()  # accelerate fills dp_replicate with the world size
    if total != w and (multi or total > 1):
        ctx.report(("parallelism_config",), f"parallelism sizes multiply to {total} but the run has {w} processes; "
                   "Accelerator refuses it", f"make dp_replicate x dp_shard x tp x cp x sp = {w}")
    return ()


def _validation(e):
    """(sizes, world, total, sp_deepspeed) when Accelerator's validation applies, else None."""
    sz = _sizes(e) if e else None
    w = _world(e) if e else None
    if not sz or min(sz.values()) < 1:
        return None
    total = 1
    for v in sz.values():
        total *= v
    if w is None and isinstance(e.num_processes, str) and e.launcher in ("torchrun", "deepspeed") \
            and S.as_int(e.num_processes) is None:
        w = total  # auto / gpu / cpu: torchrun counts the machine's devices; only the other checks are the file's
    if w is None:
        return None
    if total <= 1:
        return None  # accelerate returns early or fills dp_replicate with the world size
    sp_ds = sz["sp"] > 1 and str(e.get("parallelism_config_sp_backend", "deepspeed")) == "deepspeed"
    if total != w and not sp_ds:
        return None  # reported by acc-parallelism-size-mismatch
    return sz, w, total, sp_ds


@rule(id="acc-parallelism-fsdp2-nothing-to-shard", severity="error", family="accelerate",
      summary="FSDP2 with parallelism sizes > 1 but dp_shard and cp both 1", source=VAL)
def fsdp2_nothing(ctx):
    """FSDP shards across the joint dp_shard x cp mesh dimension; when the sizes use every
    process for tp (or replication) and leave dp_shard and cp at 1, Accelerator refuses it.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_tp_size: 2
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 2
      parallelism_config_tp_size: 2
    ```
    """
    e = _pc(ctx)
    v = _validation(e) if e else None
    if v and e.is_fsdp and e.fsdp_version == 2:
        sz = v[0]
        if sz["dp_shard"] == 1 and sz["cp"] == 1:
            ctx.report(("parallelism_config",), "FSDP2 with parallelism_config_dp_shard_size and _cp_size both 1: "
                       "there is no mesh dimension to shard across and Accelerator refuses it",
                       "give dp_shard (or cp) a size > 1, or launch without FSDP")
    return ()


@rule(id="acc-parallelism-unsupported-distributed-type", severity="error", family="accelerate",
      summary="parallelism sizes > 1 with FSDP1 or MEGATRON_LM (needs FSDP2, MULTI_* or DEEPSPEED)", source=VAL)
def unsupported_dt(ctx):
    """``ParallelismConfig`` sizes > 1 work with FSDP version 2, the MULTI_* types and DeepSpeed only.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 1
    parallelism_config:
      parallelism_config_dp_shard_size: 4
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 4
    ```
    """
    e = _pc(ctx)
    v = _validation(e) if e else None
    if v and ((e.is_fsdp and e.fsdp_version == 1) or e.is_megatron):
        ctx.report(("parallelism_config",), f"parallelism_config sizes > 1 with distributed_type {e.dt}"
                   f"{' (FSDP1)' if e.is_fsdp else ''}: Accelerator accepts them only with FSDP2, MULTI_* or "
                   "DEEPSPEED", "set fsdp_config.fsdp_version: 2")
    return ()


@rule(id="acc-parallelism-cp-needs-fsdp2", severity="error", family="accelerate",
      summary="context parallelism (cp > 1) without FSDP2", source="accelerate/state.py::AcceleratorState.__init__")
def cp_needs_fsdp2(ctx):
    """Context parallelism shards the model with FSDP2: a MULTI_* run without an FSDP plugin, or
    FSDP1, is refused (unless ACCELERATE_ALLOW_CP_STANDALONE=true is set in the environment).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    parallelism_config:
      parallelism_config_cp_size: 2
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 2
      parallelism_config_cp_size: 2
    ```
    """
    e = _pc(ctx)
    sz = _sizes(e) if e else None
    if sz and sz["cp"] > 1 and min(sz.values()) >= 1 and e.is_multi:
        ctx.report(e.path("parallelism_config_cp_size"), f"parallelism_config_cp_size > 1 with distributed_type "
                   f"{e.dt}: context parallelism needs the FSDP2 plugin", "use distributed_type: FSDP with "
                   "fsdp_version: 2")
    return ()
