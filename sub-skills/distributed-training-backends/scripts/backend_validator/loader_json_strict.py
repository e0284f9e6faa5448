"""Strict-JSON fast path in front of loader_json.py (standard library only).

Most DeepSpeed files are plain strict JSON. For those, ``json.load``'s own C scanner (the ``_json``
module, without importing the ``json`` package) gives exactly the ``Doc.data`` that the
position-tracking parser in loader_json.py gives, and such a file has no lenient features and no
parse findings. loader_json.py (the densest module to compile: about a tenth of the validator's start
when no bytecode is cached, benchmarks/bench_validator.py) is then imported only when a rule asks
where something is (``Doc.positions`` / ``Doc.pos``) or how a scalar was written (``Doc.scalars``):
:class:`StrictJsonDoc` parses the text again with loader_json.py on that first access.

Anything else goes to loader_json.py at once: a BOM, a NUL byte, NaN/Infinity, a ``\\u`` escape
(loader_json.py turns a lone surrogate into U+FFFD), a duplicate key, more than ``_MAX_BRACKETS``
brackets (so nesting stays far below loader_json.MAX_DEPTH), a top level that is not an object, any
HJSON feature or syntax error (then its message is loader_json.py's). tests/validator_ds/
test_json_loader.py checks that both paths give the same document.
"""
from __future__ import annotations

from .core import MAX_INPUT_BYTES, Doc

if False:  # pragma: no cover - annotations only; importing typing costs start time (bench_validator.py)
    from typing import Any, Optional

_MAX_BRACKETS = 50  # '{' + '[' characters anywhere in the text (loader_json.MAX_DEPTH is 100)
_WS = " \t\r\n"  # JSON whitespace (the same as loader_json._WS)


class _NotStrict(Exception):
    """The text needs loader_json.py."""


def _pairs(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _NotStrict  # duplicate key: loader_json reports it (json-duplicate-key)
    return d


def _constant(name):
    raise _NotStrict  # NaN / Infinity / -Infinity: loader_json records the lenient feature


class _Context:
    """The attributes json.scanner.c_make_scanner reads from a JSONDecoder."""
    strict = True
    object_hook = None
    object_pairs_hook = staticmethod(_pairs)
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)


_scanner = None


def _scan(text: str) -> Any:
    """The strict JSON object in text, or _NotStrict."""
    global _scanner
    if _scanner is None:
        try:
            from _json import make_scanner
        except ImportError:  # no C accelerator (another interpreter): always the full parser
            raise _NotStrict from None
        _scanner = make_scanner(_Context())
    if (len(text) > MAX_INPUT_BYTES or "\x00" in text or "\\u" in text or text.startswith("\ufeff")
            or text.count("{") + text.count("[") > _MAX_BRACKETS):
        raise _NotStrict
    start = len(text) - len(text.lstrip(_WS))
    if not text.startswith("{", start):
        raise _NotStrict
    try:
        data, end = _scanner(text, start)
    except _NotStrict:
        raise
    except Exception:  # syntax error, HJSON feature, number too long, ...: loader_json decides
        raise _NotStrict from None
    if text[end:].strip(_WS):
        raise _NotStrict
    return data


class StrictJsonDoc(Doc):
    """A Doc of strict JSON text whose positions and scalars come from loader_json.py on first use."""

    def __init__(self, data: Any, text: str, name: str, source_path: Optional[str]) -> None:
        self._set = {}
        Doc.__init__(self, data, kind="json", name=name, text=text, source_path=source_path)
        self._set.clear()  # Doc.__init__ assigned the empty defaults

    def _full(self, attr: str) -> Any:
        if attr not in self._set:
            from .loader_json import load_text
            full = load_text(self.text, self.name, source_path=self.source_path)
            self._set.setdefault("positions", full.positions)
            self._set.setdefault("scalars", full.scalars)
        return self._set[attr]

    positions = property(lambda self: self._full("positions"),
                         lambda self, v: self._set.__setitem__("positions", v))
    scalars = property(lambda self: self._full("scalars"),
                       lambda self, v: self._set.__setitem__("scalars", v))


def load_text(text: str, name: str, source_path: Optional[str] = None) -> Doc:
    """loader_json.load_text, without importing loader_json.py for strict JSON (module docstring)."""
    if isinstance(text, str):
        try:
            return StrictJsonDoc(_scan(text), text, name, source_path)
        except _NotStrict:
            pass
    from .loader_json import load_text as full
    return full(text, name, source_path=source_path)
