"""Accelerate config rules: the dynamo (torch.compile) settings - backend, mode, booleans, unknown keys,
what DeepSpeed and the launcher do with them (accelerate 1.15.0).
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import CFG, LAUNCH, ULAUNCH, eff, fmt, report_unknown

# Imported only for a document that mentions dynamo_config or the legacy dynamo_backend
# (rules/__init__.py): every rule here reports nothing on any other document.
NEEDS = ("dynamo",)


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
