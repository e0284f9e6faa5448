"""The --launch-command / --node-set / --explain part of validate_backend_config.py.

cli.py adds the options and calls :func:`run` once; output follows the file mode: text findings
``FILE:LINE:COL: SEVERITY RULE: MESSAGE`` (the command itself is ``<launch-command>``), one JSON
document with ``--output json`` (``launch`` holds the effective values and, with --explain, where
each came from), or the CI formats of formats.py (``--output sarif`` / ``github``: a finding on the
command points at the flag's line and column in that command).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, TextIO

from ..core import Options
from ..report import CI_FORMATS, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, fmt_text, one_line, summary_line
from ..version import VERIFIED_AGAINST

EPILOG = """\
launch commands (the whole command line, shell-quoted, checked without running it):
  validate_backend_config.py --launch-command "accelerate launch --config_file cfg.yaml --num_processes 8 train.py"
  validate_backend_config.py --launch-command "torchrun --nnodes 2 --nproc-per-node 8 train.py" --explain
  validate_backend_config.py --launch-command "deepspeed --hostfile hosts train.py --deepspeed_config ds.json"
  validate_backend_config.py --env HF_HOME=/data/hf --launch-command "accelerate launch train.py"
  validate_backend_config.py --node-set node0.yaml node1.yaml       # per-node configs agree?
  validate_backend_config.py --node-set --launch-command "accelerate launch --machine_rank 0 ..." \\
                             --launch-command "accelerate launch --machine_rank 1 ..."
  --explain prints each effective value and where it came from (flag, file key, environment, default).
  --output sarif / github work here too: a finding on the command points at the flag's line and column
  (SARIF artifact launch-command-N holding the command text; annotation text "launch command N, line L, column C").
"""


def _env(pairs: List[str], err: TextIO) -> Dict[str, str]:
    env = dict(os.environ)
    for p in pairs or []:
        if "=" not in p or not p.split("=", 1)[0]:
            raise ValueError(f"--env {p!r}: expected KEY=VALUE")
        k, v = p.split("=", 1)
        env[k] = v
    return env


def run(args: Any, out: TextIO, err: TextIO) -> int:
    from .argv import CommandError
    from .check import check_command, check_node_set
    try:
        env = _env(args.env, err)
    except ValueError as e:
        err.write(f"validate_backend_config.py: error: {e}\n")
        return EXIT_INPUT
    cwd = args.cwd if args.cwd else os.getcwd()
    if not os.path.isdir(cwd):
        err.write(f"validate_backend_config.py: error: --cwd {cwd!r} is not a directory\n")
        return EXIT_INPUT
    if args.configs and args.node_set is None:
        err.write("validate_backend_config.py: error: CONFIG files cannot be combined with --launch-command "
                  "(the command names its config file; use --node-set for several)\n")
        return EXIT_INPUT
    options = Options(consumer=args.consumer, world_size=args.world_size, cwd=cwd, check_imports=args.check_imports)
    results = []
    try:
        if args.node_set is not None:
            files = list(args.node_set) + list(args.configs or [])
            if not files and len(args.launch_command or []) < 2:
                err.write("validate_backend_config.py: error: --node-set needs node config files, or two or more "
                          "--launch-command\n")
                return EXIT_INPUT
            results.append(("node-set", check_node_set(files, args.launch_command or [], env, cwd, options)))
        else:
            for c in args.launch_command:
                results.append((c, check_command(c, env, cwd, options)))
    except CommandError as e:
        err.write(f"<launch-command>: error: {e}\n")
        return EXIT_INPUT
    except RecursionError:
        err.write("<launch-command>: error: nesting too deep to check\n")
        return EXIT_INPUT
    except Exception as e:  # noqa: BLE001 - never a traceback for bad input
        err.write(f"<launch-command>: error: internal error while checking ({type(e).__name__}: "
                  f"{str(e)[:200]}); please report\n")
        return EXIT_INPUT
    from .check import COMMAND_NAME
    commands: Dict[str, str] = {}  # finding file name -> command text, for the SARIF/GitHub formats
    if args.node_set is not None:
        commands = {f"{COMMAND_NAME}#{i + 1}": c for i, c in enumerate(args.launch_command or [])}
    elif len(results) == 1:
        commands = {COMMAND_NAME: results[0][0]}
    else:
        commands = {f"{COMMAND_NAME}#{i + 1}": c for i, (c, _) in enumerate(results)}
        if args.output in CI_FORMATS:  # say which command each finding is on
            for i, (_, r) in enumerate(results):
                r.findings = [f.replace(file=f"{COMMAND_NAME}#{i + 1}") if f.file == COMMAND_NAME
                              else f for f in r.findings]
    findings = [f for _, r in results for f in r.findings]
    findings.sort(key=lambda f: (f.file != "<launch-command>", f.file, f.line or 0, f.col or 0, f.rule))
    input_errors = [ie for _, r in results for ie in r.input_errors]
    n_err = sum(f.severity == "error" for f in findings)
    n_warn = sum(f.severity == "warning" for f in findings)
    n_info = sum(f.severity == "info" for f in findings)
    if args.output in CI_FORMATS:
        from .. import formats
        formats.write(args.output, out, findings, input_errors, commands)
    elif args.output == "json":
        doc = {"tool": "validate_backend_config.py", "verified_against": VERIFIED_AGAINST,
               "launch": [{"command": c, "launcher": r.launcher, "stopped": r.stopped,
                           "effective": r.effective, **({"explain": r.explain} if args.explain else {}),
                           "files": r.files} for c, r in results],
               "findings": [f.as_dict() for f in findings], "input_errors": input_errors,
               "summary": {"errors": n_err, "warnings": n_warn, "info": n_info,
                           "input_errors": len(input_errors)}}
        json.dump(doc, out, indent=2, default=str)
        out.write("\n")
    else:
        for f in findings:
            out.write(fmt_text(f) + "\n")
        if args.explain:
            for c, r in results:
                out.write(f"\n# {r.launcher}: {c if c != 'node-set' else 'node set'}\n")
                w = max([len(str(x["setting"])) for x in r.explain] + [8])
                for row in r.explain:
                    out.write(f"{str(row['setting']):<{w}}  {one_line(repr(row['value']))}  <- "
                              f"{one_line(row['origin'])}\n")
    for ie in input_errors:
        err.write(f"{ie['file']}: error: {ie['message']}\n")
    if args.output == "text":
        err.write(summary_line(n_err, n_warn, n_info, len(input_errors), f"{len(results)} launch check(s)"))
    if input_errors:
        return EXIT_INPUT
    if n_err or (args.strict and n_warn):
        return EXIT_FINDINGS
    return EXIT_OK
