"""Describe the pinned launchers' real argument parsers as plain data (runs in the test venv).

    python tests/launch/_parser_tables.py > /tmp/tables.json

Each action becomes [option_strings, dest, kind, type, default, choices, const]; the validator's
own tables (backend_validator/launch/flags.py) must describe the same parsers exactly
(tests/launch/test_flag_tables.py).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys


def _type_name(t):
    if t is None:
        return None
    name = getattr(t, "__name__", repr(t))
    if name == "<lambda>":
        return "bool_tuple"  # accelerate's --fp8_override_linear_precision: tuple(map(str_to_bool, x.split(",")))
    if name == "comma_separated_list":
        return "comma_list"
    return name


def _kind(a):
    n = type(a).__name__
    if not a.option_strings:
        return "remainder" if a.nargs == argparse.REMAINDER else "positional"
    if n in ("_HelpAction",):
        return "help"
    if n in ("_StoreTrueAction", "check_env"):
        return "store_true"
    if n == "_StoreConstAction":
        return "store_const"
    if n == "_AppendAction":
        return "append"
    if n in ("_StoreAction", "env"):
        return "store"
    return n


def describe(parser):
    rows = []
    for a in parser._actions:
        default = a.default
        if isinstance(default, tuple):
            default = list(default)
        rows.append([list(a.option_strings), a.dest, _kind(a), _type_name(a.type), default,
                     list(a.choices) if a.choices is not None else None,
                     a.const if _kind(a) == "store_const" else None])
    return {"allow_abbrev": parser.allow_abbrev, "actions": rows}


def accelerate_parser():
    from accelerate.commands.launch import launch_command_parser
    return launch_command_parser()


def deepspeed_parser():
    from deepspeed.launcher import runner
    captured = {}
    orig = argparse.ArgumentParser.parse_args

    def grab(self, args=None, namespace=None):
        captured["p"] = self
        return orig(self, args, namespace)

    argparse.ArgumentParser.parse_args = grab
    try:
        runner.parse_args(["x.py"])
    finally:
        argparse.ArgumentParser.parse_args = orig
    return captured["p"]


def torchrun_parser():
    from torch.distributed.run import get_args_parser
    return get_args_parser()


def main():
    for k in list(os.environ):
        if k.startswith("PET_"):
            del os.environ[k]  # torchrun's defaults read PET_* variables
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        out = {"accelerate": describe(accelerate_parser()), "deepspeed": describe(deepspeed_parser()),
               "torchrun": describe(torchrun_parser())}
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    main()
