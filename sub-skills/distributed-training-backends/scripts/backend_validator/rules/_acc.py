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


def yaml_or_strict_json(doc: Any) -> bool:
    """SILENT_WHEN of accelerate_json.py (rules/__init__.py): not a JSON document, or one whose only
    lenient features are NaN/Infinity, so acc-json-not-strict returns at once."""
    return doc.kind != "json" or all(f[0] == "nan-infinity" for f in doc.lenient_features)


def single_machine(doc: Any) -> bool:
    """SILENT_WHEN of accelerate_multinode.py (rules/__init__.py): num_machines is not a number above 1,
    so Effective.multi_machine is false and each of those rules returns at once."""
    d = doc.data if isinstance(doc.data, dict) else {}
    nm = d.get("num_machines", 1)
    return not (isinstance(nm, (int, float)) and not isinstance(nm, bool) and nm > 1)


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
