"""Command line of validate_backend_config.py (standard library + PyYAML only).

Flow per input: read bytes (bounded) -> parse (YAML event loader, or the JSON/
HJSON loader) -> decide the format (accelerate or deepspeed) -> run the rule
families -> print findings. Nothing here imports accelerate, torch or deepspeed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from . import core
from .core import Context, Doc, Finding, InputError, Options, run_rules
from . import loader_yaml

from .version import VERIFIED_AGAINST, version_line  # versions live in version.py / VERSION

EXIT_OK, EXIT_FINDINGS, EXIT_INPUT = 0, 1, 2
# --output values served by formats.py (formats.CHOICES; imported only when one is asked for)
CI_FORMATS = ("sarif", "github")

# Keys that only an Accelerate config has at top level, and keys typical of DeepSpeed JSON
# (fallback when backend_validator.deepspeed is not importable).
_ACC_MARKERS = {"compute_environment", "distributed_type", "mixed_precision", "num_processes",
                "num_machines", "machine_rank", "deepspeed_config", "fsdp_config", "use_cpu",
                "main_training_function", "gpu_ids", "main_process_ip", "main_process_port",
                "megatron_lm_config", "parallelism_config", "dynamo_config", "fp8_config"}
_DS_MARKERS = {"zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "optimizer",
               "scheduler", "fp16", "bf16", "gradient_clipping", "steps_per_print", "wall_clock_breakdown",
               "zero_allow_untested_optimizer", "amp", "activation_checkpointing", "flops_profiler"}

EPILOG = f"""\
examples:
  validate_backend_config.py accelerate_config.yaml
  validate_backend_config.py configs/*.yaml ds_zero3.json        # several files, format auto-detected
  validate_backend_config.py --format deepspeed ds.json --consumer transformers
  validate_backend_config.py --check-imports config.yaml          # hints for missing optional packages
  validate_backend_config.py --output json --strict config.yaml   # machine-readable, warnings fail
  cat config.yaml | validate_backend_config.py -                  # read standard input
  validate_backend_config.py --list-rules

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
  size {loader_yaml.MAX_BYTES // (1024 * 1024)} MiB per file; nesting depth {loader_yaml.MAX_DEPTH};
  {loader_yaml.MAX_NODES} YAML nodes after alias expansion (alias bombs); UTF-8 text only;
  YAML tags are never constructed (a tag safe_load would refuse is an error finding).
  YAML up to {loader_yaml.PURE_PYTHON_LIMIT // 1024} KiB is parsed by PyYAML's pure-Python parser, exactly as
  accelerate's yaml.safe_load does; larger input by libyaml (faster, slightly more permissive).

The checks mirror {VERIFIED_AGAINST}; see references/validator-rules.md.
Relative deepspeed_config_file paths are resolved against the current working directory,
as accelerate does at launch (use --cwd to emulate another launch directory).
"""


def _rules_loaded() -> None:
    """Register every rule (--list-rules, library users and tests that read core.REGISTRY)."""
    from . import rules
    rules.load_all()


def _rules_lazy() -> None:
    """Register rule families as they first run (core.run_rules -> rules.load_family)."""
    from . import rules  # noqa: F401


def _load_json(text: str, name: str, source_path: Optional[str]) -> Doc:
    try:
        from . import loader_json
    except ImportError:  # pragma: no cover - SHIM until loader_json exists
        return _shim_json(text, name, source_path)
    return loader_json.load_text(text, name, source_path=source_path)


def _shim_json(text: str, name: str, source_path: Optional[str]) -> Doc:  # pragma: no cover
    """SHIM: strict json.loads without positions, used only if loader_json is missing."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InputError(f"invalid JSON: {e}") from None
    if not isinstance(data, dict):
        raise InputError("top level is not an object")
    return Doc(data, kind="json", name=name, text=text, source_path=source_path)


def looks_like_deepspeed(data: Any) -> bool:
    try:
        from .deepspeed import looks_like_deepspeed as f
        return bool(f(data))
    except ImportError:  # pragma: no cover
        keys = set(map(str, data)) if isinstance(data, dict) else set()
        if keys & {"compute_environment", "distributed_type"}:
            return False
        return len(keys & _DS_MARKERS) > len(keys & _ACC_MARKERS)


def parse_input(text: str, name: str, source_path: Optional[str], fmt: str) -> Doc:
    """Parse text as JSON or YAML. JSON when the name ends in .json (accelerate then uses
    json.load too), when --format deepspeed is given, or for stdin that starts with '{'
    and parses as JSON."""
    lower = name.lower()
    if lower.endswith(".json") or fmt == "deepspeed":
        return _load_json(text, name, source_path)
    if not lower.endswith((".yaml", ".yml")) and text.lstrip("\ufeff \t\r\n").startswith("{"):
        try:
            return _load_json(text, name, source_path)
        except InputError:
            pass
    return loader_yaml.load_text(text, name, source_path=source_path)


def read_input(arg: str, stdin: Optional[TextIO]) -> Tuple[str, str, Optional[str]]:
    """Return (text, display name, filesystem path or None)."""
    if arg == "-":
        stream = stdin if stdin is not None else sys.stdin
        buf = getattr(stream, "buffer", None)
        if buf is not None:
            raw = buf.read(loader_yaml.MAX_BYTES + 1)
        else:
            s = stream.read(loader_yaml.MAX_BYTES + 1)
            raw = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
        return core.decode_input(raw), "<stdin>", None
    try:
        text = core.read_input_file(arg)
    except InputError as e:
        if str(e) == "no such file":
            raise InputError("no such file (accelerate: 'The passed configuration file does not exist')") from None
        raise
    return text, arg, os.path.abspath(arg)


class FileResult:
    def __init__(self, name: str) -> None:
        self.name = name
        self.format: Optional[str] = None
        self.consumer: Optional[str] = None
        self.consumer_reason: str = ""
        self.related: List[Dict[str, Any]] = []
        self.findings: List[Finding] = []
        self.input_error: Optional[str] = None
        self.skipped: List[Dict[str, str]] = []  # checks skipped for lack of information

    def as_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"file": self.name, "format": self.format}
        if self.format == "deepspeed":
            d["consumer"] = self.consumer
            d["consumer_reason"] = self.consumer_reason
        if self.related:
            d["related"] = self.related
        if self.input_error:
            d["input_error"] = self.input_error
        return d


def _consumer_parse_findings(findings: List[Finding], consumer: str) -> List[Finding]:
    from .deepspeed import consumer_parse_findings
    return consumer_parse_findings(findings, consumer)


def _resolve_consumer(doc: Doc, forced: Optional[str], via_accelerate: bool) -> Tuple[str, str]:
    try:
        from .deepspeed import resolve_consumer
    except ImportError:  # pragma: no cover
        if forced:
            return forced, "given with --consumer"
        return ("accelerate", "named by an Accelerate config") if via_accelerate else \
            ("deepspeed", "standalone file (default)")
    return resolve_consumer(doc, forced, via_accelerate)


def _run_family(ctx: Context, family: str) -> None:
    try:
        run_rules(ctx, family)
    except RecursionError:
        ctx.findings.append(Finding(rule="input-too-complex", severity="error",
                                    message="structure too deeply nested to check", file=ctx.doc.name))


def validate_doc(doc: Doc, fmt: str, options: Options) -> FileResult:
    """Run every applicable rule family on a parsed document."""
    _rules_lazy()
    res = FileResult(doc.name)
    kind = fmt if fmt in ("accelerate", "deepspeed") else (
        "deepspeed" if looks_like_deepspeed(doc.data) else "accelerate")
    res.format = kind
    res.findings.extend(doc.parse_findings)
    if kind == "deepspeed":
        ctx = Context(doc=doc, options=options)
        ctx.consumer, ctx.consumer_reason = _resolve_consumer(doc, options.consumer, False)
        res.consumer, res.consumer_reason = ctx.consumer, ctx.consumer_reason
        res.findings[:] = _consumer_parse_findings(res.findings, ctx.consumer)
        if doc.kind == "yaml":
            _run_family(ctx, "input")
        _run_family(ctx, "deepspeed")
        res.findings.extend(ctx.findings)
        res.skipped.extend(ctx.skipped)
        return res

    ctx = Context(doc=doc, options=options)
    _run_family(ctx, "input")
    _run_family(ctx, "accelerate")
    res.findings.extend(ctx.findings)

    ds_block = doc.get(("deepspeed_config",))
    ds_file = ds_block.get("deepspeed_config_file") if isinstance(ds_block, dict) else None
    from .rules.accelerate_schema import Effective
    # accelerate reads the JSON only when it picks the DeepSpeed launcher (distributed_type DEEPSPEED);
    # under any other type the block is ignored (acc-block-ignored) and the JSON's problems never matter
    if isinstance(ds_file, str) and ds_file.strip() and ds_file != "none" and Effective(doc).launcher == "deepspeed":
        related = _load_related(doc, ds_file, options, res)
        xctx = Context(doc=doc, options=options)
        if related is not None:
            dctx = Context(doc=related, options=options)
            dctx.consumer, dctx.consumer_reason = _resolve_consumer(related, options.consumer, True)
            _run_family(dctx, "deepspeed")
            res.findings.extend(_consumer_parse_findings(related.parse_findings, dctx.consumer))
            res.findings.extend(dctx.findings)
            res.related.append({"file": related.name, "format": "deepspeed", "consumer": dctx.consumer,
                                "consumer_reason": dctx.consumer_reason})
            xctx.related["deepspeed"] = related
            xctx.consumer, xctx.consumer_reason = dctx.consumer, dctx.consumer_reason
        _run_family(xctx, "cross")
        res.findings.extend(xctx.findings)
        if related is not None:
            res.skipped.extend(_uncovered_skips(dctx.skipped, xctx))
        res.skipped.extend(xctx.skipped)
    res.skipped.extend(ctx.skipped)
    return res


def _uncovered_skips(skipped: List[Dict[str, str]], xctx: Context) -> List[Dict[str, str]]:
    """Skips of the named JSON that the cross rules made up for: the batch equation is checked
    with the Accelerate config's num_processes x num_machines (xf-batch-size-world)."""
    from .rules.cross_file_rules import _world_from_yaml
    if _world_from_yaml(xctx) is None:
        return list(skipped)
    return [s for s in skipped if s["check"] != "ds-batch-size-invalid"]


def _dedupe(items: List[Any], key) -> List[Any]:
    """Keep the first of items with the same key: a DeepSpeed JSON reached through several
    Accelerate configs (or also given itself) yields the same note once per path."""
    seen, out = set(), []
    for it in items:
        k = key(it)
        if k not in seen:
            seen.add(k)
            out.append(it)
    return out


def _load_related(doc: Doc, ds_file: str, options: Options, res: FileResult) -> Optional[Doc]:
    """Load the DeepSpeed JSON an Accelerate config names. Accelerate (HfDeepSpeedConfig)
    accepts a path, inline JSON text, or base64-encoded JSON; paths are opened relative to
    the launch working directory."""
    pos = doc.pos(("deepspeed_config", "deepspeed_config_file"))
    stripped = ds_file.strip()
    if stripped.startswith("{"):
        name = f"{doc.name}#deepspeed_config_file"
        text, src = stripped, None
    else:
        path = ds_file if os.path.isabs(ds_file) else os.path.join(options.cwd, ds_file)
        if not os.path.isfile(path):
            decoded = _base64_json(stripped)
            if decoded is None:
                return None
            try:
                return _load_json(decoded, f"{doc.name}#deepspeed_config_file(base64)", None)
            except InputError as e:
                _related_error(res, doc, ds_file, str(e), pos)
                return None
        try:
            text = core.read_input_file(path)
        except InputError as e:
            _related_error(res, doc, ds_file, str(e), pos)
            return None
        name = ds_file if not os.path.isabs(ds_file) else path
        src = os.path.abspath(path)
    try:
        return _load_json(text, name, src)
    except InputError as e:
        _related_error(res, doc, ds_file, str(e), pos)
        return None


def _base64_json(s: str) -> Optional[str]:
    """accelerate's HfDeepSpeedConfig also accepts urlsafe-base64-encoded JSON text."""
    import base64
    import binascii
    if len(s) < 8 or len(s) > loader_yaml.MAX_BYTES:
        return None
    try:
        text = base64.urlsafe_b64decode(s).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return text if text.lstrip().startswith("{") else None


def _related_error(res: FileResult, doc: Doc, ds_file: str, message: str, pos) -> None:
    res.findings.append(Finding(
        rule="input-related-file-unreadable", severity="error",
        message=f"deepspeed_config_file {ds_file!r} cannot be used: {message}",
        hint="fix the DeepSpeed JSON (accelerate reads it with json.load)",
        path=("deepspeed_config", "deepspeed_config_file"), line=pos[0], col=pos[1], file=doc.name))


def validate_text(text: str, name: str = "<stdin>", fmt: str = "auto",
                  options: Optional[Options] = None, source_path: Optional[str] = None) -> FileResult:
    """Library entry: validate one config given as text. Raises InputError for fatal input."""
    options = options or Options(cwd=os.getcwd())
    try:
        doc = parse_input(text, name, source_path, fmt)
    except RecursionError:
        raise InputError("nesting too deep to parse") from None
    return validate_doc(doc, fmt, options)


def _one_line(s: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(s))


def _fmt_text(f: Finding) -> str:
    loc = f"{f.file}:{f.line}:{f.col}" if f.line is not None else f"{f.file}"
    kp = f" [{_one_line(f.key_path())}]" if f.path else ""
    out = f"{loc}: {f.severity} {f.rule}: {_one_line(f.message)}{kp}"
    if f.hint:
        out += f"\n    hint: {_one_line(f.hint)}"
    return out


def list_rules(output: str, out: TextIO) -> None:
    _rules_loaded()
    rows = [{"id": r.id, "severity": r.severity, "family": r.family, "summary": r.summary,
             "source": r.source, "consumers": list(r.consumers)} for r in core.REGISTRY.values()]
    rows.sort(key=lambda r: (r["family"], r["id"]))
    if output == "json":
        json.dump({"rules": rows}, out, indent=2)
        out.write("\n")
        return
    for r in rows:
        out.write(f"{r['id']:<44} {r['severity']:<8} {r['family']:<11} {r['summary']}\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
    p.add_argument("--version", action="version", version=version_line("validate_backend_config.py"))
    p.add_argument("--strict", action="store_true", help="warnings also make the exit code 1")
    p.add_argument("--list-rules", action="store_true", help="list every rule and exit")
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
                        "and task launches")
    from .jobspec.cli_jobspec import EPILOG as _JOBSPEC_EPILOG
    p.epilog = (p.epilog or "") + "\n" + _JOBSPEC_EPILOG
    # --- end job specs ---
    from .launch.cli_launch import EPILOG as _LAUNCH_EPILOG
    p.epilog = (p.epilog or "") + "\n" + _LAUNCH_EPILOG
    return p


class _ArgParseExit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def summary_line(n_err: int, n_warn: int, n_info: int, n_input: int, what: str) -> str:
    """The closing stderr line of text output (file checks and launch checks alike)."""
    ie = f", {n_input} input error(s)" if n_input else ""
    return f"{n_err} error(s), {n_warn} warning(s), {n_info} info{ie} in {what}\n"


def main(argv: Optional[Sequence[str]] = None, stdin: Optional[TextIO] = None,
         stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            args = parser.parse_args(list(argv) if argv is not None else None)
        finally:
            sys.stdout, sys.stderr = old_out, old_err
    except SystemExit as e:  # argparse: --help (0) or usage error (2)
        return int(e.code or 0) if isinstance(e.code, int) else EXIT_INPUT

    if args.list_rules:
        list_rules(args.output, out)
        return EXIT_OK
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

    findings = _dedupe([f for r in results for f in r.findings],
                       lambda f: (f.file, f.line, f.col, f.rule, f.severity, f.message, f.hint, f.path))
    skipped = _dedupe([s for r in results for s in r.skipped], lambda s: (s["file"], s["check"]))
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
        json.dump(doc, out, indent=2, default=str)
        out.write("\n")
    else:
        for f in findings:
            out.write(_fmt_text(f) + "\n")
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
        for line in _dedupe(notes, lambda x: x):
            err.write(_one_line(line) + "\n")
        err.write(summary_line(n_err, n_warn, n_info, len(input_errors), f"{len(results)} file(s)"))

    if input_errors:
        return EXIT_INPUT
    if n_err or (args.strict and n_warn):
        return EXIT_FINDINGS
    return EXIT_OK
