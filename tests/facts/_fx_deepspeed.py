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
    ("weight_quantization", "deepspeed.inference.config", "WeightQuantConfig"),
]
READERS = {"get_scalar_param", "get_list_param", "get_dict_param"}
SCAN_DIRS = ["runtime", "profiling", "monitor", "utils", "comm", "compression", "elasticity", "autotuning",
             "nebula", "checkpoint", "datastates"]


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


# (file, qualified function name) -> key path of the dict its first parameter holds; filled by
# _const_rows by following calls from DeepSpeedConfig (see there). GETTERS: functions that return a
# sub-table of their first parameter (get_checkpoint_params -> ["checkpoint"]).
GETTERS: Dict[Tuple[str, str], List[str]] = {}
# DeepSpeedConfig.__init__(config, ...): config is the JSON dict (or a path, then loaded into
# self._param_dict); `"sequence_parallel_size" in config` is read there before _initialize_params.
COPIES = {"copy.copy", "copy.deepcopy", "dict", "copy", "deepcopy"}
ROOT_PARAMS = {("runtime/config.py", "DeepSpeedConfig.__init__"): "config"}


def _target(func, mod, cls_name, methods) -> Optional[Tuple[str, str]]:
    """(file, qualname) of the function or class a call expression names, when it is defined in a
    scanned deepspeed module: a module-level name (defined or imported), or self.method."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return (methods[func.attr], f"{cls_name}.{func.attr}") if cls_name and func.attr in methods else None
    if not isinstance(func, ast.Name):
        return None
    obj = getattr(mod, func.id, None)
    if obj is None or not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return None
    try:
        src = Path(inspect.getsourcefile(obj)).resolve().relative_to(PKG.resolve()).as_posix()
    except (TypeError, ValueError):
        return None
    return (src, obj.__qualname__ + (".__init__" if inspect.isclass(obj) else ""))


def _record_key_args(call, target, fns, mod, key_args) -> None:
    """Constant arguments one call passes to the callee's parameters (a key name and its default
    handed down: get_communication_data_type(param_dict, SEQ_PARALLEL_COMMUNICATION_DATA_TYPE, ...))."""
    fn = fns[target][0]
    params = [a.arg for a in fn.args.args if a.arg != "self"]
    site = {}
    for name, a in list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]:
        v = _const(a, mod, missing=_MISSING)
        if v is not _MISSING and name != params[0]:
            site[name] = v
    key_args.setdefault(target, []).append(site)


_MISSING = object()


def _dict_loops(fn, mod) -> Dict[str, Tuple[List[Tuple[str, object]], str]]:
    """`for key, default in CONST_DICT.items():` loops of a function: key variable -> (the constant
    dict's (key, default) pairs, the default variable), e.g. autotuning's MODEL_INFO_KEY_DEFAULT_DICT."""
    out = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2 \
                and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute) \
                and node.iter.func.attr == "items" and all(isinstance(e, ast.Name) for e in node.target.elts):
            d = _const(node.iter.func.value, mod)
            if isinstance(d, dict) and all(isinstance(k, str) for k in d):
                out[node.target.elts[0].id] = (sorted(d.items()), node.target.elts[1].id)
    return out


def _scan_files():
    """(file, module, tree) of every module under SCAN_DIRS that reads config keys."""
    out = []
    for d in SCAN_DIRS:
        for f in sorted((PKG / d).rglob("*.py")) if (PKG / d).is_dir() else []:
            text = f.read_text(encoding="utf-8")
            if not (any(r in text for r in READERS) or "param_dict" in text):
                continue
            modname = ".".join(f.relative_to(SITE).with_suffix("").parts)
            try:
                mod = importlib.import_module(modname)
            except Exception:
                continue
            out.append((f, mod, ast.parse(text)))
    return out


def _const_rows() -> List[Dict]:
    """Keys read through get_*_param and direct dict reads, each with its full dotted path where the
    table it is read from can be traced: from DeepSpeedConfig (runtime/config.py), every call whose
    first argument is a known table (the whole JSON, param_dict[K], a getter's result, a variable bound
    to one of those) seeds the callee's first parameter with that path, across modules and
    self.method calls, until nothing new is found."""
    out: List[Dict] = []
    files = _scan_files()
    fns: Dict[Tuple[str, str], Tuple] = {}  # (file, qualname) -> (fn node, module, Path, class name, methods)
    for f, mod, tree in files:
        r = f.relative_to(PKG).as_posix()
        for cls_name, fn in _functions(tree):
            methods = {}
            if cls_name:
                cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
                methods = {m.name: r for m in cls.body if isinstance(m, ast.FunctionDef)}
            fns[(r, f"{cls_name}.{fn.name}" if cls_name else fn.name)] = (fn, mod, f, cls_name, methods)
    # getters: `return <sub-table of the first parameter>`
    GETTERS.clear()
    for key, (fn, mod, f, cls_name, methods) in fns.items():
        p0 = _first_param(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None and p0:
                path = _parent(node.value, mod, {p0: []})
                if path:
                    GETTERS[key] = path
    seeds: Dict[Tuple[str, str], set] = {}
    cfg = PKG / "runtime" / "config.py"
    cfg_mod = next(m for f, m, _ in files if f == cfg)
    for name in sorted(_whole_json_callees()):
        t = _target(ast.Name(id=name), cfg_mod, "", {})
        if t in fns:
            seeds.setdefault(t, set()).add(())
    for (r, qn), param in ROOT_PARAMS.items():
        seeds.setdefault((r, qn), set()).add(())
    key_args: Dict[Tuple[str, str], List[Dict]] = {}  # callee -> one {parameter: constant} per call site
    defaults: Dict[Tuple[str, str], Dict] = {}  # parameter defaults: def f(d, comm_type=KEY, ...)
    for key, (fn, mod, *_rest) in fns.items():
        a = fn.args
        for arg, d in zip(a.args[len(a.args) - len(a.defaults):], a.defaults):
            v = _const(d, mod, missing=_MISSING)
            if v is not _MISSING:
                defaults.setdefault(key, {})[arg.arg] = v
    work = sorted(seeds)
    while work:
        key = work.pop()
        fn, mod, f, cls_name, methods = fns[key]
        for path in sorted(seeds[key]):
            param = ROOT_PARAMS.get(key) or _first_param(fn)
            parents = _assigned_parents(fn, mod, {param: list(path)}, f == cfg)
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and node.args):
                    continue
                a = node.args[0].value if isinstance(node.args[0], ast.Starred) else node.args[0]
                p = _parent(a, mod, parents, f == cfg)
                t = _target(node.func, mod, cls_name, methods)
                if p is None or t not in fns:
                    continue
                _record_key_args(node, t, fns, mod, key_args)
                if tuple(p) in seeds.get(t, ()):
                    continue
                seeds.setdefault(t, set()).add(tuple(p))
                work.append(t)
    for key in sorted(fns):
        fn, mod, f, cls_name, methods = fns[key]
        tl = f == cfg
        for path in sorted(seeds.get(key, ())) or [None]:
            seed = {} if path is None else {ROOT_PARAMS.get(key) or _first_param(fn): list(path)}
            parents = _assigned_parents(fn, mod, seed, tl)
            loops = _dict_loops(fn, mod)
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in READERS
                        and len(node.args) >= 3):
                    continue
                k = _const(node.args[1], mod)
                pairs = [(k, _const(node.args[2], mod, missing="computed: " + ast.unparse(node.args[2])[:50]))]
                kp, dp = getattr(node.args[1], "id", ""), getattr(node.args[2], "id", "")
                if not isinstance(k, str) and kp in loops:  # for key, default in KEY_DEFAULT_DICT.items()
                    pairs = [(lk, lv if loops[kp][1] == dp else "computed: " + dp) for lk, lv in loops[kp][0]]
                elif not isinstance(k, str):  # the key is a parameter: one row per calling site / default
                    pairs = []
                    for site in [{}] + key_args.get(key, []):
                        bound_ = {**defaults.get(key, {}), **site}
                        if isinstance(bound_.get(kp), str) and (bound_[kp], bound_.get(dp)) not in pairs:
                            pairs.append((bound_[kp], bound_.get(dp, "computed: " + dp)))
                for k, dflt in pairs:
                    par = _parent(node.args[0], mod, parents, tl)
                    full = ".".join(par + [k]) if par is not None else k
                    out.append(entry("deepspeed-config", full, "json key (constant read)" if par is not None
                                     else "json key (constant read; parent table not resolved)",
                                     default=dflt if isinstance(dflt, str) and dflt.startswith("computed")
                                     else default_repr(dflt),
                                     where_=where(f, node.lineno), const=ast.unparse(node.args[1]), fn=key[1]))
            if tl or path is not None:
                out += _direct_reads(fn, mod, parents, f, tl, key[1])
    return out


def _direct_reads(fn, mod, parents, f, tl=True, fn_name="") -> List[Dict]:
    """Keys runtime/config.py reads straight from the JSON dict (param_dict[K], param_dict.get(K, d),
    K in param_dict) rather than through get_*_param: optimizer, scheduler, bfloat16, ..."""
    out: List[Dict] = []
    for node in ast.walk(fn):
        path, dflt = None, "none at this read (KEY in / [KEY])"
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            continue  # output[K] = ...: a write to a result dict, not a read of the JSON
        if isinstance(node, (ast.Subscript, ast.Call)):
            path = _parent(node, mod, parents, tl)
            if isinstance(node, ast.Call) and path is not None and len(node.args) > 1:
                d = _const(node.args[1], mod, missing="computed: " + ast.unparse(node.args[1])[:50])
                dflt = d if isinstance(d, str) and d.startswith("computed") else default_repr(d)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
            base = _parent(node.comparators[0], mod, parents, tl)
            k = _const(node.left, mod)
            path = base + [k] if base is not None and isinstance(k, str) else None
        if path:
            out.append(entry("deepspeed-config", ".".join(path), "json key (read directly)", default=dflt,
                             where_=where(f, node.lineno), fn=fn_name))
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
    if isinstance(node, ast.Call) and len(node.args) == 1 and ast.unparse(node.func) in COPIES:
        return _parent(node.args[0], mod, parents, top_level_ok)  # output = copy.copy(sub_table)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys" \
            and not node.args:
        return _parent(node.func.value, mod, parents, top_level_ok)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args and GETTERS:
        t = _target(node.func, mod, "", {})
        if t in GETTERS:
            base = _parent(node.args[0], mod, parents, top_level_ok)
            return base + GETTERS[t] if base is not None else None
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
    const: Dict[str, Dict] = {}  # first read of each name, unless a later read states a default
    for r in _const_rows():
        old = const.get(r["n"])
        if r["n"] not in names and (old is None or (old.get("d", "").startswith("none at this read")
                                                     and not r.get("d", "").startswith("none at this read"))):
            const[r["n"]] = r
    rows.extend(const.values())
    names |= set(const)
    leaves = {n.rsplit(".", 1)[-1] for n in names}
    for r in _constant_pairs():
        if r["n"] not in leaves:
            leaves.add(r["n"])
            rows.append(r)
    _source_notes(rows)
    return rows


def _source_notes(rows: List[Dict]) -> None:
    """A note, in the installed source's own words, on a key whose name promises more than it does:
    data_types.keep_in_fp32_modules keeps buffers only (the docstring of deepspeed/runtime/keep_in_fp32.py)."""
    import deepspeed.runtime.keep_in_fp32 as kif
    doc = " ".join((kif.__doc__ or "").split())
    said = next((s for s in doc.split(". ") if s.startswith("Only buffers")), None)
    for r in rows:
        if r["n"] == "data_types.keep_in_fp32_modules" and said:
            r["o"] = (f'deepspeed/runtime/keep_in_fp32.py: "{said.rstrip(".")}." Under bf16/fp16 every floating '
                      "parameter is cast to the training dtype (engine._cast_module_mixed_precision)")


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


def removed_section() -> List[Dict]:
    """Config keys deepspeed 0.19 removed: DeepSpeedConfig raises DeepSpeedConfigError on their presence
    (_reject_removed_config_keys); the note is the message without its issue link."""
    import deepspeed.runtime.config as dsc
    cfg_py = PKG / "runtime" / "config.py"
    text = cfg_py.read_text(encoding="utf-8").splitlines()
    out = []
    for prefix, table in (("", dsc._REMOVED_TOP_LEVEL_CONFIG_KEYS), ("zero_optimization.", dsc._REMOVED_ZERO_CONFIG_KEYS)):
        for key, message in table.items():
            line = next(i for i, ln in enumerate(text, 1) if ln.strip() == f'"{key}":')
            out.append(entry("deepspeed-removed", prefix + key, "config key removed (DeepSpeedConfigError)",
                             where_=where(cfg_py, line),
                             note="present in any form, DeepSpeedConfig raises DeepSpeedConfigError: "
                                  + message.split(" See https://", 1)[0].strip()))
    return out


INFERENCE_CONFIG = PKG / "inference" / "config.py"


def inference_config_section() -> List[Dict]:
    """deepspeed.init_inference(model, config=... or **kwargs): DeepSpeedInferenceConfig's pydantic
    fields (the keys init_inference accepts), with type, default and alias; nested models are named
    by their class, not expanded."""
    from deepspeed.inference.config import DeepSpeedInferenceConfig

    lines = class_field_lines(INFERENCE_CONFIG)
    out = []
    for name, f in DeepSpeedInferenceConfig.model_fields.items():
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        note = ""
        if extra.get("deprecated"):
            new = extra.get("new_param", "")
            note = "deprecated" + (f"; use {new}" if new else "")
        default = None if f.is_required() else default_repr(f.get_default(call_default_factory=True))
        out.append(entry("deepspeed-inference-config", name, "init_inference config key",
                         type_=ann_str(f.annotation), default=default,
                         where_=where(INFERENCE_CONFIG, lines.get(("DeepSpeedInferenceConfig", name))),
                         aliases=[f.alias] if f.alias else [], note=note))
    return out
