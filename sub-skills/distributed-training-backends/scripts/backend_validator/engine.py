"""The validator's engine: parse an input, run the rule families, build a :class:`FileResult`.

Every front end sits on top of this module and nothing here imports one: the command line
(cli.py), the launch-command checks (launch/), the CI formats (formats.py) and the generated
reference (docs.py). Flow per input: read bytes (bounded) -> parse (YAML event loader, or the
JSON/HJSON loader) -> decide the format (accelerate or deepspeed) -> run the rule families.
Only what the input needs is imported: PyYAML for YAML, the DeepSpeed tables for DeepSpeed JSON,
each rule family's modules when it first runs. Nothing here imports accelerate, torch or deepspeed.
"""
from __future__ import annotations

import os
import sys

from . import core
from .core import Context, Doc, Finding, InputError, Options, run_rules
from .version import VERIFIED_AGAINST  # noqa: F401  (the version facts, printed by every front end)

if False:  # pragma: no cover - annotations only; importing typing costs start time (bench_validator.py)
    from typing import Any, Dict, List, Optional, TextIO, Tuple


def rules_loaded() -> None:
    """Register every rule (--list-rules, library users and tests that read core.REGISTRY)."""
    from . import rules
    rules.load_all()


def rules_lazy() -> None:
    """Register rule families as they first run (core.run_rules -> rules.load_family)."""
    from . import rules  # noqa: F401


def _load_json(text: str, name: str, source_path: Optional[str]) -> Doc:
    from . import loader_json_strict  # loader_json.py only for HJSON or when positions are asked for
    return loader_json_strict.load_text(text, name, source_path=source_path)


def _load_yaml(text: str, name: str, source_path: Optional[str]) -> Doc:
    from . import loader_yaml  # PyYAML is imported only for YAML input
    return loader_yaml.load_text(text, name, source_path=source_path)


def looks_like_deepspeed(data: Any) -> bool:
    """deepspeed.looks_like_deepspeed, whose DeepSpeed tables load only for a document without any of
    Accelerate's own top-level keys."""
    if not isinstance(data, dict) or not set(map(str, data)).isdisjoint(core.ACCELERATE_MARKERS):
        return False
    from .deepspeed import looks_like_deepspeed as f
    return bool(f(data))


def parse_input(text: str, name: str, source_path: Optional[str], fmt: str) -> Doc:
    """Parse text as JSON or YAML. JSON when the name ends in .json (accelerate then uses
    json.load too), when --format deepspeed is given, or for stdin that starts with '{'
    and parses as JSON."""
    lower = name.lower()
    if lower.endswith(".json") or fmt == "deepspeed":
        return _load_json(text, name, source_path)
    if not lower.endswith((".yaml", ".yml")) and text.lstrip("\ufeff \t\r\n").startswith("{"):
        try:
            return _load_json(text, name, source_path)
        except InputError:
            pass
    return _load_yaml(text, name, source_path)


def read_input(arg: str, stdin: Optional[TextIO]) -> Tuple[str, str, Optional[str]]:
    """Return (text, display name, filesystem path or None)."""
    if arg == "-":
        stream = stdin if stdin is not None else sys.stdin
        buf = getattr(stream, "buffer", None)
        if buf is not None:
            raw = buf.read(core.MAX_INPUT_BYTES + 1)
        else:
            s = stream.read(core.MAX_INPUT_BYTES + 1)
            raw = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
        return core.decode_input(raw), "<stdin>", None
    try:
        text = core.read_input_file(arg)
    except InputError as e:
        if str(e) == "no such file":
            raise InputError("no such file (accelerate: 'The passed configuration file does not exist')") from None
        raise
    return text, arg, os.path.abspath(arg)


class FileResult:
    def __init__(self, name: str) -> None:
        self.name = name
        self.format: Optional[str] = None
        self.consumer: Optional[str] = None
        self.consumer_reason: str = ""
        self.related: List[Dict[str, Any]] = []
        self.findings: List[Finding] = []
        self.input_error: Optional[str] = None
        self.skipped: List[Dict[str, str]] = []  # checks skipped for lack of information

    def as_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"file": self.name, "format": self.format}
        if self.format == "deepspeed":
            d["consumer"] = self.consumer
            d["consumer_reason"] = self.consumer_reason
        if self.related:
            d["related"] = self.related
        if self.input_error:
            d["input_error"] = self.input_error
        return d


def _consumer_parse_findings(findings: List[Finding], consumer: str) -> List[Finding]:
    from .ds_values import consumer_parse_findings
    return consumer_parse_findings(findings, consumer)


def _resolve_consumer(doc: Doc, forced: Optional[str], via_accelerate: bool) -> Tuple[str, str]:
    from .ds_values import resolve_consumer
    return resolve_consumer(doc, forced, via_accelerate)


def _run_family(ctx: Context, family: str) -> None:
    try:
        run_rules(ctx, family)
    except RecursionError:
        ctx.findings.append(Finding(rule="input-too-complex", severity="error",
                                    message="structure too deeply nested to check", file=ctx.doc.name))


def validate_doc(doc: Doc, fmt: str, options: Options) -> FileResult:
    """Run every applicable rule family on a parsed document."""
    rules_lazy()
    res = FileResult(doc.name)
    kind = fmt if fmt in ("accelerate", "deepspeed") else (
        "deepspeed" if looks_like_deepspeed(doc.data) else "accelerate")
    res.format = kind
    res.findings.extend(doc.parse_findings)
    if kind == "deepspeed":
        ctx = Context(doc=doc, options=options)
        ctx.consumer, ctx.consumer_reason = _resolve_consumer(doc, options.consumer, False)
        res.consumer, res.consumer_reason = ctx.consumer, ctx.consumer_reason
        res.findings[:] = _consumer_parse_findings(res.findings, ctx.consumer)
        if doc.kind == "yaml":
            _run_family(ctx, "input")
        _run_family(ctx, "deepspeed")
        res.findings.extend(ctx.findings)
        res.skipped.extend(ctx.skipped)
        return res

    ctx = Context(doc=doc, options=options)
    _run_family(ctx, "input")
    _run_family(ctx, "accelerate")
    res.findings.extend(ctx.findings)

    ds_block = doc.get(("deepspeed_config",))
    ds_file = ds_block.get("deepspeed_config_file") if isinstance(ds_block, dict) else None
    from .rules.accelerate_schema import Effective
    # accelerate reads the JSON only when it picks the DeepSpeed launcher (distributed_type DEEPSPEED);
    # under any other type the block is ignored (acc-block-ignored) and the JSON's problems never matter
    if isinstance(ds_file, str) and ds_file.strip() and ds_file != "none" and Effective(doc).launcher == "deepspeed":
        from .engine_related import load_related, uncovered_skips
        related = load_related(doc, ds_file, options, res)
        xctx = Context(doc=doc, options=options)
        if related is not None:
            dctx = Context(doc=related, options=options)
            dctx.consumer, dctx.consumer_reason = _resolve_consumer(related, options.consumer, True)
            _run_family(dctx, "deepspeed")
            res.findings.extend(_consumer_parse_findings(related.parse_findings, dctx.consumer))
            res.findings.extend(dctx.findings)
            res.related.append({"file": related.name, "format": "deepspeed", "consumer": dctx.consumer,
                                "consumer_reason": dctx.consumer_reason})
            xctx.related["deepspeed"] = related
            xctx.consumer, xctx.consumer_reason = dctx.consumer, dctx.consumer_reason
        _run_family(xctx, "cross")
        res.findings.extend(xctx.findings)
        if related is not None:
            res.skipped.extend(uncovered_skips(dctx.skipped, xctx))
        res.skipped.extend(xctx.skipped)
    res.skipped.extend(ctx.skipped)
    return res


def validate_text(text: str, name: str = "<stdin>", fmt: str = "auto",
                  options: Optional[Options] = None, source_path: Optional[str] = None) -> FileResult:
    """Library entry: validate one config given as text. Raises InputError for fatal input."""
    options = options or Options(cwd=os.getcwd())
    try:
        doc = parse_input(text, name, source_path, fmt)
    except RecursionError:
        raise InputError("nesting too deep to parse") from None
    return validate_doc(doc, fmt, options)
