"""Accelerate config rule for --check-imports: optional packages the config needs that are not
importable here (accelerate 1.15.0). Split from accelerate_core so that a check without --check-imports
does not compile it (rules/__init__.py, OPTION).
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import eff

# The rule returns at once unless this option is on: rules/__init__.py does not compile the module
# for a check without it.
OPTION = "check_imports"


def _on_path(*programs: str) -> bool:
    import shutil  # only for an mpirun_hostfile
    return any(shutil.which(p) for p in programs)


def _missing(mod: str) -> bool:
    try:
        import importlib.util  # only with --check-imports
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
    if e.launcher == "simple" and e.get("mpirun_hostfile") and not _on_path("mpirun", "mpiexec"):
        ctx.report(("mpirun_config",), "mpirun_hostfile needs mpirun or mpiexec on PATH (not found here)",
                   "install Open MPI, Intel MPI or MVAPICH where the job runs")
    return ()
