"""Shared pieces of the name-table generator (maintainer tool, not shipped): entry builder, source
locations, and the AST scan for environment variables read or set by a package.

Every entry is a plain dict with short, stable keys; empty values are left out so the shipped JSON
stays small:  n name, s section, k kind, t type, d default, c choices, w where (package-relative
file:line), l linked names (each "section:name"), o note (our own words), a aliases.
"""
from __future__ import annotations

import ast
import sysconfig
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

SITE = Path(sysconfig.get_paths()["purelib"])


def rel(path) -> str:
    """Package-relative path of a file under site-packages (or the path as given)."""
    p = Path(path).resolve()
    try:
        return p.relative_to(SITE.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def where(path, line: Optional[int]) -> str:
    return f"{rel(path)}:{line}" if line else rel(path)


def default_repr(value) -> str:
    """repr of a default that is stable between runs (no object addresses)."""
    if isinstance(value, type):
        return f"<class {value.__module__}.{value.__qualname__}>"
    if hasattr(value, "value") and type(value).__module__ != "builtins" and hasattr(type(value), "__members__"):
        return repr(value.value)  # an Enum member: its value is what a config file holds
    if isinstance(value, int) and not isinstance(value, bool) and type(value) is not int:
        return repr(int(value))  # int subclasses that print with separators (deepspeed pp_int)
    if isinstance(value, float) and type(value) is not float:
        return repr(float(value))
    if isinstance(value, (set, frozenset)):  # a set's repr order changes between runs
        inner = ", ".join(sorted(map(repr, value)))
        return f"{{{inner}}}" if value else "set()"
    r = repr(value)
    if " at 0x" in r:
        return "computed: " + type(value).__name__
    return r


def entry(section: str, name: str, kind: str, *, type_: str = "", default: Optional[str] = None,
          choices: Optional[Iterable] = None, where_: str = "", links: Iterable[str] = (),
          note: str = "", aliases: Iterable[str] = (), **extra) -> Dict:
    e: Dict = {"n": name, "s": section, "k": kind}
    if type_:
        e["t"] = type_
    if default is not None:
        e["d"] = default
    if choices:
        e["c"] = [str(c) for c in choices]
    if where_:
        e["w"] = where_
    links = sorted(set(links))
    if links:
        e["l"] = links
    aliases = sorted(set(aliases) - {name})
    if aliases:
        e["a"] = aliases
    if note:
        e["o"] = note
    for k, v in extra.items():
        if v not in (None, "", [], {}):
            e[k] = v
    return e


def ann_str(annotation) -> str:
    if annotation is None:
        return ""
    if isinstance(annotation, str):
        return annotation
    s = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    if s:
        return s
    return str(annotation).replace("typing.", "")


# ----------------------------------------------------------------------------------- env scan
ENV_GETTERS = {"get", "getenv", "pop", "setdefault"}
ENV_HELPERS = {"parse_flag_from_env", "parse_choice_from_env", "get_int_from_env", "str_to_bool_env",
               "get_bool_from_env", "_get_env_var", "get_env_var", "_env_flag", "env_flag"}


def _is_environ(node) -> bool:
    """os.environ / environ / os.environ.copy() style expressions."""
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return True
    return isinstance(node, ast.Name) and node.id == "environ"


class _Scope:
    def __init__(self, parent: Optional["_Scope"] = None):
        self.parent = parent
        self.strings: Dict[str, str] = {}

    def lookup(self, name: str) -> Optional[str]:
        s = self
        while s is not None:
            if name in s.strings:
                return s.strings[name]
            s = s.parent
        return None


def _resolve(node, scope: _Scope) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _resolve(node.left, scope), _resolve(node.right, scope)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                r = _resolve(v.value, scope)
                if r is None:
                    return None
                out.append(r)
        return "".join(out)
    if isinstance(node, ast.Name):
        return scope.lookup(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "upper":
        r = _resolve(node.func.value, scope)
        return r.upper() if r is not None else None
    return None


def _kw_default(call):
    """The `default=` keyword of an os.getenv / os.environ.get call, or None."""
    return next((kw.value for kw in call.keywords if kw.arg == "default"), None)


def _const_default(node) -> str:
    if node is None:
        return "None (unset)"
    try:
        return repr(ast.literal_eval(node))
    except Exception:
        return "computed: " + ast.unparse(node)[:60]


def scan_env(files: Iterable[Path]) -> Tuple[List[Dict], List[str]]:
    """Environment variables each file reads or sets, by AST.

    Returns (hits, unresolved): hits are dicts name/op ('read' or 'set')/default/file/line/reader;
    unresolved lists file:line of reads whose name is not a literal the scan can compute.
    """
    hits: List[Dict] = []
    unresolved: List[str] = []
    for f in files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
        except (SyntaxError, UnicodeDecodeError):
            continue
        _scan_tree(tree, f, hits, unresolved)
    return hits, unresolved


def _unit(call, parents) -> str:
    """' (minutes)' when the env read sits inside a timedelta(minutes=...) keyword (a few levels up, through
    int()/float()), so that a default such as DEEPSPEED_TIMEOUT's 10 carries its unit; '' otherwise."""
    node = call
    for _ in range(4):
        parent = parents.get(node)
        if parent is None:
            return ""
        if isinstance(parent, ast.keyword) and isinstance(parents.get(parent), ast.Call):
            fn = parents[parent].func
            fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            return f" ({parent.arg}, timedelta)" if fname == "timedelta" and parent.arg else ""
        node = parent
    return ""


def _scan_tree(tree, f: Path, hits: List[Dict], unresolved: List[str]) -> None:
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def add(name_node, op, default, line, reader, scope):
        name = _resolve(name_node, scope)
        if name is None or not name or not all(ch.isalnum() or ch == "_" for ch in name):
            unresolved.append(f"{rel(f)}:{line}")
            return
        hits.append({"name": name, "op": op, "default": default, "file": f, "line": line, "reader": reader})

    def visit(node, scope: _Scope):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = _Scope(scope)
            for child in node.body:
                visit(child, inner)
            return
        if isinstance(node, ast.Assign):
            val = _resolve(node.value, scope)
            for t in node.targets:
                if isinstance(t, ast.Name) and val is not None:
                    scope.strings[t.id] = val
                if isinstance(t, ast.Name) and "env" in t.id.lower() and isinstance(node.value, ast.Dict):
                    for k in node.value.keys:  # worker_env = {"LOCAL_RANK": ..., ...}
                        if k is not None:
                            add(k, "set", None, node.lineno, "env dict literal", scope)
                if isinstance(t, ast.Subscript):
                    base = t.value
                    is_env_dict = _is_environ(base) or (
                        isinstance(base, ast.Name) and "env" in base.id.lower())
                    if is_env_dict:
                        add(t.slice, "set", None, node.lineno, "assign", scope)
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr in ENV_GETTERS and _is_environ(fn.value) and node.args:
                if fn.attr == "setdefault":
                    add(node.args[0], "set", None, node.lineno, "os.environ.setdefault", scope)
                else:
                    d = node.args[1] if len(node.args) > 1 else _kw_default(node)
                    add(node.args[0], "read", _const_default(d) + _unit(node, parents), node.lineno,
                        f"os.environ.{fn.attr}", scope)
            elif isinstance(fn, ast.Attribute) and fn.attr == "getenv" and node.args:
                # the default may be passed by keyword: os.getenv("DEEPSPEED_TIMEOUT", default=10)
                d = node.args[1] if len(node.args) > 1 else _kw_default(node)
                add(node.args[0], "read", _const_default(d) + _unit(node, parents), node.lineno, "os.getenv", scope)
            elif isinstance(fn, ast.Attribute) and fn.attr == "update" and (
                    _is_environ(fn.value) or (isinstance(fn.value, ast.Name) and "env" in fn.value.id.lower())):
                for kw in node.keywords:
                    if kw.arg:
                        add(ast.Constant(kw.arg), "set", None, node.lineno, "env.update", scope)
                for a in node.args:
                    if isinstance(a, ast.Dict):
                        for k in a.keys:
                            if k is not None:
                                add(k, "set", None, node.lineno, "env.update", scope)
            else:
                fname = fn.id if isinstance(fn, ast.Name) else (fn.attr if isinstance(fn, ast.Attribute) else "")
                if fname in ENV_HELPERS and node.args:
                    first = node.args[0]
                    d = node.args[1] if len(node.args) > 1 else None
                    if d is None:
                        for kw in node.keywords:
                            if kw.arg in ("default", "default_value"):
                                d = kw.value
                    names = first.elts if isinstance(first, (ast.List, ast.Tuple)) else [first]
                    for nm in names:
                        add(nm, "read", _const_default(d) if d is not None else "helper default",
                            node.lineno, fname, scope)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            add(node.slice, "read", "none at this read (os.environ[...])", node.lineno, "os.environ[]", scope)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and _is_environ(node.comparators[0]):
            add(node.left, "read", "presence test", node.lineno, "in os.environ", scope)
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(tree, _Scope())


def env_entries(section: str, hits: List[Dict], version_note: str = "") -> List[Dict]:
    """One entry per variable: reads and sets merged, every location listed (first in `w`)."""
    by: Dict[str, List[Dict]] = {}
    for h in hits:
        by.setdefault(h["name"], []).append(h)
    out = []
    for name in sorted(by):
        hs = sorted(by[name], key=lambda h: (h["op"] != "read", rel(h["file"]), h["line"]))
        reads = [h for h in hs if h["op"] == "read"]
        sets = [h for h in hs if h["op"] == "set"]
        kind = "env var (read)" if reads and not sets else "env var (set)" if sets and not reads else \
            "env var (read and set)"
        defaults = sorted({h["default"] for h in reads if h["default"]})
        locs = [where(h["file"], h["line"]) for h in hs]
        out.append(entry(section, name, kind, default=" | ".join(defaults[:3]) if defaults else None,
                         where_=locs[0], also=locs[1:8] if len(locs) > 1 else None,
                         sets=[where(h["file"], h["line"]) for h in sets][:8] or None))
    return out


def argparse_lines(path: Path) -> Dict[str, int]:
    """Option string -> line of the add_argument call that declares it (AST, no import)."""
    out: Dict[str, int] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    out.setdefault(a.value, node.lineno)
    return out


def class_field_lines(path: Path) -> Dict[Tuple[str, str], int]:
    """(class, field) -> line of its annotated assignment, for dataclasses and pydantic models."""
    out: Dict[Tuple[str, str], int] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            out[(node.name, "")] = node.lineno
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    out[(node.name, st.target.id)] = st.lineno
                elif isinstance(st, ast.Assign):
                    for t in st.targets:
                        if isinstance(t, ast.Name):
                            out.setdefault((node.name, t.id), st.lineno)
    return out


def action_row(action) -> Dict:
    """type / default / choices / nargs of an argparse action, as strings."""
    import argparse
    kind = type(action).__name__
    if isinstance(action, (argparse._StoreTrueAction,)) or kind in ("_StoreTrueAction",):
        t = "flag (store_true)"
    elif isinstance(action, argparse._StoreFalseAction):
        t = "flag (store_false)"
    elif action.nargs == 0:
        t = "flag (const %r)" % (action.const,)
    else:
        t = getattr(action.type, "__name__", "") if action.type else "str"
        if action.nargs not in (None,):
            t += f" nargs={action.nargs}"
    default = action.default
    declared = None
    if isinstance(default, str) and callable(action.type) and action.nargs not in ("*", "+", "..."):
        # argparse passes a string default through type= when the flag is absent
        try:
            default = action.type(default)
            declared = default_repr(action.default)
        except Exception:
            default = action.default
    row = {"type": t, "default": default_repr(default), "choices": list(action.choices or [])}
    if declared is not None and declared != row["default"]:
        row["declared"] = declared
    return row


def enum_choices(annotation) -> list:
    """Accepted values when a type is an Enum or a Literal (also inside Optional/Union)."""
    import enum
    import typing
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    out: list = []
    for a in typing.get_args(annotation):
        for c in enum_choices(a):
            if c not in out:
                out.append(c)
    return out


def parser_actions(parser, lines: Dict, prefer_dash: bool = False):
    """(action, option strings, display name, action_row, source line) for each action but --help.
    The display name is the first long option (with prefer_dash: the first one without "_")."""
    for a in parser._actions:
        if a.dest == "help":
            continue
        opts = a.option_strings
        longs = [o for o in opts if o.startswith("--")]
        first = longs[0] if longs else (opts[0] if opts else a.dest)
        name = next((o for o in longs if "_" not in o), first) if prefer_dash else first
        line = next((lines[o] for o in opts if o in lines), lines.get(a.dest))
        yield a, opts, name, action_row(a), line
