"""deepspeed sections: DeepSpeed JSON keys (pydantic config models + KEY/KEY_DEFAULT constant reads),
the `deepspeed` launcher flags and the environment variables deepspeed reads or sets."""
from __future__ import annotations

import ast
import importlib
import inspect
import sys
import typing
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from _fx_common import (SITE, enum_choices, argparse_lines, ann_str, class_field_lines, default_repr, entry,
                        env_entries, parser_actions, scan_env, where)

PKG = SITE / "deepspeed"
RUNNER_PY = PKG / "launcher" / "runner.py"

# top-level JSON key -> (module, pydantic model) that validates the table under it
MODELS = [
    ("zero_optimization", "deepspeed.runtime.zero.config", "DeepSpeedZeroConfig"),
    ("bf16", "deepspeed.runtime.precision_config", "DeepSpeedBF16Config"),
    ("fp16", "deepspeed.runtime.precision_config", "DeepSpeedFP16Config"),
    ("tensorboard", "deepspeed.monitor.config", "TensorBoardConfig"),
    ("wandb", "deepspeed.monitor.config", "WandbConfig"),
    ("csv_monitor", "deepspeed.monitor.config", "CSVConfig"),
    ("comet", "deepspeed.monitor.config", "CometConfig"),
    ("comms_logger", "deepspeed.comm.config", "CommsLoggerConfig"),
    ("compile", "deepspeed.compile.config", "CompileConfig"),
    ("hybrid_engine", "deepspeed.runtime.config", "HybridEngineConfig"),
    ("tensor_parallel", "deepspeed.runtime.tensor_parallel.config", "TPTrainingConfig"),
    ("timers.throughput", "deepspeed.utils.config", "DeepSpeedThroughputTimerConfig"),
]
READERS = {"get_scalar_param", "get_list_param", "get_dict_param"}
SCAN_DIRS = ["runtime", "profiling", "monitor", "utils", "comm", "compression", "elasticity", "autotuning",
             "nebula", "checkpoint"]


def _submodels(annotation):
    from pydantic import BaseModel
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for a in typing.get_args(annotation):
        m = _submodels(a)
        if m is not None:
            return m
    return None


def _model_rows(path: str, model, seen) -> List[Dict]:
    from pydantic_core import PydanticUndefined
    src = Path(inspect.getsourcefile(model))
    lines = class_field_lines(src)
    out = []
    for fname, fi in model.model_fields.items():
        key = fi.alias or fname
        full = f"{path}.{key}"
        if fi.default is not PydanticUndefined:
            d = default_repr(fi.default)
        elif fi.default_factory is not None:
            try:
                val = fi.default_factory()
                d = "{}" if hasattr(val, "model_fields") else default_repr(val)
            except Exception:
                d = "computed: default_factory"
        else:
            d = "required"
        extra = fi.json_schema_extra if isinstance(fi.json_schema_extra, dict) else {}
        owner = next((c.__name__ for c in model.__mro__ if (c.__name__, fname) in lines), model.__name__)
        kind = "json key (deprecated)" if extra.get("deprecated") else "json key"
        links = []
        if extra.get("new_param"):
            links.append(f"deepspeed-config:{path}.{extra['new_param']}")
        aliases = [f"{path}.{fname}"] if fi.alias and fi.alias != fname else []
        out.append(entry("deepspeed-config", full, kind, type_=ann_str(fi.annotation), default=d,
                         choices=enum_choices(fi.annotation),
                         where_=where(src, lines.get((owner, fname))), links=links, aliases=aliases,
                         model=model.__name__, new_param=extra.get("new_param")))
        sub = _submodels(fi.annotation)
        if sub is not None and (full, sub) not in seen:
            seen.add((full, sub))
            out.extend(_model_rows(full, sub, seen))
    return out


def _whole_json_callees() -> set:
    """Functions and classes DeepSpeedConfig (runtime/config.py) calls with the whole JSON dict: their
    first parameter is the top level of the config."""
    tree = ast.parse((PKG / "runtime" / "config.py").read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            a = node.args[0]
            whole = (isinstance(a, ast.Name) and a.id == "param_dict") or (
                isinstance(a, ast.Attribute) and a.attr == "_param_dict")
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if whole and name:
                out.add(name)
    return out


def _first_param(fn) -> str:
    params = [a.arg for a in fn.args.args if a.arg != "self"]
    return params[0] if params else ""


def _const_rows() -> List[Dict]:
    out: List[Dict] = []
    whole = _whole_json_callees()
    files = []
    for d in SCAN_DIRS:
        files += sorted((PKG / d).rglob("*.py")) if (PKG / d).is_dir() else []
    for f in files:
        text = f.read_text(encoding="utf-8")
        if not any(r in text for r in READERS):
            continue
        modname = ".".join(f.relative_to(SITE).with_suffix("").parts)
        try:
            mod = importlib.import_module(modname)
        except Exception:
            continue
        tree = ast.parse(text)
        top_level_ok = f == PKG / "runtime" / "config.py"
        # a method that receives a sub-table from a sibling: self._initialize(sub_dict) in __init__
        bound: Dict[str, List[str]] = {}
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
            methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
            for m in methods.values():
                tl = top_level_ok
                seed = {_first_param(m): []} if m.name == "__init__" and cls.name in whole else {}
                par = _assigned_parents(m, mod, seed, tl)
                for node in ast.walk(m):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                            and node.func.attr in methods and node.args:
                        p = _parent(node.args[0], mod, par, tl)
                        callee = methods[node.func.attr]
                        params = [a.arg for a in callee.args.args if a.arg != "self"]
                        if p is not None and params:
                            bound[f"{cls.name}.{callee.name}:{params[0]}"] = p
        for cls_name, fn in _functions(tree):
            seed = {k.split(":")[1]: v for k, v in bound.items() if k.split(":")[0] == f"{cls_name}.{fn.name}"}
            if (not cls_name and fn.name in whole) or (fn.name == "__init__" and cls_name in whole):
                seed[_first_param(fn)] = []  # called with the whole JSON by DeepSpeedConfig
            tl = top_level_ok
            parents = _assigned_parents(fn, mod, seed, tl)
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in READERS
                        and len(node.args) >= 3):
                    continue
                key = _const(node.args[1], mod)
                if not isinstance(key, str):
                    continue
                dflt = _const(node.args[2], mod, missing="computed: " + ast.unparse(node.args[2])[:50])
                par = _parent(node.args[0], mod, parents, tl)
                path = ".".join(par + [key]) if par is not None else key
                out.append(entry("deepspeed-config", path, "json key (constant read)" if par is not None
                                 else "json key (constant read; parent table not resolved)",
                                 default=dflt if isinstance(dflt, str) and dflt.startswith("computed") else default_repr(dflt),
                                 where_=where(f, node.lineno), const=ast.unparse(node.args[1])))
            if top_level_ok:
                out += _direct_reads(fn, mod, parents, f)
    return out


def _direct_reads(fn, mod, parents, f) -> List[Dict]:
    """Keys runtime/config.py reads straight from the JSON dict (param_dict[K], param_dict.get(K, d),
    K in param_dict) rather than through get_*_param: optimizer, scheduler, bfloat16, ..."""
    out: List[Dict] = []
    for node in ast.walk(fn):
        path, dflt = None, "none at this read (KEY in / [KEY])"
        if isinstance(node, (ast.Subscript, ast.Call)):
            path = _parent(node, mod, parents, True)
            if isinstance(node, ast.Call) and path is not None and len(node.args) > 1:
                d = _const(node.args[1], mod, missing="computed: " + ast.unparse(node.args[1])[:50])
                dflt = d if isinstance(d, str) and d.startswith("computed") else default_repr(d)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
            base = _parent(node.comparators[0], mod, parents, True)
            k = _const(node.left, mod)
            path = base + [k] if base is not None and isinstance(k, str) else None
        if path:
            out.append(entry("deepspeed-config", ".".join(path), "json key (read directly)", default=dflt,
                             where_=where(f, node.lineno)))
    return out


def _const(node, mod, missing=None):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and hasattr(mod, node.id):
        return getattr(mod, node.id)
    if isinstance(node, ast.Attribute):
        try:
            return eval(ast.unparse(node), vars(mod))  # constants module attribute, e.g. C.KEY
        except Exception:
            return missing
    return missing


def _functions(tree):
    """(enclosing class name or '', function) for every function of a module."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.append(("", node))
        elif isinstance(node, ast.ClassDef):
            out += [(node.name, m) for m in node.body if isinstance(m, ast.FunctionDef)]
    return out


def _assigned_parents(fn, mod, seed, top_level_ok) -> Dict[str, List[str]]:
    parents = dict(seed)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            p = _parent(node.value, mod, parents, top_level_ok)
            if p is not None:
                parents[node.targets[0].id] = p
    return parents


def _parent(node, mod, parents, top_level_ok=False) -> Optional[List[str]]:
    """Key path of a dict expression: param_dict (the whole JSON, only where runtime/config.py reads it),
    a variable bound to a sub-table, or X[KEY] / X.get(KEY, ...) of one of those."""
    if isinstance(node, ast.Name):
        if node.id in parents:
            return parents[node.id]
        return [] if top_level_ok and node.id == "param_dict" else None
    if isinstance(node, ast.Attribute) and node.attr == "_param_dict" and top_level_ok:
        return []
    if isinstance(node, ast.Subscript):
        base = _parent(node.value, mod, parents, top_level_ok)
        k = _const(node.slice, mod)
        return base + [k] if base is not None and isinstance(k, str) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        base = _parent(node.func.value, mod, parents, top_level_ok)
        k = _const(node.args[0], mod)
        return base + [k] if base is not None and isinstance(k, str) else None
    return None


def config_section() -> List[Dict]:
    rows: List[Dict] = []
    seen = set()
    for top, modname, cls in MODELS:
        model = getattr(importlib.import_module(modname), cls)
        src = Path(inspect.getsourcefile(model))
        rows.append(entry("deepspeed-config", top, "json key (table)", type_="object", default="{}",
                          where_=where(src, class_field_lines(src).get((cls, ""))), model=cls))
        rows.extend(_model_rows(top, model, seen))
    names = {r["n"] for r in rows}
    for r in _const_rows():
        if r["n"] not in names:
            names.add(r["n"])
            rows.append(r)
    leaves = {n.rsplit(".", 1)[-1] for n in names}
    for r in _constant_pairs():
        if r["n"] not in leaves:
            leaves.add(r["n"])
            rows.append(r)
    return rows


PAIR_MODULES = ["runtime/constants.py", "runtime/swap_tensor/constants.py", "runtime/data_pipeline/constants.py",
                "runtime/activation_checkpointing/config.py", "runtime/model_checkpointing/constants.py",
                "profiling/constants.py", "autotuning/constants.py", "comm/constants.py"]


def _constant_pairs() -> List[Dict]:
    """KEY = "name" / KEY_DEFAULT = value pairs of the constants modules whose key no model or
    get_*_param read above covers (read some other way; the table they sit in is not resolved)."""
    out = []
    for rel_path in PAIR_MODULES:
        f = PKG / rel_path
        tree = ast.parse(f.read_text(encoding="utf-8"))
        consts = {n.targets[0].id: n for n in tree.body
                  if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
        for name, node in consts.items():
            dflt = consts.get(name + "_DEFAULT")
            if dflt is None or not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                continue
            try:
                d = repr(ast.literal_eval(dflt.value))
            except Exception:
                d = "computed: " + ast.unparse(dflt.value)[:50]
            out.append(entry("deepspeed-config", node.value.value,
                             "json key (constant pair only; parent table not resolved)", default=d,
                             where_=where(f, node.lineno), const=name))
    return out


def launcher_section() -> List[Dict]:
    # the launcher builds its parser inside parse_args; tests/launch/_parser_tables.py captures it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))
    from _parser_tables import deepspeed_parser
    parser = deepspeed_parser()
    lines = argparse_lines(RUNNER_PY)
    out = []
    for a, opts, name, row, line in parser_actions(parser, lines):
        out.append(entry("deepspeed-launcher", name, "launch flag" if opts else "positional", type_=row["type"],
                         default=row["default"], choices=row["choices"], declared_default=row.get("declared"), where_=where(RUNNER_PY, line),
                         aliases=opts, dest=a.dest))
    return out


def env_section() -> Tuple[List[Dict], List[str]]:
    files = sorted(p for p in PKG.rglob("*.py") if "csrc" not in p.parts)
    hits, unresolved = scan_env(files)
    return env_entries("deepspeed-env", hits), unresolved
