"""What both front ends print: exit codes, the text form of a finding, the closing summary line.

The file checks (cli.py) and the launch-command checks (launch/cli_launch.py) share these, so
neither front end imports the other for them. Standard library only.
"""
from __future__ import annotations

if False:  # pragma: no cover - annotations only; importing typing costs start time (bench_validator.py)
    from typing import Any, Callable, List
    from .core import Finding

EXIT_OK, EXIT_FINDINGS, EXIT_INPUT = 0, 1, 2
# --output values served by formats.py (formats.CHOICES; imported only when one is asked for)
CI_FORMATS = ("sarif", "github")


def one_line(s: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(s))


def fmt_text(f: Finding) -> str:
    loc = f"{f.file}:{f.line}:{f.col}" if f.line is not None else f"{f.file}"
    kp = f" [{one_line(f.key_path())}]" if f.path else ""
    out = f"{loc}: {f.severity} {f.rule}: {one_line(f.message)}{kp}"
    if f.hint:
        out += f"\n    hint: {one_line(f.hint)}"
    return out


def summary_line(n_err: int, n_warn: int, n_info: int, n_input: int, what: str) -> str:
    """The closing stderr line of text output (file checks and launch checks alike)."""
    ie = f", {n_input} input error(s)" if n_input else ""
    return f"{n_err} error(s), {n_warn} warning(s), {n_info} info{ie} in {what}\n"


def dedupe(items: List[Any], key: Callable[[Any], Any]) -> List[Any]:
    """Keep the first of items with the same key: a DeepSpeed JSON reached through several
    Accelerate configs (or also given itself) yields the same note once per path."""
    seen, out = set(), []
    for it in items:
        k = key(it)
        if k not in seen:
            seen.add(k)
            out.append(it)
    return out
