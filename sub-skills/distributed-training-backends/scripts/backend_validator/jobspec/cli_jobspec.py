"""The --job-spec part of validate_backend_config.py.

cli.py adds the option and calls :func:`run` once. Output follows the other modes: text findings
``FILE:LINE:COL: SEVERITY RULE: MESSAGE``, one JSON document with ``--output json`` (``job_specs``
holds, per file, each step with its nodes, tasks per node, GPUs, the operator's environment and
every simulated launch), or the CI formats of formats.py (``--output sarif`` / ``github``).
"""
from __future__ import annotations

import json
from typing import Any, TextIO

EPILOG = """\
job specs (a SLURM batch script or a Kubeflow PyTorchJob/TrainJob manifest; nothing is run):
  validate_backend_config.py --job-spec train.sbatch
  validate_backend_config.py --job-spec pytorchjob.yaml --output json
  validate_backend_config.py --job-spec job.sh --cwd /path/where/sbatch/runs   # finds the configs it names
  Each srun task (or pod) is simulated with the variables SLURM (or the operator) sets for it, its
  launch command is checked like --launch-command, and what the nodes get is compared.
"""


def run(args: Any, out: TextIO, err: TextIO) -> int:
    from ..core import InputError, Options
    from ..report import CI_FORMATS, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, fmt_text, summary_line
    from ..version import VERIFIED_AGAINST
    from .check import check_job_spec
    if args.launch_command or args.node_set is not None or args.configs:
        err.write("validate_backend_config.py: error: --job-spec cannot be combined with CONFIG files, "
                  "--launch-command or --node-set\n")
        return EXIT_INPUT
    findings, input_errors, specs = [], [], []
    for path in args.job_spec:
        options = Options(consumer=args.consumer, world_size=args.world_size, cwd=args.cwd or ".",
                          check_imports=args.check_imports)
        try:
            r = check_job_spec(path, path, cwd=args.cwd, options=options)
        except InputError as e:
            input_errors.append({"file": path, "message": str(e)})
            continue
        except RecursionError:
            input_errors.append({"file": path, "message": "nesting too deep to check"})
            continue
        except Exception as e:  # noqa: BLE001 - never a traceback for bad input
            input_errors.append({"file": path, "message": f"internal error while checking ({type(e).__name__}: "
                                                          f"{str(e)[:200]}); please report"})
            continue
        findings.extend(r.findings)
        input_errors.extend(r.input_errors)
        specs.append({"file": path, "kind": r.kind, "steps": r.steps})
    n_err = sum(f.severity == "error" for f in findings)
    n_warn = sum(f.severity == "warning" for f in findings)
    n_info = sum(f.severity == "info" for f in findings)
    if args.output in CI_FORMATS:
        from .. import formats
        formats.write(args.output, out, findings, input_errors)
    elif args.output == "json":
        doc = {"tool": "validate_backend_config.py", "verified_against": VERIFIED_AGAINST, "job_specs": specs,
               "findings": [f.as_dict() for f in findings], "input_errors": input_errors,
               "summary": {"errors": n_err, "warnings": n_warn, "info": n_info, "input_errors": len(input_errors)}}
        json.dump(doc, out, indent=2, default=str)
        out.write("\n")
    else:
        for f in findings:
            out.write(fmt_text(f) + "\n")
    for ie in input_errors:
        err.write(f"{ie['file']}: error: {ie['message']}\n")
    if args.output == "text":
        err.write(summary_line(n_err, n_warn, n_info, len(input_errors), f"{len(args.job_spec)} job spec(s)"))
    if input_errors:
        return EXIT_INPUT
    if n_err or (args.strict and n_warn):
        return EXIT_FINDINGS
    return EXIT_OK
