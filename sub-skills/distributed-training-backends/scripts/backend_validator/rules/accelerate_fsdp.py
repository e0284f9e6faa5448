"""Accelerate ``fsdp_config`` rules (distributed_type FSDP, torchrun launcher, accelerate 1.15.0).

The launcher exports every FSDP setting as an environment string (argparse
defaults when the file omits a key) and ``FullyShardedDataParallelPlugin()``
parses them back in the training process; these rules replay that round trip.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import eff, fmt, report_unknown

# Imported only for a document that mentions FSDP: distributed_type FSDP or an fsdp_config block
# (rules/__init__.py): every rule here reports nothing on any other document.
NEEDS = ("fsdp",)

PLUGIN = "accelerate/utils/dataclasses.py::FullyShardedDataParallelPlugin.__post_init__"


def _fsdp(ctx):
    e = eff(ctx)
    return e if (e.is_fsdp and not e.sagemaker) else None


def _version(e):
    """1, 2, or None when invalid (reported by acc-fsdp-version-invalid)."""
    v = e.fsdp_version
    return v if v in (1, 2) else None


@rule(id="acc-fsdp-unknown-key", severity="warning", family="accelerate",
      summary="unknown key in fsdp_config (silently ignored)", source="accelerate/commands/launch.py::_validate_launch_command")
def fsdp_unknown(ctx):
    """``fsdp_config`` keys are copied with an ``fsdp_`` prefix; names the launcher does not know
    are never exported, whatever distributed_type is.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_backward_prefetch_policy: BACKWARD_PRE
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_backward_prefetch: BACKWARD_PRE
    ```
    """
    b = ctx.doc.data.get("fsdp_config")
    if isinstance(b, dict):
        bad = [k for k in b if S.prefixed("fsdp_config", k) not in S.FSDP_KEYS]
        report_unknown(ctx, "fsdp_config", bad, S.FSDP_KEYS, "ignored by accelerate launch", strip=("fsdp_",))
    return ()


@rule(id="acc-fsdp-version-invalid", severity="error", family="accelerate",
      summary="fsdp_version is not 1 or 2", source=PLUGIN)
def fsdp_version(ctx):
    """The plugin does ``int(FSDP_VERSION)`` and only knows versions 1 and 2; any other number
    falls through to a ``KeyError``, a non-integer to a ``ValueError``.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 3
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    ```
    """
    e = _fsdp(ctx)
    if e and e.has("fsdp_version") and _version(e) is None:
        if e.fsdp_version is not None:
            # another integer: the plugin falls into the FSDP1 branch for reshard_after_forward, which
            # only survives when that value (launch default 'true') is a sharding-strategy name or digit
            r = str(e.fsdp_get("fsdp_reshard_after_forward")).upper()
            if r in S.FSDP_SHARDING_STRATEGY or (r.isdigit() and 1 <= int(r) <= 5):
                return ()
        ctx.report(e.path("fsdp_version"), f"fsdp_version {fmt(e.fsdp_version_raw)} is not 1 or 2; the FSDP "
                   "plugin fails in the training process", "use fsdp_version: 2 (or 1)")
    return ()


@rule(id="acc-fsdp-reshard-after-forward-invalid", severity="error", family="accelerate",
      summary="FSDP2 fsdp_reshard_after_forward is not true/false (e.g. a sharding strategy name)",
      source=PLUGIN)
def reshard_after_forward(ctx):
    """FSDP2 parses ``fsdp_reshard_after_forward`` with ``str_to_bool``; an FSDP1 strategy name
    left there (FULL_SHARD) is refused.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: FULL_SHARD
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: true
    ```
    """
    e = _fsdp(ctx)
    if e and _version(e) == 2 and e.has("fsdp_reshard_after_forward"):
        v = e.get("fsdp_reshard_after_forward")
        if not S.is_truth_word(v):
            hint = "use true or false"
            if str(v).upper() in S.FSDP_SHARDING_STRATEGY:
                hint = ("FSDP2 takes a boolean: FULL_SHARD/HYBRID_SHARD -> true, SHARD_GRAD_OP/NO_SHARD -> false "
                        "(accelerate to-fsdp2 converts)")
            ctx.report(e.path("fsdp_reshard_after_forward"), f"fsdp_reshard_after_forward {fmt(v)} is not a "
                       "boolean; the FSDP2 plugin refuses it", hint)
    return ()


@rule(id="acc-fsdp-bool-value", severity="error", family="accelerate",
      summary="an FSDP boolean (offload_params, activation_checkpointing, ...) is not a truth word",
      source=PLUGIN)
def fsdp_bool(ctx):
    """The launcher exports ``str(value).lower()`` and the plugin parses it with ``str_to_bool``
    (accepted: true/false, yes/no, on/off, y/n, t/f, 1/0).

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_offload_params: enabled
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_offload_params: true
    ```
    """
    e = _fsdp(ctx)
    if not e or e.fsdp_version is None:
        return ()
    # the FSDP1-only flags are read only for version 1; every other version reads the FSDP2 set
    for k in (S.FSDP_BOOL_KEYS_V1 if e.fsdp_version == 1 else S.FSDP_BOOL_KEYS_V2):
        if e.has(k) and not S.is_truth_word(e.get(k)):
            ctx.report(e.path(k), f"{k} is {fmt(e.get(k))}; the FSDP plugin parses it with str_to_bool and fails",
                       "use true or false")
    return ()


@rule(id="acc-fsdp-state-dict-type-invalid", severity="error", family="accelerate",
      summary="fsdp_state_dict_type is not FULL_ / LOCAL_ / SHARDED_STATE_DICT",
      source="accelerate/utils/dataclasses.py::FullyShardedDataParallelPlugin.set_state_dict_type")
def state_dict_type(ctx):
    """Mapped through ``StateDictType[...]``; unknown names raise ``KeyError``.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_state_dict_type: FULL
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_state_dict_type: FULL_STATE_DICT
    ```
    """
    e = _fsdp(ctx)
    if not e or not e.has("fsdp_state_dict_type") or e.get("fsdp_state_dict_type") is None:
        return ()
    v = e.get("fsdp_state_dict_type")
    s = str(v)
    if not (s.upper() in S.FSDP_STATE_DICT_TYPE or (s.isdigit() and 1 <= int(s) <= 3)):
        ctx.report(e.path("fsdp_state_dict_type"), f"fsdp_state_dict_type {fmt(v)} is not a StateDictType; the "
                   "FSDP plugin fails", f"use one of: {', '.join(S.FSDP_STATE_DICT_TYPE)}")
    return ()


@rule(id="acc-fsdp2-local-state-dict", severity="error", family="accelerate",
      summary="FSDP2 with fsdp_state_dict_type LOCAL_STATE_DICT",
      source="accelerate/utils/dataclasses.py::FullyShardedDataParallelPlugin.set_state_dict_type")
def fsdp2_local(ctx):
    """FSDP2 supports only SHARDED_STATE_DICT and FULL_STATE_DICT.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_state_dict_type: LOCAL_STATE_DICT
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_state_dict_type: SHARDED_STATE_DICT
    ```
    """
    e = _fsdp(ctx)
    if e and _version(e) == 2 and e.has("fsdp_state_dict_type"):
        s = str(e.get("fsdp_state_dict_type")).upper()
        if s in ("LOCAL_STATE_DICT", "2"):
            ctx.report(e.path("fsdp_state_dict_type"), "FSDP2 does not support LOCAL_STATE_DICT; the plugin "
                       "refuses it", "use SHARDED_STATE_DICT or FULL_STATE_DICT")
    return ()


@rule(id="acc-fsdp-auto-wrap-policy-invalid", severity="error", family="accelerate",
      summary="fsdp_auto_wrap_policy is not TRANSFORMER_BASED_WRAP / SIZE_BASED_WRAP / NO_WRAP", source=PLUGIN)
def auto_wrap(ctx):
    """Checked case-insensitively against the three policy names.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_WRAP
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
    ```
    """
    e = _fsdp(ctx)
    if not e or not e.has("fsdp_auto_wrap_policy") or e.get("fsdp_auto_wrap_policy") is None:
        return ()
    v = e.get("fsdp_auto_wrap_policy")
    if str(v).upper() not in S.FSDP_AUTO_WRAP_POLICY:
        from ..core import did_you_mean
        m = did_you_mean(str(v).upper(), S.FSDP_AUTO_WRAP_POLICY)
        ctx.report(e.path("fsdp_auto_wrap_policy"), f"fsdp_auto_wrap_policy {fmt(v)} is not a wrap policy; the "
                   "FSDP plugin refuses it", f"did you mean '{m}'?" if m else
                   f"use one of: {', '.join(S.FSDP_AUTO_WRAP_POLICY)}")
    return ()


@rule(id="acc-fsdp-transformer-cls-unset", severity="info", family="accelerate",
      summary="TRANSFORMER_BASED_WRAP without fsdp_transformer_layer_cls_to_wrap (uses the model's "
              "_no_split_modules)", source="accelerate/utils/dataclasses.py::FullyShardedDataParallelPlugin.set_auto_wrap_policy")
def transformer_cls(ctx):
    """Without layer class names the plugin falls back to the model's ``_no_split_modules``; for a
    model that does not define it nothing below the root is wrapped (no error, FSDP1 and FSDP2): the
    whole model is one FSDP unit.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
    ```
    """
    e = _fsdp(ctx)
    if e and str(e.get("fsdp_auto_wrap_policy")).upper() == "TRANSFORMER_BASED_WRAP" \
            and e.get("fsdp_transformer_layer_cls_to_wrap") in (None, ""):
        ctx.report(e.path("fsdp_auto_wrap_policy"), "TRANSFORMER_BASED_WRAP without "
                   "fsdp_transformer_layer_cls_to_wrap: the wrap classes come from model._no_split_modules",
                   "name the decoder layer class, e.g. fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer")
    return ()


@rule(id="acc-fsdp-ram-efficient-needs-sync", severity="error", family="accelerate",
      summary="fsdp_cpu_ram_efficient_loading (default true) with fsdp_sync_module_states: false",
      source="accelerate/utils/launch.py::prepare_multi_gpu_env")
def ram_efficient_sync(ctx):
    """The launcher itself refuses CPU-RAM-efficient loading (on by default) together with a
    falsy ``fsdp_sync_module_states`` - under FSDP1 and FSDP2.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_sync_module_states: false
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_cpu_ram_efficient_loading: false
      fsdp_sync_module_states: false
    ```
    """
    e = _fsdp(ctx)
    if not e:
        return ()
    ram = e.fsdp_get("fsdp_cpu_ram_efficient_loading")
    sync = e.fsdp_get("fsdp_sync_module_states")
    if bool(ram) and not bool(sync):  # Python truthiness, as the launcher tests it
        ctx.report(e.path("fsdp_sync_module_states") or ("fsdp_config",),
                   "fsdp_sync_module_states is false while fsdp_cpu_ram_efficient_loading is on (launch default "
                   "true): accelerate launch refuses this", "set fsdp_sync_module_states: true, or "
                   "fsdp_cpu_ram_efficient_loading: false")
    return ()


@rule(id="acc-fsdp1-reshard-after-forward-ignored", severity="warning", family="accelerate",
      summary="FSDP1: fsdp_reshard_after_forward is ignored; the sharding strategy (default FULL_SHARD) wins",
      source=PLUGIN)
def fsdp1_reshard_ignored(ctx):
    """The launcher always exports ``FSDP_SHARDING_STRATEGY`` (default FULL_SHARD) and FSDP1 reads
    only that, so a strategy written into ``fsdp_reshard_after_forward`` is lost.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 1
      fsdp_reshard_after_forward: SHARD_GRAD_OP
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 1
      fsdp_sharding_strategy: SHARD_GRAD_OP
    ```
    """
    e = _fsdp(ctx)
    if not e or _version(e) != 1 or not e.has("fsdp_reshard_after_forward"):
        return ()
    v = e.get("fsdp_reshard_after_forward")
    strategy = str(e.fsdp_get("fsdp_sharding_strategy")).upper()
    s = str(v).upper()
    intended = s if s in S.FSDP_SHARDING_STRATEGY else (
        "FULL_SHARD" if S.truth(v) is True else "SHARD_GRAD_OP" if S.truth(v) is False else None)
    if intended is not None and intended != strategy:
        ctx.report(e.path("fsdp_reshard_after_forward"), f"FSDP1 ignores fsdp_reshard_after_forward {fmt(v)}; "
                   f"the sharding strategy used is {strategy}", f"set fsdp_sharding_strategy: {intended} "
                   "(or move to fsdp_version: 2 with a boolean fsdp_reshard_after_forward)")
    return ()


@rule(id="acc-fsdp-cls-to-wrap-list", severity="warning", family="accelerate",
      summary="fsdp_transformer_layer_cls_to_wrap given as a YAML list (exported as its Python repr)",
      source="accelerate/utils/launch.py::prepare_multi_gpu_env")
def cls_to_wrap_list(ctx):
    """The launcher exports ``str(value)`` and the plugin splits it on commas, so a YAML list
    arrives as the class name ``['LlamaDecoderLayer']`` and is never found in the model.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_transformer_layer_cls_to_wrap: [LlamaDecoderLayer]
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
    ```
    """
    e = _fsdp(ctx)
    if e and isinstance(e.get("fsdp_transformer_layer_cls_to_wrap"), (list, tuple, dict)):
        v = e.get("fsdp_transformer_layer_cls_to_wrap")
        names = ",".join(map(str, v)) if not isinstance(v, dict) else ",".join(map(str, v))
        ctx.report(e.path("fsdp_transformer_layer_cls_to_wrap"), "fsdp_transformer_layer_cls_to_wrap is a YAML "
                   f"list; the plugin receives the text {fmt(str(v))} as class names",
                   f"write a comma-separated string: {names}")
    return ()



@rule(id="acc-fsdp-cls-to-wrap-spaces", severity="warning", family="accelerate",
      summary="fsdp_transformer_layer_cls_to_wrap with spaces around the commas (kept in the class names)",
      source="accelerate/utils/dataclasses.py::FullyShardedDataParallelPlugin.__post_init__")
def cls_to_wrap_spaces(ctx):
    """The plugin splits the exported text on ``,`` without stripping, so ``A, B`` wraps ``A`` and
    `` B``; no module is named `` B`` and ``prepare()`` stops with "Could not find the transformer
    layer class" (``utils/fsdp_utils.py::fsdp2_prepare_auto_wrap_policy``, the FSDP1 policy alike).

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer, LlamaMLP
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer,LlamaMLP
    ```
    """
    e = _fsdp(ctx)
    v = e.get("fsdp_transformer_layer_cls_to_wrap") if e else None
    pol = e.fsdp_get("fsdp_auto_wrap_policy") if e else None
    if not (isinstance(pol, str) and pol.upper() == "TRANSFORMER_BASED_WRAP"):
        return ()  # the class names are read only by the transformer-based policy
    if isinstance(v, str) and any(p != p.strip() for p in v.split(",")):
        fixed = ",".join(p.strip() for p in v.split(",") if p.strip())
        ctx.report(e.path("fsdp_transformer_layer_cls_to_wrap"), f"fsdp_transformer_layer_cls_to_wrap {fmt(v)} "
                   "has spaces around a class name; the plugin keeps them and will not find "
                   f"{fmt([p for p in v.split(',') if p != p.strip()][0])} in the model",
                   f"write it without spaces: {fixed}")
    return ()


@rule(id="acc-fsdp-wrap-key-ignored", severity="warning", family="accelerate",
      summary="fsdp_transformer_layer_cls_to_wrap / fsdp_min_num_params without the wrap policy that reads it",
      source="accelerate/utils/dataclasses.py::FullyShardedDataParallelPlugin.__post_init__")
def wrap_key_ignored(ctx):
    """The plugin reads the class names only under ``TRANSFORMER_BASED_WRAP`` and the size only
    under ``SIZE_BASED_WRAP``; with any other policy - including an omitted
    ``fsdp_auto_wrap_policy``, which means ``NO_WRAP`` - the key is dropped and the model is
    sharded as one unit.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
    ```
    """
    e = _fsdp(ctx)
    if not e:
        return ()
    raw = e.get("fsdp_auto_wrap_policy")
    if raw is not None and not isinstance(raw, str):
        return ()
    pol = (raw or "NO_WRAP").upper()
    if pol not in S.FSDP_AUTO_WRAP_POLICY:
        return ()  # acc-fsdp-auto-wrap-policy-invalid
    shown = "omitted (NO_WRAP)" if raw is None else fmt(raw)
    for key, needs in (("fsdp_transformer_layer_cls_to_wrap", "TRANSFORMER_BASED_WRAP"),
                       ("fsdp_min_num_params", "SIZE_BASED_WRAP")):
        v = e.get(key)
        if e.has(key) and v not in (None, "", [], 0) and pol != needs:
            ctx.report(e.path(key), f"{key} is ignored: fsdp_auto_wrap_policy is {shown}, and only {needs} "
                       "reads it", f"add fsdp_auto_wrap_policy: {needs}" if raw is None
                       else f"set fsdp_auto_wrap_policy: {needs}, or remove {key}")
    return ()
