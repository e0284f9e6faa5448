"""Split a shell command line with positions, and parse it the way argparse would.

Only the standard library: the shell words come from a small POSIX splitter that also
records where each word starts (line and column in the command text), so findings can point
at a flag. The parser follows Python's argparse for the tables in flags.py: long options with
``=value`` or a separate value, unique-prefix abbreviations (allow_abbrev), short options with
an attached value (``-t3``), the first positional word ends the launcher's options (everything
after it is the script's), typed values, choices, store_true, append.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .flags import ALLOW_ABBREV, TABLES


class CommandError(Exception):
    """The command text itself cannot be split (unterminated quote) or names no launcher."""


@dataclass(frozen=True)
class Word:
    text: str
    index: int  # position in the word list
    line: int  # 1-based line of the word's first character in the command text
    col: int  # 1-based column


def split_words(command: str) -> List[Word]:
    """POSIX shell word splitting (quotes, backslash escapes, backslash-newline continuation),
    like shlex.split, keeping where each word starts."""
    words: List[Word] = []
    i, n = 0, len(command)
    line, col = 1, 1
    buf: Optional[List[str]] = None
    start = (1, 1)

    def adv(ch: str) -> None:
        nonlocal line, col
        if ch == "\n":
            line, col = line + 1, 1
        else:
            col += 1

    while i < n:
        ch = command[i]
        if ch == "\\" and i + 1 < n and command[i + 1] == "\n":  # line continuation
            adv(ch)
            adv("\n")
            i += 2
            continue
        if ch in " \t\r\n":
            if buf is not None:
                words.append(Word("".join(buf), len(words), *start))
                buf = None
            adv(ch)
            i += 1
            continue
        if buf is None:
            buf, start = [], (line, col)
        if ch == "'":
            j = command.find("'", i + 1)
            if j < 0:
                raise CommandError(f"unterminated single quote at line {line} column {col}")
            for c in command[i:j + 1]:
                adv(c)
            buf.append(command[i + 1:j])
            i = j + 1
        elif ch == '"':
            q = (line, col)
            adv(ch)
            i += 1
            while True:
                if i >= n:
                    raise CommandError(f"unterminated double quote at line {q[0]} column {q[1]}")
                c = command[i]
                if c == '"':
                    adv(c)
                    i += 1
                    break
                if c == "\\" and i + 1 < n and command[i + 1] in '"\\$`\n':
                    if command[i + 1] != "\n":
                        buf.append(command[i + 1])
                    adv(c)
                    adv(command[i + 1])
                    i += 2
                    continue
                buf.append(c)
                adv(c)
                i += 1
        elif ch == "\\":
            if i + 1 >= n:
                raise CommandError("command ends with a lone backslash")
            buf.append(command[i + 1])
            adv(ch)
            adv(command[i + 1])
            i += 2
        else:
            buf.append(ch)
            adv(ch)
            i += 1
    if buf is not None:
        words.append(Word("".join(buf), len(words), *start))
    return words


# ---------------------------------------------------------------------------------------------
TRUE_WORDS = ("y", "yes", "t", "true", "on", "1")  # accelerate/utils/environment.py::str_to_bool
FALSE_WORDS = ("n", "no", "f", "false", "off", "0")


def _str_to_bool(v: str) -> int:
    s = v.lower()
    if s in TRUE_WORDS:
        return 1
    if s in FALSE_WORDS:
        return 0
    raise ValueError(f"invalid truth value {v}")


def convert(type_name: Optional[str], text: str) -> Any:
    """The value argparse stores for ``text`` with this type; ValueError/TypeError as argparse sees."""
    if type_name in (None, "str"):
        return text
    if type_name == "int":
        return int(text)
    if type_name == "float":
        return float(text)
    if type_name == "bool":
        return bool(text)  # argparse type=bool: any non-empty text is True
    if type_name == "str_to_bool":
        return _str_to_bool(text)
    if type_name == "bool_tuple":
        return tuple(_str_to_bool(x) for x in text.split(","))
    if type_name == "comma_list":
        return [x for x in text.split(",") if x] if text else []
    raise ValueError(f"unknown type {type_name}")


@dataclass(frozen=True)
class Action:
    options: Tuple[str, ...]
    dest: str
    kind: str
    type: Optional[str]
    default: Any
    choices: Optional[Tuple[Any, ...]]
    const: Any


def actions_of(launcher: str) -> List[Action]:
    return [Action(*row) for row in TABLES[launcher]]


@dataclass
class Given:
    """One option as written: the word(s) it came from and the value argparse stored."""
    dest: str
    option: str  # the option string as typed (maybe abbreviated)
    canonical: str  # the option it resolved to
    word: Word
    raw: Optional[str]  # value text, None for store_true
    value: Any


@dataclass
class Parsed:
    launcher: str
    values: Dict[str, Any] = field(default_factory=dict)  # every dest: given or default
    given: Dict[str, List[Given]] = field(default_factory=dict)  # dest -> every time it was given
    script: Optional[Word] = None
    script_args: List[Word] = field(default_factory=list)
    error: Optional[str] = None  # what argparse would exit with (status 2)
    error_word: Optional[Word] = None
    abbreviations: List[Given] = field(default_factory=list)

    @property
    def nondefault(self) -> Set[str]:
        return set(self.given)

    def last(self, dest: str) -> Optional[Given]:
        g = self.given.get(dest)
        return g[-1] if g else None


_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _is_option_like(text: str) -> bool:
    """argparse treats a word as an option (not a value) when it starts with '-' and is not a
    negative number, a lone '-', or a word with a space."""
    if not text or text[0] != "-" or text == "-":
        return False
    if _NEG_NUMBER.match(text):
        return False
    if " " in text:
        return False
    return True


def parse(launcher: str, words: Sequence[Word], env: Optional[Dict[str, str]] = None) -> Parsed:
    """Parse the words after the launcher name. torchrun defaults come from PET_<DEST> in env."""
    acts = actions_of(launcher)
    env = env or {}
    res = Parsed(launcher)
    by_opt: Dict[str, Action] = {}
    positionals = [a for a in acts if not a.options]
    for a in acts:
        for o in a.options:
            by_opt[o] = a
        if a.options:
            default = a.default
            if launcher == "torchrun" and a.kind in ("store", "store_true") and f"PET_{a.dest.upper()}" in env:
                raw = env[f"PET_{a.dest.upper()}"]
                if a.kind == "store_true":
                    try:
                        default = bool(int(raw))
                    except ValueError:
                        res.error = f"PET_{a.dest.upper()}={raw!r}: invalid literal for int()"
                else:
                    default = raw  # argparse converts a string default through type= when unused
                    try:
                        default = convert(a.type, raw)
                    except (ValueError, TypeError):
                        res.error = f"argument {a.options[0]}: invalid {a.type} value: {raw!r} (from PET_{a.dest.upper()})"
            elif isinstance(default, str) and a.type not in (None, "str") and a.kind == "store":
                try:  # argparse applies type= to a string default
                    default = convert(a.type, default)
                except (ValueError, TypeError):
                    pass
            if isinstance(default, list) and a.type == "bool_tuple":
                default = tuple(default)
            res.values.setdefault(a.dest, default)
    longs = [o for o in by_opt if o.startswith("--")]
    abbrev = ALLOW_ABBREV.get(launcher, True)

    def fail(msg: str, w: Optional[Word]) -> Parsed:
        if res.error is None:
            res.error, res.error_word = msg, w
        return res

    # argparse collects unknown option words (they take no value) and reports them only after the
    # required-positional check, so a missing SCRIPT wins over them (set-5 s5-acl-01)
    unknown: List[Word] = []
    i = 0
    while i < len(words):
        w = words[i]
        t = w.text
        if t == "--":
            i += 1
            if i < len(words):
                res.script = words[i]
                res.script_args = list(words[i + 1:])
            break
        if not _is_option_like(t):
            res.script = w
            res.script_args = list(words[i + 1:])
            break
        explicit: Optional[str] = None
        action: Optional[Action] = None
        name = t
        if t.startswith("--"):
            name, eq, val = t.partition("=")
            explicit = val if eq else None
            if name in by_opt:
                action = by_opt[name]
            elif abbrev:
                cands = [o for o in longs if o.startswith(name)]
                if len(cands) == 1:
                    action = by_opt[cands[0]]
                elif len(cands) > 1:  # argparse: even two spellings of one option are ambiguous
                    return fail(f"ambiguous option: {name} could match {', '.join(sorted(cands))}", w)
        else:
            if t in by_opt:
                action = by_opt[t]
            elif "=" in t and t.split("=", 1)[0] in by_opt:
                name, _, explicit = t.partition("=")
                action = by_opt[name]
            elif t[:2] in by_opt:
                name = t[:2]
                action = by_opt[name]
                explicit = t[2:]
        if action is None:
            unknown.append(w)
            i += 1
            continue
        canonical = action.options[0]
        if action.kind == "help":
            return fail("--help prints the usage and exits (nothing is launched)", w)
        if action.kind in ("store_true", "store_const"):
            if explicit is not None and not (not t.startswith("--") and explicit == ""):
                if not t.startswith("--") and explicit and ("-" + explicit[0]) in by_opt:
                    # combined short flags (-qm): each letter is its own flag
                    for ch in explicit:
                        a2 = by_opt.get("-" + ch)
                        if a2 is None or a2.kind not in ("store_true", "store_const"):
                            return fail(f"unrecognized arguments: {t}", w)
                        res.values[a2.dest] = True if a2.kind == "store_true" else a2.const
                        res.given.setdefault(a2.dest, []).append(
                            Given(a2.dest, "-" + ch, a2.options[0], w, None, res.values[a2.dest]))
                else:
                    return fail(f"argument {name}: ignored explicit argument {explicit!r}", w)
            value = True if action.kind == "store_true" else action.const
            res.values[action.dest] = value
            g = Given(action.dest, name, canonical, w, None, value)
            res.given.setdefault(action.dest, []).append(g)
            if name not in action.options:
                res.abbreviations.append(g)
            i += 1
            continue
        # an option that takes one value
        if explicit is None:
            if i + 1 >= len(words) or _is_option_like(words[i + 1].text):
                return fail(f"argument {'/'.join(action.options)}: expected one argument", w)
            raw = words[i + 1].text
            i += 2
        else:
            raw = explicit
            i += 1
        try:
            value = convert(action.type, raw)
        except (ValueError, TypeError):
            return fail(f"argument {'/'.join(action.options)}: invalid {action.type} value: {raw!r}", w)
        if action.choices is not None and value not in action.choices:
            return fail(f"argument {'/'.join(action.options)}: invalid choice: {value!r} (choose from "
                        f"{', '.join(map(repr, action.choices))})", w)
        if action.kind == "append":
            cur = res.values.get(action.dest)
            res.values[action.dest] = (list(cur) if isinstance(cur, list) else []) + [value]
        else:
            res.values[action.dest] = value
        g = Given(action.dest, name, canonical, w, raw, value)
        res.given.setdefault(action.dest, []).append(g)
        if name not in action.options:
            res.abbreviations.append(g)
    if res.script is None and res.error is None:
        need = ", ".join(p.dest for p in positionals) if positionals else "script"
        return fail(f"the following arguments are required: {need}", None)
    if unknown:
        fail("unrecognized arguments: " + " ".join(u.text for u in unknown), unknown[0])
    if positionals:
        res.values[positionals[0].dest] = res.script.text if res.script else None
        if len(positionals) > 1:
            res.values[positionals[1].dest] = [x.text for x in res.script_args]
    return res
