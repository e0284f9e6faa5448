"""Helpers of the accelerate_deepspeed*.py rule modules (no rules here), apart from _acc.py so that a
config DeepSpeed does not launch never compiles them."""
from __future__ import annotations

from ._acc import eff
from .accelerate_schema import Effective

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Optional

    from ..core import Context


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
