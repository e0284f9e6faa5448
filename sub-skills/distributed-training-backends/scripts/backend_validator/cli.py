"""Command line of validate_backend_config.py: the run and the printing, nothing else.

Parsing and checking are the engine's (engine.py); the options (argparse) and the rule-catalog
queries are in cli_args.py, which a plain file check (config paths only) never compiles; launch
commands and node sets go to launch/cli_launch.py, the CI formats to formats.py. Nothing here
imports accelerate, torch or deepspeed, and a plain file check imports only what its input needs
(see bench_validator.py).
"""
from __future__ import annotations

import os
import sys

from .core import InputError, Options
from .engine import (  # noqa: F401  (library names kept here for callers of earlier releases)
    FileResult, VERIFIED_AGAINST, looks_like_deepspeed, parse_input, read_input, rules_loaded, validate_doc,
    validate_text)
from .report import CI_FORMATS, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, dedupe, fmt_text, one_line, summary_line

if False:  # pragma: no cover - annotations only; importing typing costs start time (bench_validator.py)
    from typing import List, Optional, Sequence, TextIO

# names of earlier releases (tests and library users call them)
_rules_loaded = rules_loaded
_one_line, _fmt_text, _dedupe = one_line, fmt_text, dedupe


def build_parser():
    """The argparse parser (cli_args.py)."""
    from .cli_args import build_parser as build
    return build()


def list_rules(output: str, out: TextIO, search: Optional[str] = None) -> None:
    """--list-rules / --search (cli_args.py)."""
    from .cli_args import list_rules as run
    run(output, out, search)


def explain_rules(ids: List[str], output: str, out: TextIO, err: TextIO) -> int:
    """--explain-rule (cli_args.py)."""
    from .cli_args import explain_rules as run
    return run(ids, output, out, err)


class _Args:
    """The options of a plain file check, as argparse would set them (cli_args.build_parser)."""

    def __init__(self, configs: List[str]) -> None:
        self.configs = configs
        self.format, self.output, self.strict, self.list_rules, self.search = "auto", "text", False, False, None
        self.explain_rule, self.check_imports, self.consumer, self.world_size, self.cwd = None, False, None, None, None
        self.launch_command, self.env, self.node_set, self.explain, self.job_spec = None, None, None, False, None


def plain_args(argv: Sequence[str]) -> Optional[_Args]:
    """The options for an argv of config paths only (one or more, none starting with '-'), without
    argparse (importing it, building the parser and compiling cli_args.py cost about a third of a
    bare interpreter start without bytecode); None for anything else."""
    if not argv or not all(isinstance(a, str) and not a.startswith("-") for a in argv):
        return None
    return _Args(list(argv))


class _ArgParseExit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def main(argv: Optional[Sequence[str]] = None, stdin: Optional[TextIO] = None,
         stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    argv = list(argv) if argv is not None else sys.argv[1:]
    args = plain_args(argv)
    if args is None:
        parser = build_parser()
        try:
            old_out, old_err = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = out, err
            try:
                args = parser.parse_args(argv)
            finally:
                sys.stdout, sys.stderr = old_out, old_err
        except SystemExit as e:  # argparse: --help (0) or usage error (2)
            return int(e.code or 0) if isinstance(e.code, int) else EXIT_INPUT

    if args.list_rules or args.search is not None:
        list_rules(args.output, out, args.search)
        return EXIT_OK
    if args.explain_rule:
        return explain_rules(args.explain_rule, args.output, out, err)
    if args.job_spec:  # job specs (backend_validator/jobspec/)
        from .jobspec.cli_jobspec import run as run_jobspec
        return run_jobspec(args, out, err)
    if args.launch_command or args.node_set is not None:  # launch commands and node sets
        from .launch.cli_launch import run as run_launch
        return run_launch(args, out, err)
    if not args.configs:
        err.write("validate_backend_config.py: error: no CONFIG given (use '-' for standard input)\n")
        return EXIT_INPUT
    if args.world_size is not None and args.world_size < 1:
        err.write("validate_backend_config.py: error: --world-size must be >= 1\n")
        return EXIT_INPUT
    if args.configs.count("-") > 1:
        err.write("validate_backend_config.py: error: '-' (standard input) given more than once\n")
        return EXIT_INPUT
    cwd = args.cwd if args.cwd else os.getcwd()
    if not os.path.isdir(cwd):
        err.write(f"validate_backend_config.py: error: --cwd {cwd!r} is not a directory\n")
        return EXIT_INPUT
    options = Options(consumer=args.consumer, world_size=args.world_size, cwd=cwd,
                      check_imports=args.check_imports)

    results: List[FileResult] = []
    for arg in args.configs:
        name = "<stdin>" if arg == "-" else arg
        try:
            text, name, src = read_input(arg, stdin)
            res = validate_text(text, name, args.format, options, source_path=src)
        except InputError as e:
            res = FileResult(name)
            res.input_error = str(e)
        except RecursionError:
            res = FileResult(name)
            res.input_error = "nesting too deep to check"
        except Exception as e:  # never a traceback for bad input
            res = FileResult(name)
            res.input_error = f"internal error while checking ({type(e).__name__}: {str(e)[:200]}); please report"
        results.append(res)

    findings = dedupe([f for r in results for f in r.findings],
                       lambda f: (f.file, f.line, f.col, f.rule, f.severity, f.message, f.hint, f.path))
    skipped = dedupe([s for r in results for s in r.skipped], lambda s: (s["file"], s["check"]))
    findings.sort(key=lambda f: (f.file, f.line or 0, f.col or 0, f.rule))
    n_err = sum(f.severity == "error" for f in findings)
    n_warn = sum(f.severity == "warning" for f in findings)
    n_info = sum(f.severity == "info" for f in findings)
    input_errors = [{"file": r.name, "message": r.input_error} for r in results if r.input_error]

    if args.output in CI_FORMATS:
        from . import formats
        formats.write(args.output, out, findings, input_errors)
    elif args.output == "json":
        doc = {
            "tool": "validate_backend_config.py",
            "verified_against": VERIFIED_AGAINST,
            "files": [r.as_dict() for r in results],
            "findings": [f.as_dict() for f in findings],
            "input_errors": input_errors,
            "skipped_checks": skipped,
            "summary": {"errors": n_err, "warnings": n_warn, "info": n_info,
                        "input_errors": len(input_errors), "files": len(results)},
        }
        import json
        json.dump(doc, out, indent=2, default=str)
        out.write("\n")
    else:
        for f in findings:
            out.write(fmt_text(f) + "\n")
    for ie in input_errors:
        err.write(f"{ie['file']}: error: {ie['message']}\n")
    if args.output == "text":
        notes = []
        for r in results:
            if r.format == "deepspeed" and r.consumer:
                notes.append(f"{r.name}: DeepSpeed config, consumer {r.consumer} ({r.consumer_reason})")
            for rel in r.related:
                if rel.get("consumer"):
                    notes.append(f"{rel['file']}: DeepSpeed config, consumer {rel['consumer']} "
                                 f"({rel.get('consumer_reason', '')})")
        for s in skipped:
            opt = f"; pass {s['option']} to check it" if s["option"] else ""
            notes.append(f"{s['file']}: info: {s['check']} skipped: {s['reason']}{opt}")
        for line in dedupe(notes, lambda x: x):
            err.write(one_line(line) + "\n")
        err.write(summary_line(n_err, n_warn, n_info, len(input_errors), f"{len(results)} file(s)"))

    if input_errors:
        return EXIT_INPUT
    if n_err or (args.strict and n_warn):
        return EXIT_FINDINGS
    return EXIT_OK
