"""torch sections: torchrun flags (real parser) and the environment variables torch.distributed's
Python side reads or sets (AST scan)."""
from __future__ import annotations

from typing import Dict, List, Tuple

from _fx_common import SITE, argparse_lines, default_repr, entry, env_entries, parser_actions, scan_env, where

RUN_PY = SITE / "torch" / "distributed" / "run.py"


def torchrun_section() -> List[Dict]:
    from torch.distributed.argparse_util import check_env, env
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    lines = argparse_lines(RUN_PY)
    out = []
    for a, opts, name, row, line in parser_actions(parser, lines, prefer_dash=True):
        pet = ""
        if isinstance(a, (env, check_env)):
            pet = f"PET_{a.dest.upper()}"
            row["type"] = ("flag (check_env)" if isinstance(a, check_env) else row["type"])
        note = ""
        if pet:
            note = f"{pet} in the environment replaces the built-in default; the flag on the command line still wins"
        out.append(entry("torchrun", name if opts else a.dest, "launch flag" if opts else "positional",
                         type_=row["type"], default=_default(a, pet, row), choices=row["choices"], declared_default=row.get("declared"),
                         where_=where(RUN_PY, line), aliases=opts,
                         links=[f"torch-env:{pet}"] if pet else [], note=note, dest=a.dest, env=pet))
    return out


def _default(action, pet: str, row) -> str:
    """The parser default without any PET_ variable of this process leaking in."""
    import os
    if pet and pet in os.environ:  # the generator never runs with PET_ set; keep the table honest if it does
        raise SystemExit(f"unset {pet} before generating the tables")
    return row["default"]


def env_section() -> Tuple[List[Dict], List[str]]:
    files = sorted(list((SITE / "torch" / "distributed").rglob("*.py")) +
                   list((SITE / "torch" / "nn" / "parallel").rglob("*.py")))
    hits, unresolved = scan_env(files)
    # torchrun's PET_ variables are built from the flag name at parse time (argparse_util.env)
    from torch.distributed.run import get_args_parser
    from torch.distributed.argparse_util import check_env, env
    au = SITE / "torch" / "distributed" / "argparse_util.py"
    for a in get_args_parser()._actions:
        if isinstance(a, (env, check_env)):
            hits.append({"name": f"PET_{a.dest.upper()}", "op": "read", "default": "the flag's default",
                         "file": au, "line": _pet_line(au), "reader": "argparse_util.env"})
    # argparse_util's only environment reads are the PET_ ones computed above from the parser
    unresolved = [u for u in unresolved if not u.startswith("torch/distributed/argparse_util.py:")]
    rows = env_entries("torch-env", hits)
    for r in rows:
        if r["n"].startswith("PET_"):
            flag = next((x for x in _flags() if x[1] == r["n"]), None)
            if flag:
                r["l"] = [f"torchrun:{flag[0]}"]
    return rows, unresolved


def _flags():
    from torch.distributed.run import get_args_parser
    from torch.distributed.argparse_util import check_env, env
    out = []
    for a in get_args_parser()._actions:
        if isinstance(a, (env, check_env)):
            longs = [o for o in a.option_strings if o.startswith("--")]
            name = next((o for o in longs if "_" not in o), longs[0] if longs else a.dest)
            out.append((name, f"PET_{a.dest.upper()}"))
    return out


def _pet_line(path) -> int:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if "os.environ.get(env_name" in line:
            return i
    return 0


DYNAMO_CONFIG = SITE / "torch" / "_dynamo" / "config.py"


def dynamo_config_section() -> List[Dict]:
    """torch._dynamo.config options (set as torch._dynamo.config.NAME = value before compiling): the
    config module's registered entries with their declared default and type, the line that declares
    them, and the environment variable a Config(...) declaration reads, if any."""
    import ast
    import os

    import torch._dynamo.config as dcfg

    lines, envs = {}, {}
    for node in ast.parse(DYNAMO_CONFIG.read_text(encoding="utf-8")).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if not isinstance(target, ast.Name):
            continue
        lines.setdefault(target.id, node.lineno)
        value = node.value
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "Config":
            for kw in value.keywords:
                if kw.arg in ("env_name_default", "env_name_force") and isinstance(kw.value, ast.Constant):
                    envs[target.id] = (kw.arg, kw.value.value)
    out = []
    for name in sorted(dcfg._config):
        e = dcfg._config[name]
        if getattr(e, "hide", False):
            continue
        note = ""
        if name in envs:
            how, var = envs[name]
            note = (f"{var} in the environment sets the default" if how == "env_name_default"
                    else f"{var} in the environment overrides any value set in code")
        if getattr(e, "deprecated", False):
            note = (note + "; " if note else "") + "deprecated"
        default = default_repr(e.default)
        if isinstance(e.default, str) and os.path.isabs(e.default):  # the install folder or the current directory
            default = "computed: a path set at import"
        alias = getattr(e, "alias", None)
        if alias:  # reads and writes go to the other option; its own default is a placeholder
            note = (note + "; " if note else "") + f"alias of {alias}"
        out.append(entry("torch-dynamo-config", name, "torch._dynamo.config option",
                         type_=(e.value_type.__name__ if isinstance(e.value_type, type) else str(e.value_type).replace("typing.", "")),
                         default=None if alias else default,
                         where_=where(DYNAMO_CONFIG, lines.get(name)), note=note,
                         env=envs.get(name, ("", ""))[1]))
    return out
