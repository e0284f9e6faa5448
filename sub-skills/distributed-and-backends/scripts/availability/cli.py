"""Command line of check_backend_availability.py."""

import argparse
import os
import platform
import sys
import time

from . import CHECKER_VERSION, SCHEMA_VERSION
from .version import version_line
from .targets import BF16_MIN_CC, CAPABILITIES, FP8_MIN_CC, TARGETS, WORKFLOWS

EXIT_OK, EXIT_REQUIRED, EXIT_USAGE, EXIT_PROBE, EXIT_INTERNAL = 0, 1, 2, 3, 4
MAX_TIMEOUT = 86400

DESCRIPTION = """\
Answer "which PyTorch distributed / precision backends can this environment use?"
without launching training.  It inspects the environment of the Python
interpreter that runs it (its sys.path, not the current directory).

Tiers:
  default         imports nothing it reports on: versions from *.dist-info /
                  *.egg-info on sys.path, build facts from plain files
                  (torch/version.py, deepspeed/git_version_info_installed.py,
                  deepspeed/runtime/config.py, accelerate/utils/constants.py),
                  then a yes/no/unknown verdict with a reason per workflow.
  --probe         imports each installed package in its own child process
                  (own process group, --timeout) and classifies the outcome:
                  ok, not_installed, import_error, error (exception type and
                  first line), killed (signal), timed_out, exited.
  --include-cuda  one child imports torch and reports CUDA devices, compute
                  capability, native bf16 (cc >= 8.0), FP8 (cc >= 8.9), NCCL
                  version and one tiny allocation; "no CUDA" is a clean answer.

Verdicts: "yes" only when the software prerequisites hold AND the CUDA child saw
a suitable GPU; "no" names a definite blocker; "unknown" otherwise (e.g. no GPU
checked).  The checker never launches training, never initialises a process
group, never installs or writes anything.
"""


def epilog():
    import textwrap
    names = "\n".join(textwrap.wrap(", ".join(TARGETS), 76, initial_indent="  ", subsequent_indent="  "))
    wf = "\n".join("  %-27s %s" % (k, v) for k, v in WORKFLOWS.items())
    caps = "\n".join("  %-27s %s" % (k, v) for k, v in CAPABILITIES.items())
    return """\
--require vocabulary (repeat the flag or separate names with commas):
  packages (met when installed with an importable module, no conflicting
  distribution, the NVIDIA flavour for apex, and --probe ok if probed):
%s
  workflows (met when the verdict is "yes"; "unknown" counts as unmet):
%s
  capabilities (imply --include-cuda):
%s

package states: installed, not_installed, metadata_only (distribution metadata
  without its module), module_only (module without distribution metadata).
  Conflicts: two or more distributions whose top_level.txt / RECORD claim one
  reported module; NCCL: every nvidia-nccl-cuXX wheel, checked against torch's
  Requires-Dist pin.

JSON document (--json): schema_version, checker, python, host, packages
  {name: state, dist, version, import_name, module_path, module_kind, facts,
  notes}, conflicts, duplicate_installs, nccl_wheels, torch_backend_plugins,
  probes {name: status, module, exception, message, signal, timeout, ...}
  (with --probe), cuda (with --include-cuda), verdicts {workflow: verdict,
  reason, question}, requirements [{name, met, detail}], crashed, advice
  (lines such as: rerun with the training environment's interpreter), exit_code.

exit codes:
  0  ran; every --require'd item met (or none given)
  1  at least one --require'd item unmet (missing, broken, "no" or "unknown")
  2  usage error (unknown flag or --require name, bad value)
  3  a probe or the CUDA child crashed (signal, exit without a result) or timed out
  4  internal error of the checker itself
  130, 128+N  interrupted by Ctrl-C, or by SIGTERM/SIGHUP (N); children killed first
  Precedence when several apply: 2, 4, 1, 3.
  A closed or broken stdout (e.g. piped into head) does not change the code:
  it still answers --require; a one-line note goes to stderr.

examples:
  python check_backend_availability.py
  python check_backend_availability.py --json
  python check_backend_availability.py --require accelerate-fsdp2
  python check_backend_availability.py --probe --timeout 60 --format json
  python check_backend_availability.py --probe --only torch,deepspeed
  python check_backend_availability.py --include-cuda --require bf16,nccl
  /path/to/venv/bin/python check_backend_availability.py --require dalle-deepspeed
""" % (names, wf, caps)


def _emit(stream, text):
    """Write to stdout/stderr whatever state it is in; True when the text was delivered.

    A stream may be closed (``>&-`` makes it None), its reader gone (``| head -c1``:
    BrokenPipeError, then fd 1 is pointed at /dev/null so that the interpreter's final
    flush stays quiet) or unable to encode (``PYTHONIOENCODING=ascii``, ``LC_ALL=C``,
    undecodable file names: the streams use errors="backslashreplace", see main)."""
    if stream is None:
        return False
    try:
        stream.write(text)
        stream.flush()
        return True
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass
        return False
    except (OSError, ValueError, UnicodeError):
        return False


def _say(message):
    _emit(sys.stderr, "check_backend_availability: %s\n" % message)


def _robust_streams():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass


class _Terminated(BaseException):
    pass


def _terminate_cleanly():
    """SIGTERM / SIGHUP become an exception, so that running probe children (own sessions,
    out of reach of the signal sent to us) are killed on the way out; exit 128 + signal.

    SIGINT is installed explicitly too: a parent that ignored SIGINT (`nohup`, a background job
    of a non-interactive shell) passes SIG_IGN on, and Python then installs no KeyboardInterrupt
    handler, so a later SIGINT would leave the checker and its children running."""
    import signal

    def handler(signum, _frame):
        raise _Terminated(signum)

    wanted = [("SIGTERM", handler), ("SIGHUP", handler), ("SIGINT", signal.default_int_handler)]
    for sig, func in wanted:
        try:
            signal.signal(getattr(signal, sig), func)
        except (AttributeError, ValueError, OSError):  # not on this platform, or not the main thread
            pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        _say("error: %s (see --help)" % message)
        sys.exit(EXIT_USAGE)

    def _print_message(self, message, file=None):
        if message:
            _emit(file or sys.stderr, message)


def build_parser():
    p = _Parser(prog="check_backend_availability.py", description=DESCRIPTION, epilog=epilog(),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--probe", action="store_true",
                   help="import each installed package in a child process and classify the outcome")
    p.add_argument("--only", metavar="NAMES", action="append", default=[],
                   help="with --probe: probe only these packages (comma-separated package names)")
    p.add_argument("--include-cuda", action="store_true",
                   help="query CUDA devices, capabilities, NCCL and one tiny allocation in a child process")
    p.add_argument("--json", action="store_true", help="print one JSON document (same as --format json)")
    p.add_argument("--format", choices=("text", "json"), default=None, help="output format (default: text)")
    p.add_argument("--require", metavar="NAME", action="append", default=[],
                   help="make the exit code answer: 1 unless NAME is met (see vocabulary below)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="per child process (default 30); the child's whole process group is killed after it")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="children run at once with --probe (default: CPU count, at most 4)")
    p.add_argument("--version", action="version", version=version_line("check_backend_availability.py"))
    return p


def _jsonable(obj):
    """Strict JSON values only: build files can hold tuple keys, sets, bytes, 1e999 (literal_eval
    accepts them all), which json.dumps refuses or writes as non-standard Infinity / NaN."""
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else repr(obj)
    if isinstance(obj, dict):
        return {(k if isinstance(k, str) else repr(k)): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_jsonable(v) for v in obj), key=repr)
    return repr(obj) if isinstance(obj, (bytes, complex)) else str(obj)


def _split(values, flag, parser, vocab):
    """Comma/repeat-separated names -> canonical vocabulary names, in order, without repeats.

    Matching ignores case and the difference between -, _ and . (``Dalle_PyTorch`` is
    ``dalle-pytorch``); an empty name or one outside the vocabulary is a usage error."""
    canon = {_norm(n): n for n in vocab}
    out, bad = [], []
    for v in values:
        parts = [x.strip() for x in v.split(",")]
        if not any(parts):
            parser.error("empty %s name" % flag)
        for x in parts:
            if not x:
                continue
            name = canon.get(_norm(x))
            if name is None:
                bad.append(x)
            elif name not in out:
                out.append(name)
    if bad:
        parser.error("unknown %s name(s): %s" % (flag, ", ".join(_with_suggestion(x, canon) for x in bad)))
    return out


def _with_suggestion(name, canon):
    """'deepsped' -> 'deepsped (did you mean deepspeed?)' when a vocabulary name is close."""
    import difflib
    close = difflib.get_close_matches(_norm(name), list(canon), n=1, cutoff=0.6)
    return "%s (did you mean %s?)" % (name, canon[close[0]]) if close else name


def _norm(name):
    import re
    return re.sub(r"[-_.]+", "-", name).lower()


def _scan_path(script_dir):
    path, seen = [], set()
    for p in sys.path:
        # a .pth file or sitecustomize can put bytes, a pathlib.Path or None on sys.path: bytes are
        # decoded the OS way, anything else that is not a str is left out of the scan
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        if not isinstance(p, str):
            continue
        try:
            if os.path.abspath(p or ".") == script_dir:
                continue
            real = os.path.realpath(p or ".")
        except (OSError, ValueError):
            real = p
        # one directory reached twice (a symlink, "dir" and "dir/"): imports only ever see the
        # first, so scanning both would report every package in it as installed twice
        if p not in path and real not in seen:
            path.append(p)
            seen.add(real)
    return path


def main(argv=None):
    _robust_streams()
    _terminate_cleanly()
    parser = build_parser()
    args = parser.parse_args(argv)
    fmt = "json" if args.json else (args.format or "text")
    requires = _split(args.require, "--require", parser, list(TARGETS) + list(WORKFLOWS) + list(CAPABILITIES))
    only = _split(args.only, "--only", parser, list(TARGETS))
    if args.only and not args.probe:
        parser.error("--only needs --probe")
    if not (0 < args.timeout <= MAX_TIMEOUT):  # also refuses nan and inf: a child must always end
        parser.error("--timeout must be > 0 and <= %d seconds" % MAX_TIMEOUT)
    if args.jobs is not None and args.jobs < 1:
        parser.error("--jobs must be >= 1")
    include_cuda = args.include_cuda or any(r in CAPABILITIES for r in requires)

    try:
        report = run(args, include_cuda, requires, only)
        if fmt == "json":
            import json
            text = json.dumps(_jsonable(report), indent=2, sort_keys=False, allow_nan=False) + "\n"
        else:
            from .render import render_text
            text = render_text(report)
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except _Terminated as sig:
        _say("terminated by signal %d" % sig.args[0])
        return 128 + sig.args[0]
    except Exception as exc:  # the checker's own bug: one line, exit 4
        _say("internal error: %s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else ""))
        return EXIT_INTERNAL
    if not _emit(sys.stdout, text):
        _say("stdout is closed or its reader went away; report not (fully) written; exit code %d"
             % report["exit_code"])
    return report["exit_code"]


def _advice(packages):
    """Lines for a human: today only the wrong-interpreter case (nothing tracked is installed)."""
    if packages and all(rec["state"] == "not_installed" for rec in packages.values()):
        return ["none of the %d tracked packages is installed for %s: rerun the checker with the training "
                "environment's interpreter, e.g. /path/to/venv/bin/python check_backend_availability.py"
                % (len(packages), sys.executable or "this interpreter")]
    return []


def run(args, include_cuda, requires, only):
    from . import scan
    from .verdicts import Verdicts, clean_cuda, cuda_summary, probe_summary

    t0 = time.perf_counter()
    script_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = _scan_path(script_dir)
    env = scan.Environment(path)
    packages = scan.package_report(env)
    conflicts = scan.conflicts_report(env, packages)
    torch_dist = env.dist("torch")
    nccl = scan.nccl_report(env, torch_dist)
    report = {
        "schema_version": SCHEMA_VERSION,
        "checker": {"version": CHECKER_VERSION,
                    "tiers": ["static"] + (["probe"] if args.probe else []) + (["cuda"] if include_cuda else [])},
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "prefix": sys.prefix, "venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
                   "platform": sys.platform, "machine": platform.machine(), "path_scanned": path},
        "host": scan.host_hints(),
        "packages": packages,
        "conflicts": conflicts,
        "duplicate_installs": scan.duplicate_dists(env),
        "nccl_wheels": nccl,
        "torch_backend_plugins": scan.torch_plugins(env),
    }
    static_s = time.perf_counter() - t0

    probes = None
    cuda = None
    jobs = []
    if args.probe:
        probes = {}
        for name, (_dists, _mod, probe_mod) in TARGETS.items():
            if only and name not in only:
                continue
            if packages[name]["state"] == "not_installed":
                probes[name] = {"status": "not_installed", "module": probe_mod,
                                "message": "no distribution and no module found (static scan; no child started)"}
                continue
            jobs.append((name, "import", {"module": probe_mod}, {"module": probe_mod}))
    if include_cuda:
        jobs.append(("__cuda__", "cuda", {"bf16_min": list(BF16_MIN_CC), "fp8_min": list(FP8_MIN_CC)},
                     {"module": "torch (CUDA query)"}))
    if jobs:
        from .children import run_children
        parallel = args.jobs or max(1, min(4, os.cpu_count() or 1))
        results = run_children(jobs, args.timeout, parallel, path)
        if include_cuda:
            cuda = clean_cuda(results.pop("__cuda__"))
        if probes is not None:
            probes.update(results)
    if probes is not None:
        probes = {name: probes[name] for name in TARGETS if name in probes}
        plugins = report["torch_backend_plugins"]
        tp = probes.get("torch")
        if tp and tp.get("status") not in ("ok", "not_installed") and plugins:
            tp["hint"] = ("`import torch` loads these torch.backends entry points: %s; if one of them fails, "
                          "TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips the autoload"
                          % ", ".join("%s (%s)" % (x["name"], x["dist"]) for x in plugins))
    if probes is not None:
        report["probes"] = probes
    if include_cuda:
        report["cuda"] = cuda

    v = Verdicts(packages, probes=probes, cuda=cuda, conflicts=conflicts, nccl=nccl)
    verdicts = v.all()
    report["verdicts"] = verdicts

    # requirements
    req_out = []
    for r in requires:
        if r in WORKFLOWS:
            met = verdicts[r]["verdict"] == "yes"
            why = "%s: %s" % (verdicts[r]["verdict"], verdicts[r]["reason"])
        elif r in CAPABILITIES:
            met, why = v.capability(r)
        else:
            blocked = v.need(r)
            met = blocked is None
            why = blocked[1] if blocked else "%s %s installed" % (packages[r]["dist"] or r, packages[r]["version"] or "")
            if met and packages[r]["state"] == "module_only":
                why = "module %s found without distribution metadata (version unknown)" % packages[r]["import_name"]
            if met and r == "apex" and packages[r]["facts"].get("flavour") != "nvidia":
                met, why = False, "installed 'apex' is not NVIDIA apex (%s)" % "; ".join(packages[r]["facts"].get("evidence") or [])
        req_out.append({"name": r, "met": bool(met), "detail": why.strip()})
    report["requirements"] = req_out

    crashed = []
    for name, p in (probes or {}).items():
        if p.get("status") in ("killed", "timed_out", "exited"):
            crashed.append("%s: %s" % (name, probe_summary(p)))
    if cuda is not None and cuda.get("status") in ("killed", "timed_out", "exited"):
        crashed.append("cuda child: %s" % cuda_summary(cuda))
    report["crashed"] = crashed
    report["advice"] = _advice(packages)

    if any(not r["met"] for r in req_out):
        code = EXIT_REQUIRED
    elif crashed:
        code = EXIT_PROBE
    else:
        code = EXIT_OK
    report["exit_code"] = code
    report["checker"]["static_seconds"] = round(static_s, 4)
    report["checker"]["total_seconds"] = round(time.perf_counter() - t0, 4)
    return report
