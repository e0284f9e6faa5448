"""The options of validate_backend_config.py (argparse) and the rule-catalog queries
(--list-rules, --search, --explain-rule): what cli.py needs only for a run that is not a plain
file check. A plain check (`validate_backend_config.py FILE...`, no option) takes cli.py's fast
path and never compiles this module or imports argparse; tests/validator_cli/test_cli_fast_path.py
keeps that path's options equal to this parser's defaults.
"""
from __future__ import annotations

import argparse

from . import core
from .engine import VERIFIED_AGAINST, rules_loaded
from .report import CI_FORMATS, EXIT_INPUT, EXIT_OK, one_line
from .version import version_line

if False:  # pragma: no cover - annotations only; importing typing costs start time (bench_validator.py)
    from typing import List, Optional, TextIO


EPILOG = f"""\
examples:
  validate_backend_config.py accelerate_config.yaml
  validate_backend_config.py configs/*.yaml ds_zero3.json        # several files, format auto-detected
  validate_backend_config.py --format deepspeed ds.json --consumer transformers
  validate_backend_config.py --check-imports config.yaml          # hints for missing optional packages
  validate_backend_config.py --output json --strict config.yaml   # machine-readable, warnings fail
  cat config.yaml | validate_backend_config.py -                  # read standard input
  validate_backend_config.py --list-rules
  validate_backend_config.py --explain-rule acc-fsdp2-local-state-dict   # one rule: fails/passes, fix, source
  validate_backend_config.py --search offload                     # the rules that mention offload

output (text): PATH:LINE:COL: SEVERITY RULE-ID: MESSAGE, then an indented "hint:" line.
  --output json prints one document with these top-level keys:
    tool, verified_against   the helper's name and the library versions its checks mirror
    files            [{{file, format, consumer, consumer_reason, related, input_error}}] per input
    findings         [{{file, rule, severity, path, line, column, message, hint}}]
    input_errors     [{{file, message}}] inputs that could not be read or parsed (exit 2)
    skipped_checks   [{{file, check, reason, option}}] checks not run for lack of information;
                     option names the flag that supplies it (e.g. --world-size), or is empty
    summary          {{errors, warnings, info, input_errors, files}}
  With --launch-command / --node-set, "launch" ([{{command, launcher, stopped, effective, explain,
  files}}]) takes the place of "files" and "skipped_checks".

exit codes:
  0  no errors (warnings allowed unless --strict)
  1  at least one error finding (or, with --strict, a warning)
  2  usage error, or an input that cannot be read or parsed (one line on stderr per input)

input limits (an input over a limit is refused with exit 2, never a traceback):
  size {core.MAX_INPUT_BYTES // (1024 * 1024)} MiB per file; nesting depth {core.YAML_MAX_DEPTH};
  {core.YAML_MAX_NODES} YAML nodes after alias expansion (alias bombs); UTF-8 text only;
  YAML tags are never constructed (a tag safe_load would refuse is an error finding).
  YAML up to {core.YAML_PURE_PYTHON_LIMIT // 1024} KiB is parsed by PyYAML's pure-Python parser, exactly as
  accelerate's yaml.safe_load does; larger input by libyaml (faster, slightly more permissive).

The checks mirror {VERIFIED_AGAINST}; see references/validator-rules.md.
Relative deepspeed_config_file paths are resolved against the current working directory,
as accelerate does at launch (use --cwd to emulate another launch directory).
"""


def list_rules(output: str, out: TextIO, search: Optional[str] = None) -> None:
    """--list-rules; with --search TEXT only the rules whose id, summary, source or description
    contain TEXT (case-insensitive)."""
    rules_loaded()
    regs = list(core.REGISTRY.values())
    if search is not None:
        needle = search.lower()
        regs = [r for r in regs if needle in "\n".join((r.id, r.summary, r.source, r.doc)).lower()]
    rows = [{"id": r.id, "severity": r.severity, "family": r.family, "summary": r.summary,
             "source": r.source, "consumers": list(r.consumers)} for r in regs]
    rows.sort(key=lambda r: (r["family"], r["id"]))
    if output == "json":
        import json
        json.dump({"rules": rows}, out, indent=2)
        out.write("\n")
        return
    for r in rows:
        out.write(f"{r['id']:<44} {r['severity']:<8} {r['family']:<11} {r['summary']}\n")


def explain_rules(ids: List[str], output: str, out: TextIO, err: TextIO) -> int:
    """--explain-rule: one rule each (docs.rule_info); an unknown id is a usage error (exit 2)."""
    from . import docs
    infos = []
    for rid in ids:
        info = docs.rule_info(rid.strip())
        if info is None:
            near = (core.did_you_mean(rid.strip(), core.REGISTRY) or
                    next((r for r in sorted(core.REGISTRY) if rid.strip().lower() in r), None)) if rid.strip() else None
            hint = f" (did you mean {near!r}?)" if near else " (--list-rules lists them)"
            err.write(f"validate_backend_config.py: error: no rule {one_line(rid)!r}{hint}\n")
            return EXIT_INPUT
        infos.append(info)
    if output == "json":
        import json
        json.dump({"rules": infos}, out, indent=2)
        out.write("\n")
    else:
        out.write("\n".join(docs.explain_text(i) for i in infos))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="validate_backend_config.py",
        description="Statically check Accelerate launch configs (YAML or JSON) and DeepSpeed JSON "
                    "for what accelerate/deepspeed would reject or silently ignore. Never imports "
                    "accelerate, torch or deepspeed; never launches anything.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("configs", nargs="*", metavar="CONFIG", help="config file(s); '-' reads standard input")
    p.add_argument("--format", choices=("auto", "accelerate", "deepspeed"), default="auto",
                   help="kind of config (default: auto-detect by content)")
    p.add_argument("--output", choices=("text", "json") + CI_FORMATS, default="text",
                   help="output format (default text); sarif: SARIF 2.1.0 for code scanning; "
                        "github: GitHub Actions ::error/::warning annotations")
    p.add_argument("--version", action=_LazyVersion)
    p.add_argument("--strict", action="store_true", help="warnings also make the exit code 1")
    p.add_argument("--list-rules", action="store_true", help="list every rule and exit")
    p.add_argument("--search", default=None, metavar="TEXT",
                   help="list only the rules whose id, summary, source or description contain TEXT "
                        "(case-insensitive), then exit; e.g. --search offload")
    p.add_argument("--explain-rule", action="append", default=None, metavar="RULE-ID",
                   help="print one rule - severity, what fails and passes, the fix, its source and reference "
                        "anchor - and exit (repeatable; with --output json, one document)")
    p.add_argument("--check-imports", action="store_true",
                   help="also report optional packages the config needs but that are not importable here "
                        "(uses importlib.util.find_spec; nothing is imported)")
    p.add_argument("--consumer", choices=core.CONSUMERS, default=None,
                   help="who reads a standalone DeepSpeed JSON (default: inferred; shown in the output)")
    p.add_argument("--world-size", type=int, default=None, metavar="N",
                   help="number of processes the DeepSpeed JSON will run with (batch-size arithmetic)")
    p.add_argument("--cwd", default=None, metavar="DIR",
                   help="launch directory for resolving relative deepspeed_config_file (default: current)")
    # launch commands and node sets (backend_validator/launch/)
    p.add_argument("--launch-command", action="append", default=None, metavar="CMD",
                   help="a whole `accelerate launch` / `deepspeed` / `torchrun` command (one shell-quoted string): "
                        "check the configuration that command would run with (repeatable)")
    p.add_argument("--env", action="append", default=None, metavar="KEY=VALUE",
                   help="environment for --launch-command (HF_HOME, XDG_CACHE_HOME, PET_*); default: this environment")
    p.add_argument("--node-set", nargs="*", default=None, metavar="FILE",
                   help="per-node Accelerate configs (or the --launch-command of each node) that must agree")
    p.add_argument("--explain", action="store_true",
                   help="with --launch-command: print each effective value and where it came from")
    # --- job specs (backend_validator/jobspec/) ---
    p.add_argument("--job-spec", nargs="+", default=None, metavar="FILE",
                   help="SLURM batch script(s) or Kubeflow PyTorchJob/TrainJob manifest(s): check what every node "
                        "and task launches (a .json/.yaml/.yml file, or text opening with { or [, is read as a manifest)")
    # --- end job specs ---
    p._building = False
    return p


class _Parser(argparse.ArgumentParser):
    """The launch-command examples join the epilog when help is printed (launch/ is not imported
    for a file check). While the options are added, argparse formats each one only to check it:
    that formatter gets a fixed width, so shutil (terminal size) is imported only to print help or
    a usage error."""

    _building = True

    def _get_formatter(self):
        if self._building:
            return self.formatter_class(prog=self.prog, width=80)
        return super()._get_formatter()

    def format_help(self) -> str:
        if not getattr(self, "_launch_epilog", False):
            from .launch.cli_launch import EPILOG as launch_epilog
            from .jobspec.cli_jobspec import EPILOG as jobspec_epilog
            self.epilog = (self.epilog or "") + "\n" + jobspec_epilog + "\n" + launch_epilog
            self._launch_epilog = True
        return super().format_help()


class _LazyVersion(argparse._VersionAction):
    """--version, its text found only when asked for (an installed copy reads the distribution
    metadata, which costs start time on every run otherwise)."""

    def __call__(self, parser, namespace, values, option_string=None):
        self.version = version_line("validate_backend_config.py")
        super().__call__(parser, namespace, values, option_string)
