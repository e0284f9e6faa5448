"""Accelerate ``fp8_config`` rules (mixed_precision fp8; TE, MS-AMP and torchao recipes, accelerate 1.15.0).

With ``mixed_precision: fp8`` every ``fp8_*`` launch argument (file values with
an ``fp8_`` prefix added, plus argparse defaults) is exported as
``ACCELERATE_FP8_*`` (``utils/launch.py::setup_fp8_env``) and the recipe
kwargs classes read them back in the training process.
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import eff, fmt, report_unknown

# Imported only for a document that mentions fp8: mixed_precision fp8 or an fp8_config block
# (rules/__init__.py): every rule here reports nothing on any other document.
NEEDS = ("fp8",)

DC = "accelerate/utils/dataclasses.py"


def _fp8(ctx):
    e = eff(ctx)
    return e if (e.fp8 and e.launcher in ("simple", "torchrun", "deepspeed")) else None


def _backend(e):
    b = e.fp8_backend()
    return b if b is not None else None


@rule(id="acc-fp8-unknown-key", severity="warning", family="accelerate",
      summary="unknown fp8_config key, incl. the names `accelerate config` writes but no recipe reads",
      source="accelerate/utils/launch.py::setup_fp8_env")
def fp8_unknown(ctx):
    """Keys are exported as ``ACCELERATE_FP8_<NAME>``; a name no recipe reads is lost. The
    questionnaire's ``amax_history_length``, ``amax_compute_algorithm`` and
    ``optimization_level`` are such names (the recipes read ``amax_history_len``,
    ``amax_compute_algo``, ``opt_level``).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: TE
      amax_history_length: 16
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: TE
      amax_history_len: 16
    ```
    """
    b = ctx.doc.data.get("fp8_config")
    if not isinstance(b, dict):
        return ()
    for k in b:
        name = S.prefixed("fp8_config", k)
        if name in S.FP8_KEYS:
            continue
        if name in S.FP8_QUESTIONNAIRE_NAMES:
            good = S.FP8_QUESTIONNAIRE_NAMES[name][len("fp8_"):]
            ctx.report(("fp8_config", k), f"fp8_config key {fmt(k)} (written by `accelerate config`) is never read; "
                       "the recipe uses its default", f"rename it to {good}")
        else:
            report_unknown(ctx, "fp8_config", [k], [x[len("fp8_"):] for x in S.FP8_KEYS], "never read by a recipe",
                           strip=("fp8_",))
    return ()


@rule(id="acc-fp8-config-ignored", severity="warning", family="accelerate",
      summary="fp8_config without mixed_precision: fp8 (not exported)",
      source="accelerate/utils/launch.py::prepare_multi_gpu_env")
def fp8_ignored(ctx):
    """The FP8 variables are exported only when the run's precision is fp8.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: bf16
    num_processes: 2
    fp8_config:
      backend: TE
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: TE
    ```
    """
    e = eff(ctx)
    b = ctx.doc.data.get("fp8_config")
    if isinstance(b, dict) and b and not e.fp8 and not e.sagemaker and e.launcher != "tpu":
        ctx.report(("fp8_config",), f"fp8_config is ignored: mixed_precision is {fmt(e.mixed_precision)}, not fp8",
                   "set mixed_precision: fp8, or remove fp8_config")
    return ()


@rule(id="acc-fp8-backend-invalid", severity="error", family="accelerate",
      summary="fp8_config.backend is not exactly AO, TE, MSAMP or NO (case-sensitive)",
      source="accelerate/accelerator.py::Accelerator.fp8_backend")
def fp8_backend(ctx):
    """``Accelerator`` converts ``ACCELERATE_FP8_BACKEND`` with the ``FP8BackendType`` enum
    without changing case: ``te`` or ``MS-AMP`` fail.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: te
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: TE
    ```
    """
    e = _fp8(ctx)
    if e and e.has("fp8_backend") and e.get("fp8_backend") is not None:
        v = e.get("fp8_backend")
        if str(v) not in S.FP8_BACKENDS:
            up = str(v).upper().replace("-", "")
            hint = f"write '{up}' (upper case)" if up in S.FP8_BACKENDS else "use AO, TE or MSAMP"
            ctx.report(e.path("fp8_backend"), f"fp8 backend {fmt(v)} is not an FP8BackendType (exact case)", hint)
    return ()


def _te(e):
    # With no backend key the recipe is auto-detected from the installed libraries (torchao, then
    # Transformer Engine, then MS-AMP), so only an explicit TE backend decides the TE recipe.
    return _backend(e) == "TE"


@rule(id="acc-fp8-te-value-invalid", severity="error", family="accelerate",
      summary="Transformer Engine recipe value it cannot read (fp8_format, amax_compute_algo, ints, booleans, "
              "override_linear_precision)", source=f"{DC}::TERecipeKwargs.__post_init__")
def te_value(ctx):
    """TERecipeKwargs reads ``fp8_format`` (HYBRID/E4M3/E5M2), ``amax_compute_algo``
    (max/most_recent), ``margin``/``interval``/``amax_history_len`` with ``int()``, booleans with
    ``str_to_bool``, and ``override_linear_precision`` by indexing [0], [1], [2] - so it must be a
    YAML list of three booleans, not the string ``(false, false, false)``.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: TE
      fp8_format: E4M4
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: TE
      fp8_format: E4M3
    ```
    """
    e = _fp8(ctx)
    if not e:
        return ()
    ov = e.get("fp8_override_linear_precision")
    if not _te(e) and ov is not None and not (
            (isinstance(ov, (list, tuple, str)) and len(ov) >= 3) or (isinstance(ov, dict) and all(i in ov for i in
                                                                                                 range(3)))):
        # utils/launch.py::setup_fp8_env indexes [0], [1], [2] for every backend (incl. auto-detected)
        ctx.report(e.path("fp8_override_linear_precision"), f"override_linear_precision {fmt(ov)} cannot be "
                   "indexed [0], [1], [2]: the launcher fails exporting it (whatever the fp8 backend)",
                   "write a YAML list: [false, false, false], or remove it")
    if not _te(e):
        return ()
    if e.get("fp8_format") is not None and str(e.get("fp8_format")).upper() not in S.FP8_FORMATS:
        ctx.report(e.path("fp8_format"), f"fp8_format {fmt(e.get('fp8_format'))} is not HYBRID, E4M3 or E5M2",
                   "use HYBRID (training) or E4M3")
    algo = e.get("fp8_amax_compute_algo")
    if algo is not None and str(algo).lower() not in S.FP8_AMAX_ALGOS:
        ctx.report(e.path("fp8_amax_compute_algo"), f"amax_compute_algo {fmt(e.get('fp8_amax_compute_algo'))} "
                   "is not max or most_recent", "use max or most_recent")
    for k in ("fp8_margin", "fp8_interval", "fp8_amax_history_len"):
        if e.get(k) is not None and S.as_int(e.get(k)) is None:
            ctx.report(e.path(k), f"{k[4:]} {fmt(e.get(k))} is not an integer", "write an integer")
    for k in ("fp8_use_autocast_during_eval", "fp8_use_mxfp8_block_scaling"):
        if e.get(k) is not None and not S.is_truth_word(e.get(k)):
            ctx.report(e.path(k), f"{k[4:]} {fmt(e.get(k))} is not a truth word", "use true or false")
    k = "fp8_override_linear_precision"
    if e.get(k) is not None:
        v = e.get(k)
        ok = isinstance(v, (list, tuple)) and len(v) >= 3 and all(S.is_truth_word(x) for x in v[:3])
        if not ok:
            ctx.report(e.path(k), f"override_linear_precision {fmt(v)} is not a list of three booleans; the TE "
                       "recipe reads its first three items as truth words",
                       "write a YAML list: [false, false, false]")
    return ()


@rule(id="acc-fp8-msamp-opt-level", severity="error", family="accelerate",
      summary="MS-AMP opt_level is not O1 or O2", source=f"{DC}::MSAMPRecipeKwargs.__post_init__")
def msamp_opt(ctx):
    """MS-AMP accepts optimization levels ``O1`` and ``O2`` only (exact case; letter O).

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: MSAMP
      opt_level: O3
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: MSAMP
      opt_level: O2
    ```
    """
    e = _fp8(ctx)
    lvl = e.get("fp8_opt_level") if e else None
    if e and _backend(e) == "MSAMP" and lvl is not None and str(lvl) not in S.FP8_OPT_LEVELS:
        ctx.report(e.path("fp8_opt_level"), f"opt_level {fmt(e.get('fp8_opt_level'))} is not O1 or O2",
                   "use O1 or O2 (capital letter O)")
    return ()


@rule(id="acc-fp8-ao-value-invalid", severity="error", family="accelerate",
      summary="torchao recipe boolean (pad_inner_dim, enable_fsdp_float8_all_gather) is not a truth word",
      source=f"{DC}::AORecipeKwargs.__post_init__")
def ao_value(ctx):
    """AORecipeKwargs reads both flags with ``parse_flag_from_env``.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: AO
      pad_inner_dim: always
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: AO
      pad_inner_dim: true
    ```
    """
    e = _fp8(ctx)
    if not e or _backend(e) != "AO":
        return ()
    for k in ("fp8_pad_inner_dim", "fp8_enable_fsdp_float8_all_gather"):
        if e.get(k) is not None and not S.is_truth_word(e.get(k)):
            ctx.report(e.path(k), f"{k[4:]} {fmt(e.get(k))} is not a truth word", "use true or false")
    return ()


@rule(id="acc-fp8-msamp-zero3", severity="error", family="accelerate",
      summary="MS-AMP fp8 with DeepSpeed ZeRO stage 3", source="accelerate/utils/dataclasses.py::DeepSpeedPlugin.__post_init__")
def msamp_zero3(ctx):
    """DeepSpeedPlugin refuses MS-AMP with ZeRO-3.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    mixed_precision: fp8
    num_processes: 2
    deepspeed_config:
      zero_stage: 3
    fp8_config:
      backend: MSAMP
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    mixed_precision: fp8
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
    fp8_config:
      backend: MSAMP
    ```
    """
    e = _fp8(ctx)
    if e and e.launcher == "deepspeed" and _backend(e) == "MSAMP" and S.as_int(e.get("zero_stage", 2)) == 3:
        ctx.report(e.path("fp8_backend"), "MS-AMP does not support ZeRO stage 3; DeepSpeedPlugin refuses it",
                   "use zero_stage 0-2, or another FP8 backend (TE, AO)")
    return ()


@rule(id="acc-fp8-msamp-fsdp", severity="error", family="accelerate",
      summary="MS-AMP fp8 with FSDP", source="accelerate/accelerator.py::Accelerator.__init__")
def msamp_fsdp(ctx):
    """``Accelerator`` raises NotImplementedError for MS-AMP + FSDP.

    Fails:
    ```yaml
    distributed_type: FSDP
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: MSAMP
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    mixed_precision: fp8
    num_processes: 2
    fp8_config:
      backend: TE
    ```
    """
    e = _fp8(ctx)
    if e and e.is_fsdp and _backend(e) == "MSAMP":
        ctx.report(e.path("fp8_backend"), "MS-AMP with FSDP is not supported; Accelerator refuses it",
                   "use DeepSpeed (ZeRO 0-2) with MS-AMP, or the TE / AO backend with FSDP")
    return ()


@rule(id="acc-fp8-ao-fsdp-ram-efficient", severity="error", family="accelerate",
      summary="torchao fp8 + FSDP with fsdp_cpu_ram_efficient_loading on (the launch default)",
      source="accelerate/accelerator.py::Accelerator.__init__")
def ao_fsdp_ram(ctx):
    """``Accelerator`` refuses torchao FP8 with FSDP while CPU-RAM-efficient loading is on - and the
    launcher turns it on unless the file sets ``fsdp_cpu_ram_efficient_loading: false``.

    Fails:
    ```yaml
    distributed_type: FSDP
    mixed_precision: fp8
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
    fp8_config:
      backend: AO
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    mixed_precision: fp8
    num_processes: 2
    fsdp_config:
      fsdp_version: 2
      fsdp_cpu_ram_efficient_loading: false
    fp8_config:
      backend: AO
    ```
    """
    e = _fp8(ctx)
    if e and e.is_fsdp and _backend(e) == "AO" and S.truth(e.fsdp_get("fsdp_cpu_ram_efficient_loading")) is True:
        ctx.report(e.path("fp8_backend"), "torchao FP8 with FSDP and fsdp_cpu_ram_efficient_loading on (launch "
                   "default true): Accelerator refuses it", "add fsdp_config.fsdp_cpu_ram_efficient_loading: false")
    return ()


# which recipe reads which fp8_* argument (utils/dataclasses.py: TERecipeKwargs / AORecipeKwargs /
# MSAMPRecipeKwargs read ACCELERATE_FP8_<NAME> back in __post_init__)
FP8_READERS = {
    "TE": ("fp8_use_autocast_during_eval", "fp8_margin", "fp8_interval", "fp8_format", "fp8_amax_history_len",
           "fp8_amax_compute_algo", "fp8_override_linear_precision", "fp8_use_mxfp8_block_scaling"),
    "AO": ("fp8_pad_inner_dim", "fp8_enable_fsdp_float8_all_gather"),
    "MSAMP": ("fp8_opt_level",),
}


@rule(id="acc-fp8-key-other-backend", severity="warning", family="accelerate",
      summary="fp8_config key that only another backend's recipe reads (e.g. opt_level with backend TE)",
      source=f"{DC}::TERecipeKwargs / AORecipeKwargs / MSAMPRecipeKwargs")
def fp8_key_other_backend(ctx):
    """The launcher exports every fp8_config key, but only the recipe of the chosen ``backend`` is
    built, and each recipe reads its own names: ``opt_level`` is MS-AMP's, ``pad_inner_dim`` and
    ``enable_fsdp_float8_all_gather`` torchao's, the format / amax / margin keys Transformer
    Engine's. A key for another backend changes nothing.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    mixed_precision: fp8
    fp8_config:
      backend: AO
      fp8_format: E4M3
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    mixed_precision: fp8
    fp8_config:
      backend: TE
      fp8_format: E4M3
    ```
    """
    e = _fp8(ctx)
    if not e:
        return ()
    backend = _backend(e)
    if not isinstance(backend, str) or backend not in FP8_READERS:
        return ()  # NO / missing: the backend is picked from the installed libraries (others: invalid)
    b = ctx.doc.data.get("fp8_config")
    if not isinstance(b, dict):
        return ()
    for k in b:
        name = S.prefixed("fp8_config", k)
        owner = next((o for o, names in FP8_READERS.items() if name in names), None)
        if owner and owner != backend:
            ctx.report(("fp8_config", k), f"fp8_config.{k} is read only by the {owner} recipe; with backend "
                       f"{backend} it has no effect", f"remove it, or set backend: {owner} if that is the one you want")
    return ()
