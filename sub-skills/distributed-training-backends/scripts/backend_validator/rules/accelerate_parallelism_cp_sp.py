"""ParallelismConfig rules for the context- and sequence-parallel options most configs leave out (accelerate
1.15.0): the cp/sp backends, cp and sp together, the CP communication strategy and the SP attention kernel.
Split from accelerate_parallelism so that a config without these keys does not compile them (start time without
bytecode, benchmarks/bench_validator.py --start-only); every rule here reports nothing unless the config has one
of the NEEDS keys.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import fmt
from .accelerate_parallelism import PC, _pc, _sizes

# each rule reads one of these keys; a config without any of them skips the module
NEEDS = ("cp_backend", "sp_backend", "sp_size", "cp_comm_strategy", "sp_attn_implementation")


@rule(id="acc-parallelism-backend-invalid", severity="error", family="accelerate",
      summary="parallelism_config_cp_backend is not torch, or parallelism_config_sp_backend is not deepspeed",
      source=PC)
def backend_invalid(ctx):
    """The only context-parallel backend is ``torch`` and the only sequence-parallel backend is
    ``deepspeed``; the file bypasses the command-line choices.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 2
      parallelism_config_cp_size: 2
      parallelism_config_cp_backend: ring
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
      parallelism_config_cp_backend: torch
    ```
    """
    e = _pc(ctx)
    if not e:
        return ()
    for k, ok in (("parallelism_config_cp_backend", "torch"), ("parallelism_config_sp_backend", "deepspeed")):
        if e.has(k) and str(e.get(k)) != ok:
            ctx.report(e.path(k), f"{k} {fmt(e.get(k))} is not supported; ParallelismConfig accepts only '{ok}'",
                       f"use {ok} or remove the key")
    return ()


@rule(id="acc-parallelism-cp-sp-exclusive", severity="error", family="accelerate",
      summary="context parallelism and sequence parallelism both > 1", source=PC)
def cp_sp(ctx):
    """CP and SP are mutually exclusive.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 4
    deepspeed_config:
      zero_stage: 3
    parallelism_config:
      parallelism_config_cp_size: 2
      parallelism_config_sp_size: 2
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 4
    deepspeed_config:
      zero_stage: 3
    parallelism_config:
      parallelism_config_sp_size: 2
    ```
    """
    e = _pc(ctx)
    sz = _sizes(e) if e else None
    if sz and sz["cp"] > 1 and sz["sp"] > 1:
        ctx.report(e.path("parallelism_config_sp_size"), "parallelism_config_cp_size and _sp_size are both > 1; "
                   "ParallelismConfig refuses it (CP and SP are mutually exclusive)", "keep one of them at 1")
    return ()


@rule(id="acc-parallelism-cp-comm-strategy-invalid", severity="error", family="accelerate",
      summary="parallelism_config_cp_comm_strategy is not allgather or alltoall",
      source="accelerate/utils/dataclasses.py::TorchContextParallelConfig.__post_init__")
def cp_comm(ctx):
    """Read when cp > 1; only ``allgather`` and ``alltoall`` exist.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 4
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_shard_size: 2
      parallelism_config_cp_size: 2
      parallelism_config_cp_comm_strategy: ring
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
      parallelism_config_cp_comm_strategy: alltoall
    ```
    """
    e = _pc(ctx)
    sz = _sizes(e) if e else None
    k = "parallelism_config_cp_comm_strategy"
    if sz and sz["cp"] > 1 and e.has(k) and str(e.get(k)) not in ("allgather", "alltoall"):
        ctx.report(e.path(k), f"{k} {fmt(e.get(k))} is not allgather or alltoall", "use allgather or alltoall")
    return ()


@rule(id="acc-parallelism-sp-attn-invalid", severity="error", family="accelerate",
      summary="parallelism_config_sp_attn_implementation is eager/flex_attention or not a known kernel",
      source="accelerate/utils/dataclasses.py::DeepSpeedSequenceParallelConfig.__post_init__")
def sp_attn(ctx):
    """With sp > 1 the attention implementation must be sdpa, flash_attention_2/3 or a hub
    flash-attn kernel (``org/...flash-attn...``).

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
    parallelism_config:
      parallelism_config_sp_size: 2
      parallelism_config_sp_attn_implementation: eager
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
    parallelism_config:
      parallelism_config_sp_size: 2
      parallelism_config_sp_attn_implementation: sdpa
    ```
    """
    e = _pc(ctx)
    sz = _sizes(e) if e else None
    k = "parallelism_config_sp_attn_implementation"
    if not sz or sz["sp"] <= 1 or not e.has(k):
        return ()
    v = str(e.get(k))
    if v in S.SP_ATTN_BUILTIN:
        return ()
    if v in ("eager", "flex_attention") or "/" not in v or "flash-attn" not in v:
        ctx.report(e.path(k), f"{k} {fmt(e.get(k))} is not supported with sequence parallelism",
                   f"use one of {', '.join(S.SP_ATTN_BUILTIN)} or a hub kernel like kernels-community/flash-attn2")
    return ()
