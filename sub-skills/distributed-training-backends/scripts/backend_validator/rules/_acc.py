"""Small helpers shared by the accelerate_* rule modules (no rules here)."""
from __future__ import annotations

from typing import Any, Iterable, Optional, Tuple

from ..core import Context, did_you_mean
from .accelerate_schema import Effective


def eff(ctx: Context) -> Effective:
    """Cached launcher view of ctx.doc."""
    e = getattr(ctx, "_acc_eff", None)
    if e is None or e.doc is not ctx.doc:
        e = Effective(ctx.doc)
        ctx._acc_eff = e
    return e


def fmt(v: Any, limit: int = 60) -> str:
    """A value as shown in a one-line message (quoted, control characters escaped, shortened)."""
    if isinstance(v, str) and v.isprintable() and "'" not in v:
        s = f"'{v}'"
    else:
        s = repr(v)
    s = s.replace("\n", "\\n")
    return s if len(s) <= limit else s[:limit - 3] + "..."


def suggest(word: Any, candidates: Iterable[str], strip: Tuple[str, ...] = ()) -> Optional[str]:
    """did_you_mean, also trying the word with a known prefix added or removed."""
    cands = list(candidates)
    if not isinstance(word, str):
        return None
    m = did_you_mean(word, cands)
    if m:
        return m
    for p in strip:
        if word.startswith(p):
            m = did_you_mean(word[len(p):], cands)
        elif p + word in cands:
            m = p + word
        else:
            m = did_you_mean(p + word, cands)
        if m:
            return m
    return None


def report_unknown(ctx: Context, block: Optional[str], keys: Iterable[Any], known: Iterable[str],
                   what: str, strip: Tuple[str, ...] = (), extra_hint: str = "") -> None:
    known = list(known)
    for k in keys:
        path = (block, k) if block else (k,)
        m = suggest(k, known, strip)
        hint = f"did you mean '{m}'?" if m else f"remove it (known keys: {', '.join(known)})"
        if extra_hint:
            hint = f"{hint} {extra_hint}"
        ctx.report(path, f"unknown key {fmt(k)} in {block or 'the top level'}: {what}", hint)
