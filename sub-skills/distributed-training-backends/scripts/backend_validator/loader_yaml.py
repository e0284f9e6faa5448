"""Bounded, safe YAML loading into a :class:`core.Doc` with source positions.

The document is built from PyYAML's *event* stream (``yaml.parse``), never
from ``yaml.load``: no object is ever constructed for a tag, the build is
iterative (no recursion, so 10,000-deep nesting cannot overflow the stack),
aliases are expanded against a node budget (alias bombs stop early), and
duplicate keys are recorded with both lines. The resulting values are the
ones ``yaml.safe_load`` (what accelerate uses) would produce for the same
text: YAML 1.1 implicit resolution, merge keys, standard ``!!`` tags.
"""
from __future__ import annotations

import datetime

from . import pyyaml

from .core import (MAX_INPUT_BYTES, YAML_MAX_DEPTH, YAML_MAX_NODES, YAML_PURE_PYTHON_LIMIT, Doc, Finding, InputError,
                   ScalarInfo, decode_input)

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Dict, List, Optional, Tuple

# Limits (also stated in --help; defined in core.py, which --help reads without importing PyYAML).
MAX_BYTES = MAX_INPUT_BYTES
MAX_DEPTH = YAML_MAX_DEPTH
MAX_NODES = YAML_MAX_NODES
PURE_PYTHON_LIMIT = YAML_PURE_PYTHON_LIMIT
# PyYAML's loading half (pyyaml.py: its own modules, without the dumping half and the libyaml binding);
# larger input goes to libyaml's CSafeLoader from the yaml package itself (_parser_for)
Y = pyyaml.loading()

TAG_PREFIX = "tag:yaml.org,2002:"
SAFE_SCALAR_TAGS = {TAG_PREFIX + t for t in ("null", "bool", "int", "float", "str", "timestamp", "binary")}
SAFE_SEQ_TAGS = {TAG_PREFIX + t for t in ("seq", "omap", "pairs")}
SAFE_MAP_TAGS = {TAG_PREFIX + t for t in ("map", "set")}

_resolver = Y.Resolver()
_constructor = Y.SafeConstructor()


def _parser_for(text: str) -> Tuple[Any, Any]:
    """(namespace of the event and error classes, event generator) for text: PyYAML's pure-Python
    SafeLoader, as yaml.safe_load uses, up to PURE_PYTHON_LIMIT; libyaml above it where available."""
    if len(text) <= PURE_PYTHON_LIMIT:
        return Y, pyyaml.events_of(Y.SafeLoader)
    yaml = pyyaml.real()
    return yaml, pyyaml.events_of(getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def decode_bytes(raw: bytes, name: str) -> str:
    """Kept for callers of the loader API: see :func:`core.decode_input`."""
    return decode_input(raw)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(TAG_PREFIX):] if tag.startswith(TAG_PREFIX) else tag


def _construct_scalar(value: str, tag: str) -> Any:
    node = Y.ScalarNode(tag, value)
    obj = _constructor.construct_object(node, deep=True)
    _constructor.constructed_objects.clear()
    _constructor.recursive_objects.clear()
    if isinstance(obj, (datetime.date, datetime.datetime)):
        return value  # safe_load would give a date object; keep the text
    if isinstance(obj, bytes):
        return value
    return obj


class _Frame:
    __slots__ = ("kind", "path", "value", "key", "key_mark", "expect_key", "anchor", "size",
                 "merges", "explicit", "key_lines", "tag", "key_is_merge", "start")

    def __init__(self, kind: str, path: Tuple[Any, ...], anchor: Optional[str], tag: str) -> None:
        self.kind = kind  # "map" | "seq"
        self.path = path
        self.value: Any = {} if kind == "map" else []
        self.key: Any = None
        self.key_mark: Optional[Tuple[int, int]] = None
        self.expect_key = kind == "map"
        self.anchor = anchor
        self.size = 1
        self.merges: List[Tuple[Any, Tuple[int, int]]] = []
        self.explicit: List[Any] = []
        self.key_lines: Dict[Any, int] = {}
        self.tag = tag
        self.key_is_merge = False
        self.start = (1, 1)


def load_text(text: str, name: str, source_path: Optional[str] = None) -> Doc:
    """Parse YAML text into a Doc; InputError for anything fatal."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise InputError(f"input is larger than the {MAX_BYTES // (1024 * 1024)} MiB input limit")
    positions: Dict[Tuple[Any, ...], Tuple[int, int]] = {(): (1, 1)}
    scalars: Dict[Tuple[Any, ...], ScalarInfo] = {}
    findings: List[Finding] = []
    anchors: Dict[str, Tuple[Any, int]] = {}
    stack: List[_Frame] = []
    documents = 0
    root: Any = None
    have_root = False
    total = 0

    def mark(ev) -> Tuple[int, int]:
        m = ev.start_mark
        return (m.line + 1, m.column + 1)

    def add_finding(rule: str, severity: str, message: str, hint: str, path, pos) -> None:
        findings.append(Finding(rule=rule, severity=severity, message=message, hint=hint,
                                path=tuple(path), line=pos[0], col=pos[1], file=name))

    def child_path() -> Tuple[Any, ...]:
        if not stack:
            return ()
        top = stack[-1]
        if top.kind == "map":
            return top.path + (top.key,)
        return top.path + (len(top.value),)

    def attach(value: Any, size: int, pos: Tuple[int, int], *, is_merge_source: bool = False) -> None:
        nonlocal root, have_root, total
        total += size
        if total > MAX_NODES:
            raise InputError(f"more than {MAX_NODES} nodes after alias expansion (alias bomb?)")
        if not stack:
            root, have_root = value, True
            return
        top = stack[-1]
        top.size += size
        if top.kind == "seq":
            positions.setdefault(top.path + (len(top.value),), pos)
            top.value.append(value)
            return
        if top.expect_key:
            if isinstance(value, (dict, list)):
                raise InputError(f"line {pos[0]}: a mapping or sequence used as a mapping key "
                                 "(safe_load rejects unhashable keys)")
            top.key, top.key_mark, top.expect_key = value, pos, False
            return
        key = top.key
        top.expect_key = True
        if isinstance(key, str) and key == "<<" and top.key_is_merge:
            top.merges.append((value, top.key_mark))
            return
        if key in top.key_lines:
            first = top.key_lines[key]
            if top.value.get(key) == value and type(top.value.get(key)) is type(value):
                add_finding("yaml-duplicate-key-same-value", "info",
                            f"key {key!r} is given twice with the same value (lines {first} and "
                            f"{top.key_mark[0]})", "remove the repeated entry", top.path + (key,), top.key_mark)
            else:
                add_finding("yaml-duplicate-key", "error",
                            f"duplicate key {key!r} with different values (first on line {first}, again on line "
                            f"{top.key_mark[0]}); safe_load silently keeps only the last value",
                            "keep one entry with the value you mean", top.path + (key,), top.key_mark)
        top.key_lines[key] = top.key_mark[0]
        positions[top.path + (key,)] = top.key_mark
        top.value[key] = value
        top.explicit.append(key)

    E, parse = _parser_for(text)  # E: the event and error classes of the parser that runs
    try:
        events = parse(text)
        for ev in events:
            if isinstance(ev, E.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise InputError("more than one YAML document ('---'); accelerate's safe_load expects one")
                continue
            if isinstance(ev, (E.StreamStartEvent, E.StreamEndEvent, E.DocumentEndEvent)):
                continue
            if isinstance(ev, E.AliasEvent):
                if ev.anchor not in anchors:
                    raise InputError(f"line {mark(ev)[0]}: alias *{ev.anchor} refers to an anchor that is not "
                                     "complete yet (recursive or undefined)")
                val, size = anchors[ev.anchor]
                attach(val, size, mark(ev))
                continue
            if isinstance(ev, E.ScalarEvent):
                tag = ev.tag
                pos = mark(ev)
                is_key = bool(stack) and stack[-1].kind == "map" and stack[-1].expect_key
                if tag is None or tag == "!":
                    tag = _resolver.resolve(Y.ScalarNode, ev.value, ev.implicit)
                path = child_path() if not is_key else None
                if tag not in SAFE_SCALAR_TAGS and tag != TAG_PREFIX + "merge":
                    add_finding("yaml-unsafe-tag", "error",
                                f"tag {_short_tag(tag)} would make safe_load fail (it constructs only plain "
                                "types); the value was not constructed",
                                "remove the tag; write the plain value", path or child_path(), pos)
                    value: Any = ev.value
                elif tag == TAG_PREFIX + "merge":
                    value = "<<"
                else:
                    try:
                        value = _construct_scalar(ev.value, tag)
                    except (Y.YAMLError, ValueError, TypeError, OverflowError) as e:
                        add_finding("yaml-unsafe-tag", "error",
                                    f"value {ev.value!r} cannot be read as {_short_tag(tag)}: "
                                    f"{str(e).splitlines()[0][:120]}",
                                    "fix the value or drop the explicit tag", path or child_path(), pos)
                        value = ev.value
                if is_key:
                    stack[-1].key_is_merge = (tag == TAG_PREFIX + "merge")
                else:
                    style = ev.style if ev.style else None
                    scalars[path] = ScalarInfo(raw=ev.value, style=style,
                                               tag=(ev.tag if ev.tag not in (None, "!") else None))
                if ev.anchor:
                    anchors[ev.anchor] = (value, 1)
                attach(value, 1, pos)
                continue
            if isinstance(ev, (E.MappingStartEvent, E.SequenceStartEvent)):
                kind = "map" if isinstance(ev, E.MappingStartEvent) else "seq"
                pos = mark(ev)
                if stack and stack[-1].kind == "map" and stack[-1].expect_key:
                    raise InputError(f"line {pos[0]}: a mapping or sequence used as a mapping key "
                                     "(safe_load rejects unhashable keys)")
                if len(stack) >= MAX_DEPTH:
                    raise InputError(f"nesting deeper than {MAX_DEPTH} levels (line {pos[0]})")
                tag = ev.tag if ev.tag not in (None, "!") else TAG_PREFIX + kind
                path = child_path()
                if (kind == "map" and tag not in SAFE_MAP_TAGS) or (kind == "seq" and tag not in SAFE_SEQ_TAGS):
                    add_finding("yaml-unsafe-tag", "error",
                                f"tag {_short_tag(tag)} would make safe_load fail (it constructs only plain "
                                "types); the object was not constructed",
                                "remove the tag", path, pos)
                fr = _Frame(kind, path, ev.anchor, tag)
                fr.start = pos
                stack.append(fr)
                continue
            if isinstance(ev, (E.MappingEndEvent, E.SequenceEndEvent)):
                fr = stack.pop()
                value = fr.value
                if fr.kind == "map" and fr.merges:
                    value = _apply_merges(fr, value, positions)
                if fr.anchor:
                    anchors[fr.anchor] = (value, fr.size)
                attach(value, fr.size, fr.start)
                continue
    except InputError:
        raise
    except E.MarkedYAMLError as e:
        m = e.problem_mark or e.context_mark
        where = f"line {m.line + 1}, column {m.column + 1}: " if m else ""
        raise InputError(f"invalid YAML: {where}{e.problem or e.context or 'parse error'}") from None
    except E.YAMLError as e:
        raise InputError(f"invalid YAML: {str(e).splitlines()[0] if str(e) else 'parse error'}") from None
    except RecursionError:
        raise InputError(f"nesting too deep to parse (limit {MAX_DEPTH})") from None
    except MemoryError:
        raise InputError("input too large to parse in bounded memory") from None

    if not have_root or root is None:
        raise InputError("empty document: accelerate's safe_load returns None and launch fails "
                         "with AttributeError; write a mapping of config keys")
    if not isinstance(root, dict):
        kind = "a list" if isinstance(root, list) else f"a scalar ({type(root).__name__})"
        raise InputError(f"top level is {kind}, not a mapping of config keys")
    doc = Doc(root, kind="yaml", name=name, text=text, positions=positions, scalars=scalars,
              source_path=source_path)
    doc.parse_findings.extend(findings)
    return doc


def _apply_merges(fr: _Frame, value: Dict[Any, Any], positions) -> Dict[Any, Any]:
    """YAML merge keys (``<<: *base`` / ``<<: [*a, *b]``) as safe_load applies them:
    explicit keys win, earlier merge sources win over later ones."""
    merged: Dict[Any, Any] = {}
    for src, pos in fr.merges:
        sources = src if isinstance(src, list) else [src]
        for s in sources:
            if not isinstance(s, dict):
                raise InputError(f"line {pos[0]}: merge key '<<' needs a mapping or a list of mappings")
            for k, v in s.items():
                if k not in merged:
                    merged[k] = v
                    positions.setdefault(fr.path + (k,), pos)
    for k, v in value.items():
        merged[k] = v
    # safe_load: merged keys come first, explicit keys override
    out = {k: v for k, v in merged.items() if k not in value}
    out.update(value)
    return out
