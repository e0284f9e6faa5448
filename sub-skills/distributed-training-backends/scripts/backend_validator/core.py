"""Core data model shared by every validator rule.

Design (modelled on yamllint's rules): each rule is a small generator function
registered with :func:`rule`. It receives a :class:`Context` and yields
findings through ``ctx.report(...)``. The rule's docstring carries one failing
and one passing example in fenced blocks (``Fails:`` / ``Passes:``) which the
tests run through the real library (the oracle) and through the validator, and
from which ``references/validator-rules.md`` is generated.

Nothing here imports accelerate, torch or deepspeed.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

SEVERITIES = ("error", "warning", "info")
# Families decide which documents a rule sees.
#   accelerate : an Accelerate config (YAML or JSON) -> ctx.doc
#   deepspeed  : a DeepSpeed JSON -> ctx.doc, ctx.consumer set
#   cross      : an Accelerate config (ctx.doc) plus the DeepSpeed JSON its
#                deepspeed_config_file names (ctx.related["deepspeed"]), when readable
#   input      : parse-level problems (duplicate keys, YAML 1.1 traps, tags)
#   launch     : a whole launch command or a node set (ctx.launch, see launch/check.py)
#   jobspec    : a SLURM batch script or Kubeflow manifest (ctx.jobspec, see jobspec/check.py)
FAMILIES = ("accelerate", "deepspeed", "cross", "input", "launch", "jobspec")
CONSUMERS = ("deepspeed", "accelerate", "transformers")

KeyPath = Tuple[Any, ...]


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    message: str
    hint: str = ""
    path: KeyPath = ()
    line: Optional[int] = None  # 1-based
    col: Optional[int] = None  # 1-based
    file: str = ""

    def key_path(self) -> str:
        out = []
        for p in self.path:
            out.append(f"[{p}]" if isinstance(p, int) else (("." if out else "") + str(p)))
        return "".join(out)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "file": self.file,
            "rule": self.rule,
            "severity": self.severity,
            "path": self.key_path(),
            "line": self.line,
            "column": self.col,
            "message": self.message,
            "hint": self.hint,
        }


@dataclass(frozen=True)
class ScalarInfo:
    """How a scalar was written in the source (for YAML 1.1 traps)."""

    raw: str  # the source text of the scalar, without quotes
    style: Optional[str]  # None (plain), "'", '"', "|", ">"
    tag: Optional[str]  # explicit tag as written (e.g. "!!python/object"), or None


class InputError(Exception):
    """Fatal input problem (unreadable, unparseable, too large, too deep, not a
    mapping ...). The CLI prints ``path: message`` on one line and exits 2."""


# One input limit for every file the validator reads (a config, standard input, or the
# DeepSpeed JSON an Accelerate config names); real configs are a few KiB.
MAX_INPUT_BYTES = 5 * 1024 * 1024


def decode_input(raw: bytes) -> str:
    """UTF-8 text, or InputError for oversize, binary or non-UTF-8 bytes.

    A byte-order mark is kept: YAML skips it, while a JSON loader must see it
    (``json.load``, which Accelerate and the Trainer use, rejects it)."""
    if len(raw) > MAX_INPUT_BYTES:
        raise InputError(f"input is larger than the {MAX_INPUT_BYTES // (1024 * 1024)} MiB input limit")
    if b"\x00" in raw:
        raise InputError("binary data (NUL bytes), not a text config file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}); "
                         "accelerate and deepspeed open config files as UTF-8") from None


def read_input_file(path: str) -> str:
    """Read and decode one file within MAX_INPUT_BYTES; InputError with a one-line reason."""
    import os

    try:
        if os.path.isdir(path):
            raise InputError("is a directory, not a config file")
        size = os.path.getsize(path)
        if size > MAX_INPUT_BYTES:
            raise InputError(f"file is {size / (1024 * 1024):.1f} MiB, larger than the "
                             f"{MAX_INPUT_BYTES // (1024 * 1024)} MiB input limit")
        with open(path, "rb") as f:
            raw = f.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise InputError("no such file") from None
    except PermissionError:
        raise InputError("permission denied") from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}") from None
    return decode_input(raw)


class Doc:
    """A parsed document: plain Python data plus source positions.

    ``data`` holds only dict / list / str / int / float / bool / None.
    ``positions`` maps a key path (tuple of keys and list indices) to the
    1-based (line, col) of the *key* for mapping entries, or of the item for
    list entries; the empty path maps to the document start.
    ``scalars`` (YAML only) maps a key path to the :class:`ScalarInfo` of the
    scalar value found there.
    """

    def __init__(self, data: Any, *, kind: str, name: str, text: str = "",
                 positions: Optional[Dict[KeyPath, Tuple[int, int]]] = None,
                 scalars: Optional[Dict[KeyPath, ScalarInfo]] = None,
                 source_path: Optional[str] = None) -> None:
        self.data = data
        self.kind = kind  # "yaml" | "json"
        self.name = name  # as shown in findings (the argument given, or "<stdin>")
        self.text = text
        self.positions = positions or {}
        self.scalars = scalars or {}
        self.source_path = source_path  # filesystem path when read from disk
        # Non-fatal problems found while parsing (duplicate keys, YAML 1.1 traps,
        # object-constructing tags ...): loaders append Finding objects here and
        # the CLI reports them with the rule findings.
        self.parse_findings: List["Finding"] = []
        # JSON only: lenient (HJSON) features used -> [(kind, line, col)] with kind
        # in {"comment", "trailing-comma", ...}; strict consumers reject them.
        self.lenient_features: List[Tuple[str, int, int]] = []

    _MISSING = object()

    def get(self, path: KeyPath, default: Any = None) -> Any:
        cur = self.data
        for p in path:
            if isinstance(cur, dict) and p in cur:
                cur = cur[p]
            elif isinstance(cur, list) and isinstance(p, int) and 0 <= p < len(cur):
                cur = cur[p]
            else:
                return default
        return cur

    def has(self, path: KeyPath) -> bool:
        return self.get(path, self._MISSING) is not self._MISSING

    def pos(self, path: KeyPath) -> Tuple[Optional[int], Optional[int]]:
        """Position of path, or of its nearest ancestor that has one."""
        path = tuple(path)
        while True:
            if path in self.positions:
                return self.positions[path]
            if not path:
                return (None, None)
            path = path[:-1]


@dataclass
class Rule:
    id: str
    severity: str
    family: str
    summary: str  # one line: what the rule finds
    source: str  # upstream place that justifies it, e.g. "accelerate/commands/launch.py::_validate_launch_command"
    func: Callable[["Context"], Iterable[Any]]
    doc: str = ""
    # For warnings: what accelerate/deepspeed silently does (value dropped, block ignored ...)
    consumers: Tuple[str, ...] = ()  # deepspeed-family rules: consumers the rule applies to ( () = all )


REGISTRY: Dict[str, Rule] = {}
# Set by the rules package: imports the modules of a family before it first runs (rules/__init__.py).
FAMILY_LOADER: Optional[Callable[[str], None]] = None


def rule(*, id: str, severity: str, family: str, summary: str, source: str,
         consumers: Tuple[str, ...] = ()) -> Callable:
    """Register a rule generator. Ids are kebab-case and stable, prefixed by
    family: ``acc-``, ``ds-``, ``xf-`` (cross-file), ``input-``/``yaml-``."""
    if severity not in SEVERITIES:
        raise ValueError(f"bad severity {severity!r}")
    if family not in FAMILIES:
        raise ValueError(f"bad family {family!r}")

    def deco(func: Callable) -> Callable:
        if id in REGISTRY:
            raise ValueError(f"duplicate rule id {id!r}")
        REGISTRY[id] = Rule(id=id, severity=severity, family=family, summary=summary,
                            source=source, func=func, doc=(func.__doc__ or ""),
                            consumers=tuple(consumers))
        func.rule_id = id
        return func

    return deco


@dataclass
class Options:
    consumer: Optional[str] = None  # forced --consumer, or None
    world_size: Optional[int] = None  # --world-size
    cwd: str = "."  # directory relative paths are resolved against (like accelerate)
    check_imports: bool = False


@dataclass
class Context:
    doc: Doc
    options: Options = field(default_factory=Options)
    consumer: Optional[str] = None  # resolved consumer for deepspeed-family rules
    consumer_reason: str = ""  # why that consumer was assumed (shown in output)
    related: Dict[str, Doc] = field(default_factory=dict)  # e.g. {"deepspeed": Doc}
    findings: List[Finding] = field(default_factory=list)
    # checks a rule could not run for lack of information: {"file", "check", "reason", "option"}
    skipped: List[Dict[str, str]] = field(default_factory=list)
    _rule: Optional[Rule] = None

    def skip(self, reason: str, option: str = "", *, doc: Optional[Doc] = None) -> None:
        """Record that the running rule skipped its check for lack of information
        (``reason``), and the command-line ``option`` that would supply it."""
        r = self._rule
        self.skipped.append({"file": (doc or self.doc).name, "check": r.id if r else "?",
                             "reason": reason, "option": option})

    def report(self, path: KeyPath, message: str, hint: str = "", *,
               severity: Optional[str] = None, doc: Optional[Doc] = None,
               line: Optional[int] = None, col: Optional[int] = None) -> Finding:
        """Record a finding for the running rule at ``path`` of ``doc``
        (default: ``ctx.doc``). Line/col default to the position of path."""
        d = doc or self.doc
        if line is None:
            line, col = d.pos(tuple(path))
        r = self._rule
        f = Finding(rule=r.id if r else "?", severity=severity or (r.severity if r else "error"),
                    message=message, hint=hint, path=tuple(path), line=line, col=col, file=d.name)
        self.findings.append(f)
        return f


def run_rules(ctx: Context, family: str) -> List[Finding]:
    """Run every registered rule of ``family`` on ctx; return new findings."""
    start = len(ctx.findings)
    if FAMILY_LOADER is not None:
        FAMILY_LOADER(family)
    for r in list(REGISTRY.values()):
        if r.family != family:
            continue
        if r.consumers and ctx.consumer not in r.consumers:
            continue
        ctx._rule = r
        try:
            for _ in r.func(ctx) or ():
                pass
        finally:
            ctx._rule = None
    return ctx.findings[start:]


def did_you_mean(word: str, candidates: Iterable[str]) -> Optional[str]:
    """Closest candidate for a misspelled key (difflib, cutoff 0.75), or None."""
    import difflib

    m = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.75)
    return m[0] if m else None
