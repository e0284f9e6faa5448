"""JSON / HJSON loader with source positions (standard library only).

DeepSpeed reads a config *file* with ``hjson.load(..., object_pairs_hook=
dict_raise_error_on_duplicate_keys)`` (``deepspeed/runtime/config.py::
DeepSpeedConfig.__init__``), so comments, trailing commas, unquoted keys,
single-quoted and quoteless strings pass there, while Accelerate
(``accelerate/utils/deepspeed.py::HfDeepSpeedConfig``) and the Transformers
Trainer read the same file with strict ``json.load``.

This parser accepts the union, keeps the *strict JSON* value of every scalar in
``Doc.data`` (``1e3`` is the float 1000.0, as ``json.load`` gives it), and
records every lenient feature used in ``Doc.lenient_features`` as
``(kind, line, col)`` so that rules can tell a strict consumer that it will
fail. Kinds: ``comment``, ``trailing-comma``, ``missing-comma``,
``unquoted-key``, ``single-quoted-string``, ``quoteless-string``,
``multiline-string``, ``root-braces-omitted``, ``nan-infinity`` (accepted by
``json.load`` but not by hjson), ``bom``.

The raw source text of every scalar is kept in ``Doc.scalars`` (a
:class:`core.ScalarInfo` with ``style`` ``'"'`` / ``"'"`` for strings and
``None`` for bare tokens), so that rules can see how a number was written
(hjson turns ``1e3`` and ``1000.0`` into the int 1000).

Limits (fatal, raise :class:`core.InputError`): ``MAX_BYTES`` of input,
``MAX_DEPTH`` levels of nesting (depth-bounded recursion, so 10,000-deep input
fails fast instead of overflowing the stack), no NUL bytes, UTF-8 only,
non-empty, object at top level.
"""
from __future__ import annotations

import bisect
import os
import re

from .core import JSON_DUPLICATE_RULE, MAX_INPUT_BYTES, Doc, Finding, InputError, ScalarInfo, decode_input, read_input_file

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Dict, List, Optional, Tuple

MAX_BYTES = MAX_INPUT_BYTES
MAX_DEPTH = 100  # nesting levels (objects + arrays)
DUPLICATE_RULE = JSON_DUPLICATE_RULE

_WS = re.compile(r"[ \t\r\n]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STR_CHUNK = re.compile(r'[^"\\\x00-\x1f]*')
_SQ_CHUNK = re.compile(r"[^'\\\x00-\x1f]*")
_UNQUOTED_KEY = re.compile(r"[^\s,:\[\]{}\"']+")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
            "'": "'"}
# A bare token is a number/keyword only when followed by one of these (hjson rule);
# otherwise hjson reads the rest of the line as a quoteless string.
_TOKEN_END = set(" \t\r\n,]}#/")


class _Parser:
    def __init__(self, text: str, name: str) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0
        self.name = name
        self.positions: Dict[tuple, Tuple[int, int]] = {}
        self.scalars: Dict[tuple, ScalarInfo] = {}
        self.lenient: List[Tuple[str, int, int]] = []
        self.findings: List[Finding] = []
        self._nl = [m.start() for m in re.finditer("\n", text)]

    # -- positions -------------------------------------------------------
    def lc(self, i: int) -> Tuple[int, int]:
        k = bisect.bisect_left(self._nl, i)
        line_start = self._nl[k - 1] + 1 if k > 0 else 0
        return k + 1, i - line_start + 1

    def fail(self, msg: str, i: Optional[int] = None) -> "InputError":
        line, col = self.lc(self.i if i is None else i)
        # the message can quote input characters (an escape followed by a newline): keep it one line
        msg = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in msg)
        return InputError(f"malformed JSON at line {line}, column {col}: {msg}")

    def feature(self, kind: str, i: int) -> None:
        line, col = self.lc(i)
        self.lenient.append((kind, line, col))

    # -- lexical -----------------------------------------------------------
    def skip(self) -> None:
        s, n = self.s, self.n
        while True:
            self.i = _WS.match(s, self.i).end()
            if self.i >= n:
                return
            c = s[self.i]
            if c == "#" or s.startswith("//", self.i):
                self.feature("comment", self.i)
                j = s.find("\n", self.i)
                self.i = n if j < 0 else j + 1
            elif s.startswith("/*", self.i):
                self.feature("comment", self.i)
                j = s.find("*/", self.i + 2)
                if j < 0:
                    raise self.fail("unterminated /* comment")
                self.i = j + 2
            else:
                return

    def _newline_between(self, a: int, b: int) -> bool:
        return "\n" in self.s[a:b]

    def string(self, quote: str) -> str:
        s = self.s
        start = self.i
        if quote == "'" and s.startswith("'''", self.i):
            return self.multiline()
        self.i += 1
        chunk = _STR_CHUNK if quote == '"' else _SQ_CHUNK
        parts: List[str] = []
        while True:
            m = chunk.match(s, self.i)
            parts.append(m.group())
            self.i = m.end()
            if self.i >= self.n:
                raise self.fail("unterminated string", start)
            c = s[self.i]
            if c == quote:
                self.i += 1
                return "".join(parts)
            if c == "\\":
                if self.i + 1 >= self.n:
                    raise self.fail("unterminated string", start)
                e = s[self.i + 1]
                if e == "u":
                    hx = s[self.i + 2:self.i + 6]
                    if len(hx) != 4 or not all(ch in "0123456789abcdefABCDEF" for ch in hx):
                        raise self.fail("invalid \\u escape")
                    cp = int(hx, 16)
                    self.i += 6
                    if 0xD800 <= cp < 0xDC00 and s.startswith("\\u", self.i):
                        hx2 = s[self.i + 2:self.i + 6]
                        if len(hx2) == 4 and all(ch in "0123456789abcdefABCDEF" for ch in hx2):
                            lo = int(hx2, 16)
                            if 0xDC00 <= lo < 0xE000:
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                                self.i += 6
                    parts.append(chr(cp) if not 0xD800 <= cp < 0xE000 else "\ufffd")
                    continue
                if e not in _ESCAPES or (e == "'" and quote == '"'):
                    raise self.fail(f"invalid escape \\{e}")
                parts.append(_ESCAPES[e])
                self.i += 2
                continue
            raise self.fail("control character in string")

    def multiline(self) -> str:
        start = self.i
        self.feature("multiline-string", start)
        j = self.s.find("'''", self.i + 3)
        if j < 0:
            raise self.fail("unterminated ''' string", start)
        body = self.s[self.i + 3:j]
        indent = self.lc(start)[1] - 1
        self.i = j + 3
        # hjson: drop the first line break, strip up to the opening column's indentation
        # from each line, drop the final line break
        lines = body.split("\n")
        if len(lines) > 1 and not lines[0].strip():
            lines = lines[1:]
        out = [lines[0]] + [ln[min(indent, len(ln) - len(ln.lstrip(" "))):] for ln in lines[1:]]
        text = "\n".join(out)
        return text[:-1] if text.endswith("\n") else text

    # -- values ------------------------------------------------------------
    def value(self, path: tuple, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise InputError(f"nesting deeper than {MAX_DEPTH} levels (line {self.lc(self.i)[0]})")
        self.skip()
        if self.i >= self.n:
            raise self.fail("unexpected end of input, expected a value")
        c = self.s[self.i]
        if c == "{":
            return self.obj(path, depth)
        if c == "[":
            return self.arr(path, depth)
        start = self.i
        if c == '"' or c == "'":
            if c == "'" and not self.s.startswith("'''", start):
                self.feature("single-quoted-string", start)
            v = self.string(c)
            self.scalars[path] = ScalarInfo(raw=v, style=c, tag=None)
            return v
        return self.bare(path)

    def _token_ends(self, j: int) -> bool:
        if j >= self.n:
            return True
        c = self.s[j]
        if c == "/":
            return self.s.startswith("//", j) or self.s.startswith("/*", j)
        return c in _TOKEN_END

    def bare(self, path: tuple) -> Any:
        s, start = self.s, self.i
        c = s[start]
        if c in ",:]}":
            raise self.fail(f"unexpected {c!r}, expected a value")
        m = _NUMBER.match(s, start)
        if m and self._token_ends(m.end()):
            raw = m.group()
            self.i = m.end()
            self.scalars[path] = ScalarInfo(raw=raw, style=None, tag=None)
            if "." in raw or "e" in raw or "E" in raw:
                return float(raw)
            try:
                return int(raw)
            except ValueError:  # longer than sys.get_int_max_str_digits() (4300 by default)
                raise InputError(f"integer of {len(raw)} digits at line {self.lc(start)[0]}: longer than Python "
                                 "converts (and than any config value)") from None
        for word, val in (("true", True), ("false", False), ("null", None),
                          ("NaN", float("nan")), ("Infinity", float("inf")),
                          ("-Infinity", float("-inf"))):
            if s.startswith(word, start) and self._token_ends(start + len(word)):
                self.i = start + len(word)
                if word in ("NaN", "Infinity", "-Infinity"):
                    self.feature("nan-infinity", start)
                self.scalars[path] = ScalarInfo(raw=word, style=None, tag=None)
                return val
        # hjson quoteless string: the rest of the line, trimmed.
        j = s.find("\n", start)
        j = self.n if j < 0 else j
        v = s[start:j].strip()
        self.feature("quoteless-string", start)
        self.i = j
        self.scalars[path] = ScalarInfo(raw=v, style=None, tag=None)
        return v

    def key(self) -> Tuple[str, int]:
        start = self.i
        c = self.s[start]
        if c == '"':
            return self.string('"'), start
        if c == "'":
            self.feature("single-quoted-string", start)
            return self.string("'"), start
        m = _UNQUOTED_KEY.match(self.s, start)
        if not m:
            raise self.fail(f"unexpected {c!r}, expected a key")
        self.feature("unquoted-key", start)
        self.i = m.end()
        return m.group(), start

    def members(self, path: tuple, depth: int, close: Optional[str]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        seen: Dict[str, int] = {}
        need_sep = False
        last_end = self.i
        while True:
            self.skip()
            if self.i >= self.n:
                if close is None:
                    return out
                raise self.fail("unexpected end of input, expected '}'")
            c = self.s[self.i]
            if close is not None and c == close:
                self.i += 1
                return out
            if c == ",":
                if not need_sep:
                    raise self.fail("unexpected ','")
                comma = self.i
                self.i += 1
                self.skip()
                if self.i < self.n and close is not None and self.s[self.i] == close:
                    self.feature("trailing-comma", comma)
                    self.i += 1
                    return out
                if self.i >= self.n and close is None:
                    self.feature("trailing-comma", comma)
                    return out
                need_sep = False
                continue
            if need_sep:
                if not self._newline_between(last_end, self.i):
                    raise self.fail("expected ',' or '}'" if close else "expected ','")
                self.feature("missing-comma", self.i)
            k, kpos = self.key()
            self.skip()
            if self.i >= self.n or self.s[self.i] != ":":
                raise self.fail(f"expected ':' after key {k!r}")
            self.i += 1
            kp = path + (k,)
            line, col = self.lc(kpos)
            if k in seen:
                self.findings.append(Finding(
                    rule=DUPLICATE_RULE, severity="error",
                    message=f"duplicate key {k!r} at line {line} (first at line {seen[k]}); "
                            "deepspeed's hjson loader raises, json.load keeps the last value",
                    hint="keep one of the two entries", path=kp, line=line, col=col, file=self.name))
                self._forget(kp)
            seen[k] = line
            self.positions[kp] = (line, col)
            out[k] = self.value(kp, depth + 1)
            last_end = self.i
            need_sep = True

    def _forget(self, prefix: tuple) -> None:
        n = len(prefix)
        for d in (self.positions, self.scalars):
            for p in [p for p in d if p[:n] == prefix]:
                del d[p]

    def obj(self, path: tuple, depth: int) -> Dict[str, Any]:
        self.i += 1
        return self.members(path, depth, "}")

    def arr(self, path: tuple, depth: int) -> List[Any]:
        self.i += 1
        out: List[Any] = []
        need_sep = False
        last_end = self.i
        while True:
            self.skip()
            if self.i >= self.n:
                raise self.fail("unexpected end of input, expected ']'")
            c = self.s[self.i]
            if c == "]":
                self.i += 1
                return out
            if c == ",":
                if not need_sep:
                    raise self.fail("unexpected ','")
                comma = self.i
                self.i += 1
                self.skip()
                if self.i < self.n and self.s[self.i] == "]":
                    self.feature("trailing-comma", comma)
                    self.i += 1
                    return out
                need_sep = False
                continue
            if need_sep:
                if not self._newline_between(last_end, self.i):
                    raise self.fail("expected ',' or ']'")
                self.feature("missing-comma", self.i)
            ip = path + (len(out),)
            self.positions[ip] = self.lc(self.i)
            out.append(self.value(ip, depth + 1))
            last_end = self.i
            need_sep = True

    def document(self) -> Any:
        self.skip()
        if self.i >= self.n:
            raise InputError("empty document (no JSON value)")
        self.positions[()] = self.lc(self.i)
        c = self.s[self.i]
        if c == "{":
            data = self.obj((), 1)
        elif c == "[" or c in '"\'' or _NUMBER.match(self.s, self.i) or \
                any(self.s.startswith(w, self.i) for w in ("true", "false", "null")):
            data = self.value((), 1)
        else:
            # hjson allows the braces of the root object to be omitted.
            m = _UNQUOTED_KEY.match(self.s, self.i)
            j = _WS.match(self.s, m.end()).end() if m else self.i
            if m and j < self.n and self.s[j] == ":":
                self.feature("root-braces-omitted", self.i)
                data = self.members((), 1, None)
            else:
                data = self.value((), 1)
        self.skip()
        if self.i < self.n:
            raise self.fail("extra data after the JSON value")
        return data


def _kind(v: Any) -> str:
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "null"
    return f"a {type(v).__name__} scalar"


def load_text(text: str, name: str, source_path: Optional[str] = None) -> Doc:
    """Parse ``text`` (JSON or HJSON) into a :class:`Doc`; raise InputError on fatal problems."""
    if not isinstance(text, str):
        raise InputError("input is not text")
    if len(text) > MAX_BYTES:
        raise InputError(f"input larger than {MAX_BYTES // (1024 * 1024)} MiB")
    if "\x00" in text:
        raise InputError("binary input (NUL byte) is not a JSON document")
    lenient_bom = text.startswith("\ufeff")
    p = _Parser(text[1:] if lenient_bom else text, name)
    if lenient_bom:
        p.lenient.append(("bom", 1, 1))
    if not text.strip():
        raise InputError("empty document (no JSON value)")
    data = p.document()
    if not isinstance(data, dict):
        raise InputError(f"top level is {_kind(data)}, expected a JSON object")
    doc = Doc(data, kind="json", name=name, text=text, positions=p.positions,
              scalars=p.scalars, source_path=source_path)
    doc.parse_findings.extend(p.findings)
    doc.lenient_features.extend(p.lenient)
    return doc


def decode(raw: bytes) -> str:
    """Decode file bytes (see :func:`core.decode_input`; a BOM is kept and judged per consumer)."""
    return decode_input(raw)


def load_path(path: str, name: Optional[str] = None) -> Doc:
    """Read and parse a file; InputError when unreadable (missing, directory, too large ...)."""
    return load_text(read_input_file(path), name or path, source_path=path)
