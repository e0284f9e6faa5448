"""A bash subset for batch scripts: split a script into simple commands, expand words in a given
environment, never run anything.

Covered: comments, ``NAME=value`` / ``export`` / ``declare -x`` / ``unset``, quoting (``'...'``,
``"..."``, backslash), backslash-newline continuation, ``$VAR``, ``${VAR}``, ``${VAR:-default}``,
``${VAR:=default}``, ``$((arithmetic))``, command substitution ``$(...)`` / backticks (recognised,
and for the few commands batch scripts use to find hosts — ``hostname``, ``scontrol show
hostnames ... | head -n 1`` — evaluated from the simulated allocation), unquoted word splitting,
``;`` ``&&`` ``||`` ``|`` ``&`` and newlines between commands. Control words (``if``, ``for``,
``while``, ``case``, functions) are read as a straight line of their commands; a here-document is
skipped (its body is data, not commands).

Every character of a value remembers where in the file it was written (an offset, or -1), so a
word built from a variable still points at the file. Unknown values (a variable nobody sets, a
command substitution this module does not evaluate) are kept as markers ``\\x00NAME\\x01`` so
the checks can tell "unknown" from "empty".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple


class ShellError(Exception):
    """The text cannot be split (unterminated quote or substitution)."""


UNKNOWN_RE = re.compile("\x00([^\x00\x01]*)\x01")


def unknown(name: str) -> str:
    # only inert characters inside: word splitting keeps it whole, a shell re-reading it expands nothing
    return "\x00" + re.sub(r"[^A-Za-z0-9_.:/=+,-]+", "_", name.strip()).strip("_")[:80] + "\x01"


def has_unknown(text: str) -> bool:
    return "\x00" in text


def show(text: str) -> str:
    """A value for messages: unknown parts as <NAME>."""
    return UNKNOWN_RE.sub(lambda m: f"<{m.group(1)}>", text)


@dataclass
class PStr:
    """Text with the file offset of each character (-1: not written in the file)."""
    text: str = ""
    pos: List[int] = field(default_factory=list)

    @staticmethod
    def at(text: str, offset: int) -> "PStr":
        return PStr(text, [offset] * len(text))

    @staticmethod
    def span(text: str, start: int) -> "PStr":
        return PStr(text, list(range(start, start + len(text))))

    def __add__(self, o: "PStr") -> "PStr":
        return PStr(self.text + o.text, self.pos + o.pos)

    def first_pos(self) -> int:
        for p in self.pos:
            if p >= 0:
                return p
        return -1

    def sub(self, i: int, j: Optional[int] = None) -> "PStr":
        return PStr(self.text[i:j], self.pos[i:j])


# ---------------------------------------------------------------------------------------------
# lexing: a word is a list of parts (kind, raw text, offset of its first character)
#   kind "u": unquoted raw text (may hold $..., backslashes already resolved into "e" parts)
#   kind "s": literal text (single quotes, or one backslash-escaped character)
#   kind "d": the raw inside of double quotes
@dataclass
class Part:
    kind: str
    text: str
    offs: List[int]  # file offset of each character of text (-1: none)

    @property
    def start(self) -> int:
        return self.offs[0] if self.offs else -1


@dataclass
class Word:
    parts: List[Part]
    start: int

    def literal(self) -> Optional[str]:
        """The word's text when it has no expansion in it, else None."""
        out = []
        for p in self.parts:
            if p.kind == "s":
                out.append(p.text)
            elif "$" in p.text or "`" in p.text:
                return None
            elif p.kind == "d":
                out.append(re.sub(r'\\([\\"$`])', r"\1", p.text))
            else:
                out.append(p.text)
        return "".join(out)

    def raw_head(self) -> str:
        return self.parts[0].text if self.parts and self.parts[0].kind == "u" else ""


@dataclass
class Command:
    words: List[Word]
    line: int  # 1-based line of the first word
    heredoc: bool = False


OPS = (";;", "&&", "||", ";", "|", "&", "(", ")")


def _skip_subst(text: str, i: int, close: str) -> int:
    """i is just after '$(' (close ')') or '`' (close '`'); return the index just after the match."""
    depth = 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            i += 2
            continue
        if close == "`":
            if c == "`":
                return i + 1
            i += 1
            continue
        if c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise ShellError("unterminated single quote inside $(...)")
            i = j + 1
            continue
        if c == '"':
            i = _skip_dq(text, i + 1)
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "(":
            i = _skip_subst(text, i + 2, ")")
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ShellError("unterminated $(...) or backquote")


def _skip_dq(text: str, i: int) -> int:
    """i is just after an opening '"'; return the index just after the closing one."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            i += 2
            continue
        if c == '"':
            return i + 1
        if c == "$" and i + 1 < n and text[i + 1] == "(":
            i = _skip_subst(text, i + 2, ")")
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "{":
            j = text.find("}", i)
            i = j + 1 if j > 0 else n
            continue
        if c == "`":
            i = _skip_subst(text, i + 1, "`")
            continue
        i += 1
    raise ShellError("unterminated double quote")


def lex(text: str, base: Optional[List[int]] = None) -> List[Command]:
    """Split shell text into simple commands. ``base`` maps text offsets to file offsets (for a
    string that is itself a value, e.g. the argument of ``bash -c``); default: identity."""
    cmds: List[Command] = []
    words: List[Word] = []
    parts: Optional[List[Part]] = None
    wstart = 0
    n = len(text)
    i = 0
    pending_heredocs: List[Tuple[str, bool]] = []
    cur_heredoc = False

    def off(k: int) -> int:
        if base is None:
            return k
        return base[k] if 0 <= k < len(base) else -1

    import bisect
    newlines = [m.start() for m in re.finditer("\n", text)]

    def line_of(k: int) -> int:
        return bisect.bisect_left(newlines, k) + 1

    def end_word() -> None:
        nonlocal parts
        if parts is not None:
            words.append(Word(parts, off(wstart)))
            parts = None

    def end_cmd() -> None:
        nonlocal words, cur_heredoc
        end_word()
        if words:
            cmds.append(Command(words, line_of(_first_idx[0]) if _first_idx else 1, cur_heredoc))
        words = []
        cur_heredoc = False
        _first_idx.clear()

    _first_idx: List[int] = []

    def add(kind: str, s: str, start: int) -> None:
        nonlocal parts, wstart
        if parts is None:
            parts, wstart = [], start
            if not words and not _first_idx:
                _first_idx.append(start)
        offs = [off(start + k) for k in range(len(s))]
        if parts and parts[-1].kind == kind == "u":
            parts[-1].text += s
            parts[-1].offs += offs
        else:
            parts.append(Part(kind, s, offs))

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            continue
        if c == "\n":
            end_cmd()
            i += 1
            for delim, strip in pending_heredocs:  # skip the here-document bodies
                while i < n:
                    j = text.find("\n", i)
                    line = text[i:j if j >= 0 else n]
                    i = (j + 1) if j >= 0 else n
                    if (line.lstrip("\t") if strip else line) == delim:
                        break
            pending_heredocs = []
            continue
        if c in " \t\r":
            end_word()
            i += 1
            continue
        if c == "#" and parts is None:
            j = text.find("\n", i)
            i = j if j >= 0 else n
            continue
        if c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise ShellError(f"unterminated single quote at line {line_of(i)}")
            add("s", text[i + 1:j], i + 1)
            i = j + 1
            continue
        if c == '"':
            j = _skip_dq(text, i + 1)
            add("d", text[i + 1:j - 1], i + 1)
            i = j
            continue
        if c == "\\":
            if i + 1 >= n:
                i += 1
                continue
            add("s", text[i + 1], i + 1)
            i += 2
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "(":
            j = _skip_subst(text, i + 2, ")")
            add("u", text[i:j], i)
            i = j
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "{":
            j = text.find("}", i)
            if j < 0:
                raise ShellError(f"unterminated ${{ at line {line_of(i)}")
            add("u", text[i:j + 1], i)
            i = j + 1
            continue
        if c == "`":
            j = _skip_subst(text, i + 1, "`")
            add("u", text[i:j], i)
            i = j
            continue
        if c == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
            end_word()
            k = i + 2
            strip = k < n and text[k] == "-"
            k += 1 if strip else 0
            while k < n and text[k] in " \t":
                k += 1
            m = re.match(r"""(['"]?)([A-Za-z0-9_.-]+)\1""", text[k:])
            if m:
                pending_heredocs.append((m.group(2), strip))
                cur_heredoc = True
                i = k + m.end()
                continue
            i += 2
            continue
        if c in "<>" or (c.isdigit() and parts is None and i + 1 < n and text[i + 1] in "<>"):
            # a redirection: drop it and its target word
            end_word()
            k = i
            while k < n and (text[k] in "<>&|" or text[k].isdigit()) and k - i < 4:
                k += 1
            if text[k - 1] == "&" or text.startswith(">&", k - 2) and k < n and text[k].isdigit():
                while k < n and text[k].isdigit() or (k < n and text[k] == "-"):
                    k += 1
                i = k
                continue
            while k < n and text[k] in " \t":
                k += 1
            # target word
            sub = lex_word_end(text, k)
            i = sub
            continue
        op = next((o for o in OPS if text.startswith(o, i)), None)
        if op is not None and parts is None or op in (";", "&&", "||", "|", "&", ";;") and op is not None:
            end_cmd()
            i += len(op)
            continue
        add("u", c, i)
        i += 1
    end_cmd()
    return cmds


def lex_word_end(text: str, k: int) -> int:
    """Index just after the word that starts at k."""
    n = len(text)
    while k < n and text[k] not in " \t\n;&|()":
        c = text[k]
        if c == "'":
            j = text.find("'", k + 1)
            k = (j + 1) if j >= 0 else n
        elif c == '"':
            k = _skip_dq(text, k + 1)
        elif c == "\\":
            k += 2
        elif c == "$" and text.startswith("$(", k):
            k = _skip_subst(text, k + 2, ")")
        else:
            k += 1
    return k


# ---------------------------------------------------------------------------------------------
# expansion
@dataclass
class Shell:
    """One shell's variables: ``vars`` (name -> PStr), ``exported`` names; ``subst`` evaluates a
    command substitution's text (or returns None for unknown); ``on_var`` is told of each
    variable expansion (name, offset of the reference)."""
    vars: Dict[str, PStr] = field(default_factory=dict)
    exported: set = field(default_factory=set)
    subst: Optional[Callable[[str, "Shell"], Optional[str]]] = None
    on_var: Optional[Callable[[str, int], None]] = None
    unknown_default: bool = True  # an unset variable may come from the submitting environment
    allexport: bool = False
    name: str = "batch"

    def get(self, name: str, ref: int) -> Optional[PStr]:
        if self.on_var is not None:
            self.on_var(name, ref)
        v = self.vars.get(name)
        if v is None:
            return None
        if all(p < 0 for p in v.pos):  # a value nobody wrote in the file: point at the reference
            return PStr.at(v.text, ref)
        return v

    def set(self, name: str, value: PStr, export: bool = False) -> None:
        self.vars[name] = value
        if export or self.allexport:
            self.exported.add(name)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = re.compile(r"[0-9@*#?$!-]")


def _unset(sh: Shell, name: str, ref: int) -> PStr:
    return PStr.at(unknown(name), ref) if sh.unknown_default else PStr()


def _expand_param(sh: Shell, body: str, offs: List[int], ref: int) -> PStr:
    """${...}; body without braces, offs: file offsets of body's characters."""
    m = _NAME.match(body)
    if not m:
        if body.startswith("#") and _NAME.fullmatch(body[1:]):
            v = sh.get(body[1:], ref)
            t = str(len(v.text)) if v is not None and not has_unknown(v.text) else unknown("${" + body + "}")
            return PStr.at(t, ref)
        return PStr.at(unknown("${" + body + "}"), ref)
    name, rest = m.group(0), body[m.end():]
    v = sh.get(name, ref)
    if rest == "":
        return v if v is not None else _unset(sh, name, ref)
    k = m.end()
    for op in (":-", ":=", "-", "="):
        if rest.startswith(op):
            if v is None or (op.startswith(":") and v.text == ""):
                d = expand_text(sh, body[k + len(op):], offs[k + len(op):], dq=True)
                if op.endswith("="):
                    sh.set(name, d)
                return d
            return v
    for op in (":+", "+"):
        if rest.startswith(op):
            if v is not None and (v.text != "" or op == "+"):
                return expand_text(sh, body[k + len(op):], offs[k + len(op):], dq=True)
            return PStr()
    return PStr.at(unknown("${" + body + "}"), ref)


_ARITH_OK = re.compile(r"^[0-9+\-*/%() \t<>=!]*$")


def _arith(sh: Shell, expr: str, ref: int) -> str:
    bad = []

    def var(m: "re.Match[str]") -> str:
        v = sh.get(m.group(1) or m.group(2), ref)
        t = v.text.strip() if v is not None else "0"
        if not re.fullmatch(r"-?\d+", t):
            bad.append(1)
            return "0"
        return t
    e = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?|\b([A-Za-z_][A-Za-z0-9_]*)\b", var, expr)
    if bad or not _ARITH_OK.match(e) or "**" in e or "<<" in e or ">>" in e or len(e) > 200:
        return unknown("$((" + expr + "))")
    try:
        code = compile(e.strip().replace("/", "//"), "<arith>", "eval")  # digits and operators only (_ARITH_OK)
        val = eval(code, {"__builtins__": {}}, {})
        return str(int(val))
    except Exception:  # noqa: BLE001 - anything we cannot compute is unknown
        return unknown("$((" + expr + "))")


def expand_text(sh: Shell, raw: str, offs: List[int], dq: bool) -> PStr:
    """Expand the $-forms of raw text (unquoted or double-quoted content; no word splitting here)."""
    out_t: List[str] = []
    out_p: List[int] = []
    i, n = 0, len(raw)

    def o(k: int) -> int:
        return offs[k] if 0 <= k < len(offs) else -1

    def put(v: PStr) -> None:
        out_t.append(v.text)
        out_p.extend(v.pos)
    while i < n:
        c = raw[i]
        if c == "\\" and dq and i + 1 < n and raw[i + 1] in '\\"$`\n':
            if raw[i + 1] != "\n":
                put(PStr(raw[i + 1], [o(i + 1)]))
            i += 2
            continue
        if c == "$" and raw.startswith("$((", i):
            j = _arith_end(raw, i)
            if j > 0:
                put(PStr.at(_arith(sh, raw[i + 3:j - 2], o(i)), o(i)))
                i = j
                continue
        if c == "$" and raw.startswith("$(", i):
            try:
                j = _skip_subst(raw, i + 2, ")")
            except ShellError:
                j = n + 1
            put(_command_subst(sh, raw[i + 2:j - 1], o(i)))
            i = j
            continue
        if c == "`":
            try:
                j = _skip_subst(raw, i + 1, "`")
            except ShellError:
                j = n + 1
            put(_command_subst(sh, raw[i + 1:j - 1], o(i)))
            i = j
            continue
        if c == "$" and raw.startswith("${", i):
            j = raw.find("}", i)
            if j < 0:
                j = n
            put(_expand_param(sh, raw[i + 2:j], [o(k) for k in range(i + 2, j)], o(i)))
            i = j + 1
            continue
        if c == "$":
            m = _NAME.match(raw, i + 1)
            if m:
                v = sh.get(m.group(0), o(i))
                put(v if v is not None else _unset(sh, m.group(0), o(i)))
                i = m.end()
                continue
            if i + 1 < n and _SPECIAL.match(raw[i + 1]):
                tag = "@" + sh.name if raw[i + 1] in "$!" else ""
                put(PStr.at(unknown("$" + raw[i + 1] + tag), o(i)))
                i += 2
                continue
        put(PStr(c, [o(i)]))
        i += 1
    return PStr("".join(out_t), out_p)


def _arith_end(raw: str, i: int) -> int:
    """End (exclusive) of ``$((...))`` at i when it is arithmetic; -1 when it is a command substitution
    that starts with a subshell, like ``$(((X)) && echo 1 || echo 0)`` (bash decides the same way)."""
    try:
        j = _skip_subst(raw, i + 2, ")")
    except ShellError:
        return -1
    return j if raw[j - 2:j] == "))" and j - 2 >= i + 3 else -1


def _command_subst(sh: Shell, body: str, ref: int) -> PStr:
    val = sh.subst(body, sh) if sh.subst is not None else None
    if val is None:
        val = unknown("$(" + " ".join(body.split())[:60] + ")")
    return PStr.at(val.rstrip("\n"), ref)


def _end_of_expansion(text: str, i: int) -> int:
    n = len(text)
    try:
        if text.startswith("$((", i) and _arith_end(text, i) > 0:
            return _arith_end(text, i)
        if text.startswith("$(", i):
            return _skip_subst(text, i + 2, ")")
        if text[i] == "`":
            return _skip_subst(text, i + 1, "`")
    except ShellError:
        return n
    if text.startswith("${", i):
        j = text.find("}", i)
        return j + 1 if j > 0 else n
    m = _NAME.match(text, i + 1)
    if m:
        return m.end()
    if i + 1 < n and _SPECIAL.match(text[i + 1]):
        return i + 2
    return i + 1


def expand_word(sh: Shell, w: Word, split: bool = True) -> List[PStr]:
    """The fields a shell word becomes: quoted parts stay whole, unquoted expansions are split on
    blanks (IFS default), and a word that expands to nothing unquoted disappears."""
    fields: List[PStr] = []
    cur: Optional[PStr] = None
    quoted = False

    def app(v: PStr) -> None:
        nonlocal cur
        cur = v if cur is None else cur + v
    for p in w.parts:
        if p.kind == "s":
            app(PStr(p.text, list(p.offs)))
            quoted = True
        elif p.kind == "d":
            app(expand_text(sh, p.text, p.offs, dq=True))
            quoted = True
        else:
            i, n, lit = 0, len(p.text), 0
            while i <= n:
                if i < n and p.text[i] not in "$`":
                    i += 1
                    continue
                if i > lit:
                    app(PStr(p.text[lit:i], p.offs[lit:i]))
                if i == n:
                    break
                j = _end_of_expansion(p.text, i)
                v = expand_text(sh, p.text[i:j], p.offs[i:j], dq=False)
                if not split:
                    app(v)
                else:
                    for k, m in enumerate(re.finditer(r"[^ \t\n]+", v.text)):
                        piece = v.sub(m.start(), m.end())
                        if k == 0 and m.start() == 0:
                            app(piece)
                        else:
                            if cur is not None:
                                fields.append(cur)
                            cur = piece
                    if v.text and v.text[-1] in " \t\n" and cur is not None:
                        fields.append(cur)
                        cur = None
                i = lit = j
    if cur is not None:
        fields.append(cur)
    elif quoted and not fields:
        fields.append(PStr())
    return fields


def assignment(w: Word) -> Optional[Tuple[str, Word]]:
    """NAME=value as the word is written: (NAME, value word), else None."""
    if not w.parts or w.parts[0].kind != "u":
        return None
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\+?=", w.parts[0].text)
    if not m:
        return None
    p0 = w.parts[0]
    first = Part("u", p0.text[m.end():], p0.offs[m.end():])
    rest = ([first] if first.text else []) + w.parts[1:]
    return m.group(1), Word(rest, first.start if first.offs else (w.parts[1].start if len(w.parts) > 1 else -1))


def expand_assignment_value(sh: Shell, w: Word) -> PStr:
    """An assignment's value: expanded, not split."""
    out = PStr()
    for p in w.parts:
        if p.kind == "s":
            out = out + PStr(p.text, list(p.offs))
        else:
            out = out + expand_text(sh, p.text, p.offs, dq=(p.kind == "d"))
    return out
