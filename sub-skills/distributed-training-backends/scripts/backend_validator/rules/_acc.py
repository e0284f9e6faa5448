"""Small helpers shared by the accelerate_* rule modules (no rules here)."""
from __future__ import annotations

from ..core import Context
from .accelerate_schema import Effective

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Iterable, Optional, Tuple


def eff(ctx: Context) -> Effective:
    """Cached launcher view of ctx.doc."""
    e = getattr(ctx, "_acc_eff", None)
    if e is None or e.doc is not ctx.doc:
        e = Effective(ctx.doc)
        ctx._acc_eff = e
    return e


# upstream places the DeepSpeed-block rules cite (accelerate_deepspeed*.py)
DS_PLUGIN = "accelerate/utils/dataclasses.py::DeepSpeedPlugin.__post_init__"
DS_ENV = "accelerate/utils/launch.py::prepare_deepspeed_cmd_env"


def ds_eff(ctx: Context) -> Optional[Effective]:
    """The launcher view of ctx.doc when DeepSpeed launches it, else None."""
    e = eff(ctx)
    return e if e.launcher == "deepspeed" else None


def has_ds_file(e: Effective) -> bool:
    """Whether deepspeed_config_file names a JSON (a non-empty string other than 'none')."""
    f = e.get("deepspeed_config_file")
    return isinstance(f, str) and f != "none" and f.strip() != ""


def ds_config_file_given(doc: Any) -> bool:
    """SILENT_WHEN of accelerate_deepspeed_inline.py (rules/__init__.py): DeepSpeed is not the launcher,
    or deepspeed_config.deepspeed_config_file names a JSON, which then owns every setting those rules
    check (each of them returns at once: ``not e or has_ds_file(e)``, or the block's file is set)."""
    try:
        e = Effective(doc)
        if e.launcher != "deepspeed":
            return True
        block = doc.data.get("deepspeed_config")
        return has_ds_file(e) and isinstance(block, dict) and block.get("deepspeed_config_file") not in (None, "none")
    except Exception:  # pragma: no cover - then the module is loaded and its rules decide
        return False


def fmt(v: Any, limit: int = 60) -> str:
    """A value as shown in a one-line message (quoted, control characters escaped, shortened)."""
    if isinstance(v, str) and v.isprintable() and "'" not in v:
        s = f"'{v}'"
    else:
        s = repr(v)
    s = s.replace("\n", "\\n")
    return s if len(s) <= limit else s[:limit - 3] + "..."


def suggest(word: Any, candidates: Iterable[str], strip: Tuple[str, ...] = ()) -> Optional[str]:
    """did_you_mean with known prefixes added or removed and case ignored (_acc_unknown.py)."""
    from ._acc_unknown import suggest as run
    return run(word, candidates, strip)


def report_unknown(ctx: Context, block: Optional[str], keys: Iterable[Any], known: Iterable[str],
                   what: str, strip: Tuple[str, ...] = (), extra_hint: str = "",
                   also: Iterable[str] = ()) -> None:
    """Report each unknown key with where it belongs or what it may be a typo of (_acc_unknown.py,
    compiled only when a config has an unknown key)."""
    keys = list(keys)
    if keys:
        from ._acc_unknown import report_unknown as run
        run(ctx, block, keys, known, what, strip, extra_hint, also, fmt=fmt)


# upstream places the accelerate_* rules cite, and the packages --check-imports looks for
CFG = "accelerate/commands/config/config_args.py"
LAUNCH = "accelerate/commands/launch.py::_validate_launch_command"
ULAUNCH = "accelerate/utils/launch.py"
_PACKAGES = {
    "deepspeed": ("deepspeed", "DEEPSPEED needs the deepspeed package (pip install deepspeed)"),
    "megatron": ("megatron", "MEGATRON_LM needs Megatron-LM (megatron.core) installed"),
    "torch_xla": ("torch_xla", "XLA needs torch_xla"),
    "sagemaker": ("sagemaker", "AMAZON_SAGEMAKER needs the sagemaker SDK (pip install accelerate[sagemaker])"),
    "transformers": ("transformers", "needs transformers"),
}
