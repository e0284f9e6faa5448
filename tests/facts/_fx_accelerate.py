"""accelerate sections of the name tables: launch flags, config-file keys, environment variables and
the Accelerator / plugin dataclass fields, read from the installed accelerate (parser by import,
everything else by AST or dataclasses.fields)."""
from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from typing import Dict, List, Set, Tuple

from _fx_common import (_Scope, enum_choices, _resolve, action_row, argparse_lines, ann_str, class_field_lines,
                        default_repr, entry, env_entries, scan_env, where, SITE)

PKG = SITE / "accelerate"
LAUNCH_PY = PKG / "commands" / "launch.py"
CONFIG_ARGS_PY = PKG / "commands" / "config" / "config_args.py"
UTILS_LAUNCH_PY = PKG / "utils" / "launch.py"
DATACLASSES_PY = PKG / "utils" / "dataclasses.py"
PARALLELISM_PY = PKG / "parallelism_config.py"

# argument group of `accelerate launch` -> the nested ClusterConfig dict whose keys feed it, and the
# prefix _validate_launch_command adds to a key written without it (commands/launch.py, the
# "Copy defaults.somedict.somearg" loop)
GROUP_TO_DICT = {
    "DeepSpeed Arguments": ("deepspeed_config", ""),
    "FSDP Arguments": ("fsdp_config", "fsdp_"),
    "Megatron-LM Arguments": ("megatron_lm_config", ""),
    "FP8 Arguments": ("fp8_config", "fp8_"),
    "MPI Arguments": ("mpirun_config", ""),
    "ParallelismConfig Arguments": ("parallelism_config", ""),
}
DYNAMO_DESTS_PREFIX = "dynamo_"
# top-level keys _validate_launch_command handles itself instead of copying them onto a flag
SPECIAL_TOP = {"compute_environment": "", "distributed_type": "use_deepspeed/use_fsdp/multi_gpu/tpu/use_megatron_lm",
               "mixed_precision": "mixed_precision"}
# keys BaseConfig.process_config rewrites before the unknown-key check (config_args.py)
LEGACY_KEYS = {"fp16": "converted to mixed_precision ('fp16' when true), then dropped",
               "dynamo_backend": "moved into dynamo_config.dynamo_backend ('NO' gives an empty dynamo_config)"}


CLUSTER_PY = PKG / "commands" / "config" / "cluster.py"
FP8_EXPORT_PREFIX = "ACCELERATE_"  # utils/launch.py setup_fp8_env: every args attribute fp8_* -> ACCELERATE_FP8_*


def fp8_exports(dests) -> Dict[str, str]:
    """args attribute -> variable setup_fp8_env exports for it (it loops over vars(args); the name is
    built from the attribute, so the scan cannot resolve it: computed here from the same rule).
    fp8_override_linear_precision is split into three variables there and is left to the scan."""
    return {d: FP8_EXPORT_PREFIX + d.upper() for d in dests
            if d.startswith("fp8_") and d != "fp8_override_linear_precision"}


def setup_fp8_env_line() -> int:
    return _line_of(UTILS_LAUNCH_PY, 'current_env[f"{prefix}{arg.upper()}"]')


def questionnaire_keys() -> List[Tuple[str, str, int]]:
    """(nested table, key, line) that the `accelerate config` questionnaire writes (cluster.py)."""
    tree = ast.parse(CLUSTER_PY.read_text(encoding="utf-8"))
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id.endswith("_config") \
                        and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                    out.add((t.value.id, t.slice.value, n.lineno))
    return sorted(out)


def _string_scope(fn: ast.FunctionDef) -> "_Scope":
    """The string values the function's local names are assigned (what env-name expressions resolve to)."""
    scope = _Scope()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            val = _resolve(node.value, scope)
            for t in node.targets:
                if isinstance(t, ast.Name) and val is not None:
                    scope.strings[t.id] = val
    return scope


def _flag_env_links() -> Dict[str, Set[str]]:
    """launch dest -> environment variables that utils/launch.py sets from args.<dest>."""
    tree = ast.parse(UTILS_LAUNCH_PY.read_text(encoding="utf-8"))
    out: Dict[str, Set[str]] = {}
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        scope = _string_scope(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and "env" in t.value.id:
                        name = _resolve(t.slice, scope)
                        if not name:
                            continue
                        for sub in ast.walk(node.value):
                            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                                    and sub.value.id == "args":
                                out.setdefault(sub.attr, set()).add(name)
    return out


def _post_init_env_links(path: Path) -> Dict[Tuple[str, str], Set[str]]:
    """(class, field) -> env vars read in an assignment to self.<field> inside a method of the class."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: Dict[Tuple[str, str], Set[str]] = {}
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        for fn in [n for n in cls.body if isinstance(n, ast.FunctionDef)]:
            scope = _string_scope(fn)
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    t = node.targets[0]
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        hits: List[Dict] = []
                        holder = ast.Module(body=[ast.Expr(node.value)], type_ignores=[])
                        _scan_tree_scoped(holder, path, hits, scope)
                        for h in hits:
                            if h["op"] == "read":
                                out.setdefault((cls.name, t.attr), set()).add(h["name"])
    return out


def _scan_tree_scoped(tree, path, hits, scope):
    """scan_env on a fragment, with the enclosing function's string variables known."""
    from _fx_common import _scan_tree
    # seed: prepend the scope's strings as assignments so the scanner resolves them
    seed = [ast.Assign(targets=[ast.Name(id=k, ctx=ast.Store())], value=ast.Constant(v), lineno=1)
            for k, v in scope.strings.items()]
    mod = ast.Module(body=seed + list(tree.body), type_ignores=[])
    _scan_tree(mod, path, hits, [])


def launch_and_config(version: str) -> Tuple[List[Dict], List[Dict]]:
    from accelerate.commands.launch import launch_command_parser
    from accelerate.commands.config.config_args import ClusterConfig

    parser = launch_command_parser()
    lines = argparse_lines(LAUNCH_PY)
    cfg_lines = class_field_lines(CONFIG_ARGS_PY)
    cluster_fields = {f.name: f for f in dataclasses.fields(ClusterConfig)}
    env_links = _flag_env_links()
    for d, var in fp8_exports([a.dest for a in parser._actions]).items():
        env_links.setdefault(d, set()).add(var)

    flags: List[Dict] = []
    config: List[Dict] = []
    dest_to_key: Dict[str, List[str]] = {}
    key_rows: Dict[str, Dict] = {}
    seen_dest: Set[Tuple[str, str]] = set()
    for action in parser._actions:
        if action.dest == "help":
            continue
        title = action.container.title or ""
        dest = action.dest
        keys: List[str] = []
        if title in GROUP_TO_DICT:
            dct, prefix = GROUP_TO_DICT[title]
            keys.append(f"{dct}.{dest}")
            if prefix and dest.startswith(prefix):
                keys.append(f"{dct}.{dest[len(prefix):]}")
        elif dest.startswith(DYNAMO_DESTS_PREFIX):
            keys += [f"dynamo_config.{dest}", f"dynamo_config.{dest[len(DYNAMO_DESTS_PREFIX):]}"]
        elif dest in cluster_fields and dest not in ("compute_environment", "distributed_type"):
            keys.append(dest)
        if dest == "use_deepspeed" or dest in ("use_fsdp", "multi_gpu", "tpu", "use_megatron_lm"):
            keys.append("distributed_type")
        if dest == "cpu":  # _validate_launch_command copies use_cpu onto args; utils/launch.py reads args.cpu or args.use_cpu
            keys.append("use_cpu")
        if dest == "use_parallelism_config":
            keys.append("parallelism_config")
        dest_to_key.setdefault(dest, [])
        for k in keys:
            if k not in dest_to_key[dest]:
                dest_to_key[dest].append(k)
        row = action_row(action)
        opts = action.option_strings
        name = next((o for o in opts if o.startswith("--") and "-" not in o[2:]), opts[0] if opts else dest)
        if (name, dest) in seen_dest:
            continue
        seen_dest.add((name, dest))
        line = lines.get(opts[0]) if opts else lines.get(dest)
        links = [f"accelerate-config:{k}" for k in keys] + \
            [f"accelerate-env:{e}" for e in sorted(env_links.get(dest, ()))]
        settable = "file-settable" if keys else "flag-only"
        note = "" if keys or not opts else (
            "no config-file key sets it: ClusterConfig has no field of this name, so the config loader rejects "
            "a top-level key of this name as unknown" if dest not in cluster_fields else "")
        flags.append(entry("accelerate-launch", name, "launch flag (%s)" % settable if opts else "positional",
                           type_=row["type"], default=row["default"], choices=row["choices"], declared_default=row.get("declared"),
                           where_=where(LAUNCH_PY, line), links=links, aliases=opts, note=note, group=title, dest=dest))

    key_to_flags: Dict[str, List[str]] = {}
    for dest, keys in dest_to_key.items():
        for k in keys:
            key_to_flags.setdefault(k, []).append(dest)
    dest_name = {f["dest"]: f["n"] for f in flags}

    def flag_links(key):
        return [f"accelerate-launch:{dest_name[d]}" for d in key_to_flags.get(key, []) if d in dest_name]

    # top-level keys: every ClusterConfig field (the loader rejects anything else after process_config)
    for fname, f in cluster_fields.items():
        if f.default is not dataclasses.MISSING:
            d = default_repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:  # pragma: no cover - none today
            d = "computed: default_factory"
        else:
            d = "required" if fname == "distributed_type" else "computed: BaseConfig.process_config"
        owner = "ClusterConfig" if (("ClusterConfig", fname) in cfg_lines) else "BaseConfig"
        links = flag_links(fname)
        if fname in ("fsdp_config", "deepspeed_config", "megatron_lm_config", "fp8_config", "dynamo_config",
                      "mpirun_config", "parallelism_config"):
            kind = "config key (nested table)"
        elif links:
            kind = "config key (feeds a launch flag)"
        else:
            kind = "config key (no launch flag of this name)"
        config.append(entry("accelerate-config", fname, kind, type_=ann_str(f.type), default=d,
                            where_=where(CONFIG_ARGS_PY, cfg_lines.get((owner, fname))), links=links))
    for k, what in LEGACY_KEYS.items():
        config.append(entry("accelerate-config", k, "config key (legacy, rewritten by the loader)",
                            where_=where(CONFIG_ARGS_PY, _line_of(CONFIG_ARGS_PY, f'"{k}" in config_dict')),
                            note=what, links=flag_links("mixed_precision" if k == "fp16" else "dynamo_config.dynamo_backend")))
    nested = sorted({k for ks in dest_to_key.values() for k in ks if "." in k})
    for k in nested:
        dest = key_to_flags[k][0]
        fl = next(f for f in flags if f["dest"] == dest)
        config.append(entry("accelerate-config", k, "config key (nested; feeds a launch flag)", type_=fl.get("t", ""),
                            default=fl.get("d"), choices=fl.get("c"), where_=fl["w"],
                            links=flag_links(k) + [x for x in fl.get("l", []) if x.startswith("accelerate-env:")]))
    # keys the questionnaire writes that reach no flag: _validate_launch_command still copies them onto
    # args under the prefixed name, where no launch code reads them (fp8 ones are exported, see fp8_exports)
    import difflib
    have = {e["n"] for e in config}
    dests = sorted({f["dest"] for f in flags})
    for table, key, line in questionnaire_keys():
        if f"{table}.{key}" in have:
            continue
        prefix = {"fsdp_config": "fsdp_", "fp8_config": "fp8_", "dynamo_config": "dynamo_"}.get(table, "")
        attr = key if (not prefix or key.startswith(prefix)) else prefix + key
        near = difflib.get_close_matches(attr, dests, n=1, cutoff=0.7)
        links = [f"accelerate-launch:{dest_name[near[0]]}"] if near else []
        exported = fp8_exports([attr]).get(attr)
        note = (f"the accelerate config questionnaire writes this key, but no launch flag is named {attr}; "
                f"launch copies it onto args.{attr}")
        if exported:
            note += f" and exports {exported}, a variable nothing in accelerate reads"
            links.append(f"accelerate-env:{exported}")
        if near:
            note += f"; the flag with the nearest name is {dest_name[near[0]]}"
        config.append(entry("accelerate-config", f"{table}.{key}",
                            "config key (written by accelerate config; reaches no launch flag)",
                            where_=where(CLUSTER_PY, line), links=links, note=note, attr=attr))
    config += _flagless_keys({e["n"] for e in config}, set(dests))
    return flags, config


def _flagless_keys(have: Set[str], dests: Set[str]) -> List[Dict]:
    """Nested keys that work from a config file although no launch flag has their name:
    _validate_launch_command copies every key of fsdp_config / fp8_config onto args (adding the
    prefix), then utils/launch.py reads some attributes with getattr(args, "fsdp_..."), and
    setup_fp8_env exports every fp8_* attribute as ACCELERATE_FP8_<NAME>, which the FP8 recipe
    dataclasses read (utils/dataclasses.py, env_prefix "ACCELERATE_FP8_")."""
    import re
    out = []
    tree = ast.parse(UTILS_LAUNCH_PY.read_text(encoding="utf-8"))
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "getattr" and len(n.args) >= 2 \
                and getattr(n.args[0], "id", "") == "args" and isinstance(n.args[1], ast.Constant):
            attr = n.args[1].value
            if isinstance(attr, str) and attr.startswith("fsdp_") and attr not in dests \
                    and f"fsdp_config.{attr}" not in have:
                have.add(f"fsdp_config.{attr}")
                out.append(entry("accelerate-config", f"fsdp_config.{attr}",
                                 "config key (nested; no launch flag, read from args by the launcher)",
                                 where_=where(UTILS_LAUNCH_PY, n.lineno), attr=attr,
                                 aliases=[f"fsdp_config.{attr[len('fsdp_'):]}"],
                                 note=f"launch copies it onto args.{attr}; utils/launch.py reads it with getattr"))
    text = DATACLASSES_PY.read_text(encoding="utf-8")
    prefix_at = [(m.start(), m.group(1)) for m in re.finditer(r'env_prefix = "([A-Z0-9_]+)"', text)]
    for m in re.finditer(r'env_prefix \+ "([A-Z0-9_]+)"', text):
        prefix = next((v for at, v in reversed(prefix_at) if at < m.start()), "")
        name = m.group(1)
        if prefix != "ACCELERATE_FP8_" or name.startswith("OVERRIDE_"):  # OVERRIDE_*: fp8_override_linear_precision
            continue
        attr = "fp8_" + name.lower()
        if attr in dests or f"fp8_config.{attr}" in have or f"fp8_config.{attr[4:]}" in have:
            continue
        have.add(f"fp8_config.{attr}")
        line = text.count("\n", 0, m.start()) + 1
        out.append(entry("accelerate-config", f"fp8_config.{attr}",
                         "config key (nested; no launch flag, exported as a variable)",
                         where_=where(DATACLASSES_PY, line), attr=attr, aliases=[f"fp8_config.{attr[4:]}"],
                         links=[f"accelerate-env:{prefix}{name}"],
                         note=f"launch copies it onto args.{attr}; setup_fp8_env exports {prefix}{name} "
                              "(only when mixed_precision is fp8), read here"))
    return out


def _line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return i
    return 0


def env_section() -> Tuple[List[Dict], List[str]]:
    files = sorted(p for p in PKG.rglob("*.py") if "test_utils" not in p.parts)
    hits, unresolved = scan_env(files)
    from accelerate.commands.launch import launch_command_parser
    dests = [a.dest for a in launch_command_parser()._actions]
    for table, key, _ in questionnaire_keys():
        if table == "fp8_config":
            dests.append(key if key.startswith("fp8_") else "fp8_" + key)
    line = setup_fp8_env_line()
    for var in sorted(set(fp8_exports(dests).values())):
        hits.append({"name": var, "op": "set", "default": None, "file": UTILS_LAUNCH_PY, "line": line,
                     "reader": "setup_fp8_env"})
    fp8_line = f"{UTILS_LAUNCH_PY.relative_to(SITE).as_posix()}:{line}"
    unresolved = [u for u in unresolved if u != fp8_line]
    return env_entries("accelerate-env", hits), unresolved


def api_section() -> List[Dict]:
    import accelerate.utils.dataclasses as dc
    import accelerate.parallelism_config as pc
    from accelerate import Accelerator

    out: List[Dict] = []
    acc_py = Path(inspect.getsourcefile(Accelerator))
    src, start = inspect.getsourcelines(Accelerator.__init__)
    for p in inspect.signature(Accelerator.__init__).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        line = next((start + i for i, s in enumerate(src) if s.strip().startswith(p.name)), start)
        d = "required" if p.default is inspect.Parameter.empty else default_repr(p.default)
        out.append(entry("accelerate-api", f"Accelerator.{p.name}", "constructor argument",
                         type_=ann_str(p.annotation) if p.annotation is not inspect.Parameter.empty else "",
                         default=d, where_=where(acc_py, line)))
    for mod, path in ((dc, DATACLASSES_PY), (pc, PARALLELISM_PY)):
        lines = class_field_lines(path)
        env_by_field = _post_init_env_links(path)
        for cname, cls in sorted(vars(mod).items()):
            if not (inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == mod.__name__):
                continue
            for f in dataclasses.fields(cls):
                if f.default is not dataclasses.MISSING:
                    d = default_repr(f.default)
                elif f.default_factory is not dataclasses.MISSING:
                    try:
                        d = default_repr(f.default_factory())
                    except Exception:
                        d = "computed: default_factory"
                else:
                    d = "required"
                envs = sorted(env_by_field.get((cname, f.name), ()))
                owner = next((c.__name__ for c in cls.__mro__ if (c.__name__, f.name) in lines), cname)
                note = "filled from the environment in __post_init__ when left at its default" if envs else ""
                out.append(entry("accelerate-api", f"{cname}.{f.name}", "dataclass field", type_=ann_str(f.type),
                                 default=d, choices=enum_choices(_real_type(cls, f)), where_=where(path, lines.get((owner, f.name))),
                                 links=[f"accelerate-env:{e}" for e in envs], note=note))
    return out


def _real_type(cls, f):
    """The field's annotation as an object (string annotations resolved where possible)."""
    import typing
    try:
        return typing.get_type_hints(cls).get(f.name, f.type)
    except Exception:
        return f.type
