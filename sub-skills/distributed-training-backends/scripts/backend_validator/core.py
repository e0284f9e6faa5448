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

if False:  # pragma: no cover - annotations only: typing (and dataclasses, which imports inspect) cost
    # start time on every run without bytecode; see benchmarks/bench_validator.py
    from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

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
# Accelerate's own (non-DeepSpeed) top-level config keys: a document with one is an Accelerate config
# (deepspeed.looks_like_deepspeed; the engine checks these first, without loading the DeepSpeed tables).
ACCELERATE_MARKERS = ("compute_environment", "distributed_type", "num_processes", "mixed_precision",
                      "deepspeed_config", "fsdp_config", "machine_rank", "use_cpu", "main_training_function")

KeyPath = tuple  # Tuple[Any, ...]: mapping keys and list indices from the document root

REQUIRED = object()  # a Record field without a default


class Record:
    """A small data class: keyword or positional fields with defaults (``FIELDS``: name -> default,
    where ``list``/``dict`` stand for a fresh empty one), equality, repr and :meth:`replace`. It does
    what ``@dataclass`` did here without importing dataclasses (and inspect) at start."""

    __slots__ = ()
    FIELDS: Dict[str, Any] = {}
    FROZEN = False

    def __init__(self, *args: Any, **kw: Any) -> None:
        fields = self.FIELDS
        if args:
            names = tuple(fields)
            if len(args) > len(names):
                raise TypeError(f"{type(self).__name__}() takes at most {len(names)} positional arguments")
            for k in names[:len(args)]:
                if k in kw:
                    raise TypeError(f"{type(self).__name__}() got multiple values for argument {k!r}")
            kw.update(zip(names, args))
        put = object.__setattr__
        for k, default in fields.items():
            if k in kw:
                put(self, k, kw.pop(k))
            elif default is REQUIRED:
                raise TypeError(f"{type(self).__name__}() missing required argument {k!r}")
            else:
                put(self, k, default() if default is list or default is dict else default)
        if kw:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {next(iter(kw))!r}")

    def _values(self) -> tuple:
        return tuple(getattr(self, k) for k in self.FIELDS)

    def __setattr__(self, name: str, value: Any) -> None:
        if self.FROZEN:
            raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.FROZEN:
            raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")
        object.__delattr__(self, name)

    def __eq__(self, other: Any) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        if not self.FROZEN:
            raise TypeError(f"unhashable type: {type(self).__name__!r}")
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.FIELDS) + ")"

    def __reduce__(self) -> tuple:  # copy, deepcopy and pickle rebuild through __init__ (frozen-safe)
        return (type(self), self._values())

    def replace(self, **changes: Any) -> "Record":
        """A copy with some fields changed (``dataclasses.replace``)."""
        return type(self)(**{**{k: getattr(self, k) for k in self.FIELDS}, **changes})


class Finding(Record):
    FIELDS = {"rule": REQUIRED, "severity": REQUIRED, "message": REQUIRED, "hint": "", "path": (),
              "line": None,  # 1-based
              "col": None,  # 1-based
              "file": ""}
    FROZEN = True
    __slots__ = tuple(FIELDS)
    rule: str
    severity: str
    message: str
    hint: str
    path: KeyPath
    line: Optional[int]
    col: Optional[int]
    file: str

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


class ScalarInfo(Record):
    """How a scalar was written in the source (for YAML 1.1 traps)."""

    FIELDS = {"raw": REQUIRED,  # the source text of the scalar, without quotes
              "style": REQUIRED,  # None (plain), "'", '"', "|", ">"
              "tag": REQUIRED}  # explicit tag as written (e.g. "!!python/object"), or None
    FROZEN = True
    __slots__ = tuple(FIELDS)
    raw: str
    style: Optional[str]
    tag: Optional[str]


class InputError(Exception):
    """Fatal input problem (unreadable, unparseable, too large, too deep, not a
    mapping ...). The CLI prints ``path: message`` on one line and exits 2."""


# One input limit for every file the validator reads (a config, standard input, or the
# DeepSpeed JSON an Accelerate config names); real configs are a few KiB.
MAX_INPUT_BYTES = 5 * 1024 * 1024
# rule id of a duplicate JSON key (loader_json.py reports it; ds_values.py grades it per consumer)
JSON_DUPLICATE_RULE = "json-duplicate-key"
# YAML limits (loader_yaml.py; stated in --help, which must not import PyYAML to say them)
YAML_MAX_DEPTH = 100  # nesting of mappings/sequences
YAML_MAX_NODES = 200_000  # nodes after alias expansion (alias bombs)
# accelerate reads configs with yaml.safe_load, i.e. PyYAML's pure-Python SafeLoader, which refuses a
# few inputs libyaml accepts (a tab after "key:", for one). Inputs up to this size are parsed by that
# same parser; larger ones (never a real config) by libyaml when available, for bounded time.
YAML_PURE_PYTHON_LIMIT = 256 * 1024


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


class Rule(Record):
    FIELDS = {"id": REQUIRED, "severity": REQUIRED, "family": REQUIRED,
              "summary": REQUIRED,  # one line: what the rule finds
              # upstream place that justifies it, e.g. "accelerate/commands/launch.py::_validate_launch_command"
              "source": REQUIRED,
              "func": REQUIRED,  # the generator: func(ctx) reports through ctx.report
              "doc": "",  # the docstring: description, Fails / Passes examples
              "consumers": ()}  # deepspeed-family rules: consumers the rule applies to ( () = all )
    id: str
    severity: str
    family: str
    summary: str
    source: str
    func: Callable[[Context], Iterable[Any]]
    doc: str
    consumers: Tuple[str, ...]


REGISTRY: Dict[str, Rule] = {}
# Set by the rules package: imports the modules of a family that a document needs before the family
# runs on it (rules/__init__.py).
FAMILY_LOADER: Optional[Callable[[str, Optional[Doc], Optional[str], Any], None]] = None


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


class Options(Record):
    FIELDS = {"consumer": None,  # forced --consumer, or None
              "world_size": None,  # --world-size
              "cwd": ".",  # directory relative paths are resolved against (like accelerate)
              "check_imports": False}
    consumer: Optional[str]
    world_size: Optional[int]
    cwd: str
    check_imports: bool


class Context(Record):
    FIELDS = {"doc": REQUIRED,
              "options": None,  # None: Options()
              "consumer": None,  # resolved consumer for deepspeed-family rules
              "consumer_reason": "",  # why that consumer was assumed (shown in output)
              "related": dict,  # e.g. {"deepspeed": Doc}
              "findings": list,
              # checks a rule could not run for lack of information: {"file", "check", "reason", "option"}
              "skipped": list,
              "_rule": None}
    doc: Doc
    options: Options
    consumer: Optional[str]
    consumer_reason: str
    related: Dict[str, Doc]
    findings: List[Finding]
    skipped: List[Dict[str, str]]
    _rule: Optional[Rule]

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if self.options is None:
            self.options = Options()

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
        FAMILY_LOADER(family, ctx.doc, ctx.consumer, ctx.options)
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
