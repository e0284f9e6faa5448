"""transformers sections: every TrainingArguments field of the installed version, the fsdp_config keys
and fsdp options it accepts, and the 4.57.1 -> installed diff (4.57.1 read by AST from its wheel)."""
from __future__ import annotations

import ast
import typing
import dataclasses
import zipfile
from typing import Dict, List, Optional

from _fx_common import SITE, enum_choices, ann_str, class_field_lines, default_repr, entry, where

TA_PY = SITE / "transformers" / "training_args.py"
TA_MEMBER = "transformers/training_args.py"


def _fsdp_config_keys(tree) -> Dict[str, tuple]:
    """fsdp_config key -> (default repr, line) from .get/[]/setdefault on a name or attribute fsdp_config."""
    out: Dict[str, tuple] = {}

    def is_cfg(node):
        return (isinstance(node, ast.Attribute) and node.attr == "fsdp_config") or \
            (isinstance(node, ast.Name) and node.id == "fsdp_config")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_cfg(node.func.value) \
                and node.func.attr in ("get", "setdefault", "pop") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            d = "None (unset)"
            if len(node.args) > 1:
                try:
                    d = repr(ast.literal_eval(node.args[1]))
                except Exception:
                    d = "computed: " + ast.unparse(node.args[1])[:50]
            k = node.args[0].value
            if k not in out or out[k][0] == "None (unset)":
                out[k] = (d, node.lineno)
        elif isinstance(node, ast.Subscript) and is_cfg(node.value) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            out.setdefault(node.slice.value, ("None (unset)", node.lineno))
    return {k: v for k, v in out.items() if not k.startswith("fsdp_")}


def trainer_section() -> List[Dict]:
    from transformers import TrainingArguments
    from transformers.trainer_utils import FSDPOption

    lines = class_field_lines(TA_PY)
    out = []
    for f in dataclasses.fields(TrainingArguments):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            d = default_repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            d = default_repr(f.default_factory())
        else:
            d = "required"
        ch = f.metadata.get("choices") if f.metadata else None
        if not ch:
            try:
                ch = enum_choices(typing.get_type_hints(TrainingArguments).get(f.name, f.type))
            except Exception:
                ch = None
        note = ""
        if f.name == "fsdp":
            ch = [o.value for o in FSDPOption]
            note = ("choices are the FSDPOption values of the space-separated string form, which this version "
                    "warns is deprecated; __post_init__ also takes True, with the options in fsdp_config")
        out.append(entry("trainer-args", f.name, "TrainingArguments field", type_=ann_str(f.type), default=d,
                         choices=ch, where_=where(TA_PY, lines.get(("TrainingArguments", f.name))), note=note,
                         aliases=[f"TrainingArguments.{f.name}"]))
    tree = ast.parse(TA_PY.read_text(encoding="utf-8"))
    for k, (d, line) in sorted(_fsdp_config_keys(tree).items()):
        out.append(entry("trainer-args", f"fsdp_config.{k}", "fsdp_config key (TrainingArguments)", default=d,
                         where_=where(TA_PY, line), aliases=[f"fsdp_config.fsdp_{k}"],
                         note="a key written with the fsdp_ prefix is accepted: __post_init__ strips it"))
    return out


def fields_from_source(text: str) -> Dict[str, Dict]:
    """TrainingArguments fields by AST: name -> {type, default, line, choices}."""
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TrainingArguments")
    out: Dict[str, Dict] = {}
    for st in cls.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
            continue
        d: Optional[str] = "required"
        choices = None
        v = st.value
        if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "field":
            init = True
            for kw in v.keywords:
                if kw.arg == "default":
                    d = _lit(kw.value)
                elif kw.arg == "default_factory":
                    d = "computed: " + ast.unparse(kw.value)[:60]
                elif kw.arg == "init":
                    init = not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
                elif kw.arg == "metadata" and isinstance(kw.value, ast.Dict):
                    for mk, mv in zip(kw.value.keys, kw.value.values):
                        if isinstance(mk, ast.Constant) and mk.value == "choices":
                            try:
                                choices = [str(c) for c in ast.literal_eval(mv)]
                            except Exception:
                                choices = None
            if not init:
                continue
        elif v is not None:
            d = _lit(v)
        out[st.target.id] = {"type": ast.unparse(st.annotation), "default": d, "line": st.lineno,
                             "choices": choices}
    return out


def _lit(node) -> str:
    try:
        return repr(ast.literal_eval(node))
    except Exception:
        return "computed: " + ast.unparse(node)[:60]


def diff_section(wheel: str) -> List[Dict]:
    with zipfile.ZipFile(wheel) as z:
        old = fields_from_source(z.read(TA_MEMBER).decode("utf-8"))
    new = fields_from_source(TA_PY.read_text(encoding="utf-8"))
    out = []
    for name in sorted(set(old) | set(new)):
        o, n = old.get(name), new.get(name)
        if o and not n:
            out.append(entry("transformers-4-to-5", name, "TrainingArguments field removed in 5.x",
                             default=o["default"], where_=f"transformers-4.57.1/{TA_MEMBER}:{o['line']}",
                             old_default=o["default"],
                             note="not a TrainingArguments field in 5.x: passing it there is a TypeError"))
        elif n and not o:
            out.append(entry("transformers-4-to-5", name, "TrainingArguments field added in 5.x",
                             default=n["default"], where_=where(TA_PY, n["line"]),
                             links=[f"trainer-args:{name}"]))
        elif o["default"] != n["default"]:
            out.append(entry("transformers-4-to-5", name, "TrainingArguments default changed in 5.x",
                             default=n["default"], where_=where(TA_PY, n["line"]), old_default=o["default"],
                             links=[f"trainer-args:{name}"]))
    return out
