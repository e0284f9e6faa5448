"""FSDP plugin rules for options most configs leave out (accelerate 1.15.0): the FSDP1 sharding strategy and
prefetch, the size-based wrap threshold, activation-checkpointing offload, and the FSDP1-only keys FSDP2 ignores.
Split from accelerate_fsdp so that a config without these keys does not compile them (start time without
bytecode, benchmarks/bench_validator.py --start-only); every rule here reports nothing unless the config has one
of the NEEDS keys.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import fmt
from .accelerate_fsdp import PLUGIN, _fsdp, _version

# each rule reports on one of these keys (fsdp_ prefix optional in fsdp_config); a config without them skips the
# module (acc-fsdp2-key-ignored passes over fsdp_sync_module_states, so that key is not listed)
NEEDS = ("sharding_strategy", "backward_prefetch", "forward_prefetch", "use_orig_params", "min_num_params",
         "activation_checkpointing_offload")


@rule(id="acc-fsdp-sharding-strategy-invalid", severity="error", family="accelerate",
      summary="FSDP1 sharding strategy is not a ShardingStrategy name or 1-5", source=PLUGIN)
def sharding_strategy(ctx):
    """FSDP1 maps ``fsdp_sharding_strategy`` (launch default FULL_SHARD) through
    ``ShardingStrategy``; unknown names raise ``KeyError``.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_sharding_strategy: FULL_SHARDED
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_sharding_strategy: FULL_SHARD
    ```
    """
    e = _fsdp(ctx)
    if not e or _version(e) != 1 or not e.has("fsdp_sharding_strategy"):
        return ()
    v = e.get("fsdp_sharding_strategy")
    s = str(v).upper()
    ok = s in S.FSDP_SHARDING_STRATEGY or (s.isdigit() and 1 <= int(s) <= 5)
    if not ok:
        from ..core import did_you_mean
        m = did_you_mean(s, S.FSDP_SHARDING_STRATEGY)
        ctx.report(e.path("fsdp_sharding_strategy"), f"fsdp_sharding_strategy {fmt(v)} is not a "
                   "ShardingStrategy; the FSDP plugin fails", f"did you mean '{m}'?" if m else
                   f"use one of: {', '.join(S.FSDP_SHARDING_STRATEGY)}")
    return ()


@rule(id="acc-fsdp-backward-prefetch-invalid", severity="error", family="accelerate",
      summary="fsdp_backward_prefetch is not BACKWARD_PRE / BACKWARD_POST / NO_PREFETCH", source=PLUGIN)
def backward_prefetch(ctx):
    """The name is mapped through ``BackwardPrefetch`` before the FSDP version is looked at, so
    an unknown name fails under FSDP1 and FSDP2 alike.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_backward_prefetch: PRE
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_backward_prefetch: BACKWARD_PRE
    ```
    """
    e = _fsdp(ctx)
    if not e or not e.has("fsdp_backward_prefetch") or e.get("fsdp_backward_prefetch") is None:
        return ()
    v = e.get("fsdp_backward_prefetch")
    s = str(v).upper()
    if not (s in S.FSDP_BACKWARD_PREFETCH or (s.isdigit() and 1 <= int(s) <= 2)):
        ctx.report(e.path("fsdp_backward_prefetch"), f"fsdp_backward_prefetch {fmt(v)} is not a BackwardPrefetch "
                   "name; the FSDP plugin fails", f"use one of: {', '.join(S.FSDP_BACKWARD_PREFETCH)}")
    return ()


@rule(id="acc-fsdp-min-num-params-invalid", severity="error", family="accelerate",
      summary="SIZE_BASED_WRAP with an fsdp_min_num_params int() cannot read (1e8, 1.0e+8)", source=PLUGIN)
def min_num_params(ctx):
    """With SIZE_BASED_WRAP the plugin does ``int(FSDP_MIN_NUM_PARAMS)``; YAML's ``1e8`` is a string
    and a float prints as ``100000000.0`` - both fail.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: SIZE_BASED_WRAP
      fsdp_min_num_params: 1e8
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: SIZE_BASED_WRAP
      fsdp_min_num_params: 100000000
    ```
    """
    e = _fsdp(ctx)
    if e and str(e.get("fsdp_auto_wrap_policy")).upper() == "SIZE_BASED_WRAP" and e.has("fsdp_min_num_params"):
        v = e.get("fsdp_min_num_params")
        if S.as_int(v) is None:
            ctx.report(e.path("fsdp_min_num_params"), f"fsdp_min_num_params {fmt(v)} cannot be read with int(); "
                       "the FSDP plugin fails", "write the integer in full, e.g. 100000000")
    return ()


@rule(id="acc-fsdp-ac-offload-requires-ac", severity="error", family="accelerate",
      summary="fsdp_activation_checkpointing_offload without fsdp_activation_checkpointing", source=PLUGIN)
def ac_offload_needs_ac(ctx):
    """Offloading activation checkpoints needs activation checkpointing on.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_activation_checkpointing_offload: true
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_activation_checkpointing: true
      fsdp_activation_checkpointing_offload: true
    ```
    """
    e = _fsdp(ctx)
    if e and e.fsdp_version is not None and S.truth(e.fsdp_get("fsdp_activation_checkpointing_offload")) is True \
            and S.truth(e.fsdp_get("fsdp_activation_checkpointing")) is False:
        ctx.report(e.path("fsdp_activation_checkpointing_offload"), "fsdp_activation_checkpointing_offload needs "
                   "fsdp_activation_checkpointing: true; the FSDP plugin refuses it",
                   "set fsdp_activation_checkpointing: true")
    return ()


@rule(id="acc-fsdp-ac-offload-requires-fsdp2", severity="error", family="accelerate",
      summary="fsdp_activation_checkpointing_offload with FSDP1", source=PLUGIN)
def ac_offload_needs_v2(ctx):
    """Activation-checkpoint offloading exists for FSDP2 only.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 1
      fsdp_activation_checkpointing: true
      fsdp_activation_checkpointing_offload: true
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_activation_checkpointing: true
      fsdp_activation_checkpointing_offload: true
    ```
    """
    e = _fsdp(ctx)
    if e and e.fsdp_version is not None and e.fsdp_version != 2 \
            and S.truth(e.fsdp_get("fsdp_activation_checkpointing_offload")) is True \
            and S.truth(e.fsdp_get("fsdp_activation_checkpointing")) is True:
        ctx.report(e.path("fsdp_activation_checkpointing_offload"), "fsdp_activation_checkpointing_offload "
                   "requires fsdp_version 2; the FSDP plugin refuses it", "set fsdp_version: 2, or drop the offload")
    return ()


@rule(id="acc-fsdp2-key-ignored", severity="warning", family="accelerate",
      summary="FSDP2 ignores fsdp_sharding_strategy / _forward_prefetch / _use_orig_params / "
              "_sync_module_states / _backward_prefetch", source=PLUGIN)
def fsdp2_ignored(ctx):
    """Under ``fsdp_version: 2`` these FSDP1 settings are never read (backward prefetch is reset
    with a warning); sharding is controlled by ``fsdp_reshard_after_forward`` only.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_sharding_strategy: SHARD_GRAD_OP
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: false
    ```
    """
    e = _fsdp(ctx)
    if not e or _version(e) != 2:
        return ()
    for k in S.FSDP2_IGNORED:
        if not e.has(k):
            continue
        v = e.get(k)
        if k == "fsdp_sync_module_states":
            continue  # still checked by the launcher (acc-fsdp-ram-efficient-needs-sync); no effect otherwise
        if k == "fsdp_backward_prefetch" and (v is None or str(v).upper() == "NO_PREFETCH"):
            continue
        if k == "fsdp_use_orig_params" and S.truth(v) is True:
            continue  # FSDP2 always uses the original parameters
        if k == "fsdp_forward_prefetch" and S.truth(v) is False:
            continue
        if k == "fsdp_sharding_strategy":
            hint = "use fsdp_reshard_after_forward: true (FULL_SHARD) or false (SHARD_GRAD_OP)"
        else:
            hint = "remove it (FSDP1 only)"
        ctx.report(e.path(k), f"{k} {fmt(v)} has no effect with fsdp_version 2", hint)
    return ()
