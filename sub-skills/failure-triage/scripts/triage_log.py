#!/usr/bin/env python3
"""Find the root cause in a failed distributed-training log and say what fixes it.

Standard library + PyYAML only; never imports torch, accelerate or deepspeed.
Run with --help for usage, examples and exit codes. The engine is the package triage/ beside
this file (grammar, catalog, engine, reader); this file is its command line.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from triage import grammar  # noqa: E402
from triage.catalog import (CATALOG_DIR, MATCH_CHARS, OPTIONAL, REQUIRED, ROLES, Catalog,  # noqa: E402,F401
                            CatalogError, Entry, entry_doc, match_order)
from triage.clean import clean, timestamp  # noqa: E402,F401
from triage.engine import (FOLLOW_LINES, MAX_BYTES, MAX_FINDINGS, MAX_LINE, MAX_SECONDS, MAX_TEXT,  # noqa: E402,F401
                           _Triage, load_catalog, triage_lines, triage_text)
from triage.reader import Deadline, feed_stream, iter_lines, open_tail  # noqa: E402
from triage.version import bundle_version  # noqa: E402

_iter_binary = iter_lines  # the line reader under its old name (benchmarks/bench_triage.py)

EXIT_MATCHED, EXIT_UNMATCHED, EXIT_USAGE = 0, 1, 2

# The pinned library versions the catalog's signatures were reproduced against (references/versions.md).
MIRRORS = "accelerate 1.15.0, deepspeed 0.19.8, torch 2.13.0, DALLE-pytorch 1.6.6"


def version_line(prog: str) -> str:
    """What ``PROG --version`` prints."""
    return f"{prog} {bundle_version()} (pytorch-distributed-training bundle; signatures mirror {MIRRORS})"


HELP_EPILOG = """\
examples:
  triage_log.py train.log                      # text report: root cause, fix, secondary findings
  triage_log.py rank0.log rank1.log            # one file per rank: the first failure in time wins
  kubectl logs job/train | triage_log.py -     # read stdin
  triage_log.py --output json train.log        # one JSON document (contract below)
  triage_log.py --explain nccl-watchdog-timeout          # one entry or class: cause, fix, wordings
  triage_log.py --search "cannot find -lcurand"          # entries matching a message, best first
  triage_log.py --list-signatures              # the catalog: id, role, library, versions
  triage_log.py --list-classes                 # the failure classes of the grammar

what it does:
  Cleans the log (ANSI colours, [rank3]: / [default0]: / "3: " / "host: " prefixes, Rich-boxed
  tracebacks, CR and CRLF, NUL bytes, invalid UTF-8, two ranks' output glued into one line), then
  finds every line that states a failure, whatever its message (the grammar: Python exceptions,
  compiler and linker errors, NCCL and c10d errors, CUDA errors, signals and exit codes of
  torchrun / deepspeed / accelerate launch / srun, the kernel's Killed, torchrun's root-cause
  block). The FIRST failure is the root cause: in time when the lines of several files or ranks
  carry timestamps, else in input order. A catalog entry that matches the line gives the
  signature, cause and fix; otherwise the failure's class gives them. Launcher summaries,
  signals, watchdog echoes and a build's CalledProcessError after its compiler error are cascade;
  with nothing else in the log, a SIGKILL (host OOM killer), a crash, or the first watchdog
  timeout becomes the root cause.

json output:
  {"root_cause": {"line", "rank", "text", "signature", "cause", "fix", "reference", "class",
                  "file", "file_line"[, "more"]} or null,
   "findings": [ {same keys + "role": "root"|"cascade"|"warning"} ]}
  line is 1-based in the concatenated input, file_line in its file; rank is an int or null;
  class is the grammar class (triage_log.py --list-classes); more holds continuation lines.

bounds:
  At most --max-bytes per input are read (for a regular file larger than that, its tail is read
  and line numbers still count the skipped head); lines are cut at --max-line characters and
  patterns see their first 2048; the analysis stops after --max-seconds. A notice on stderr says
  when input was skipped or cut.

flight-recorder dumps:
  triage_log.py /tmp/fr/        # a folder of per-rank dumps, or the files, or fr_trace's output
  Inputs that are dumps (found by their first bytes; --fr-dump forces it) go to fr_dump.py, which
  names the rank and collective that diverged; exit 0 when it names one, 1 when the dumps agree.
  Pickled dumps are never unpickled (references/flight-recorder.md).

exit codes:
  0  a root cause was found and matched a catalog entry (--explain: found; --search: a match)
  1  a failure was found but matched no catalog entry, or no failure was found (--explain: unknown
     id; --search: nothing matched)
  2  usage error, unreadable input or unreadable catalog
"""


# --------------------------------------------------------------------------- reports

def exit_code(result: dict) -> int:
    root = result.get("root_cause")
    return EXIT_MATCHED if root and root.get("signature") else EXIT_UNMATCHED


def render_text(result: dict) -> str:
    out = []
    root = result["root_cause"]
    if root is None:
        out.append("No failure found in the log.")
    else:
        where = f"line {root['line']}" + (f", rank {root['rank']}" if root["rank"] is not None else "")
        if root.get("file") and root.get("file_line") != root["line"]:
            where += f", {root['file']} line {root['file_line']}"
        out.append(f"ROOT CAUSE ({where}): {root['text']}")
        for more in root.get("more") or []:
            out.append(f"  ...{more}")
        out.append(f"  signature: {root['signature'] or 'unknown (no catalog entry matches)'}")
        if root.get("class"):
            out.append(f"  class:     {root['class']}")
        out.append(f"  cause:     {root['cause']}")
        out.append(f"  fix:       {root['fix']}")
        if root.get("reference"):
            out.append(f"  read:      {root['reference']}")
    others = [f for f in result["findings"] if not (root and f["line"] == root["line"] and f["role"] == "root")]
    if others:
        out.append("")
        out.append("SECONDARY FINDINGS (not the root cause):")
        for f in others:
            rank = f" rank {f['rank']}" if f["rank"] is not None else ""
            sig = f" [{f['signature']}]" if f["signature"] else (f" [{f['class']}]" if f.get("class") else "")
            out.append(f"  line {f['line']}{rank} {f['role']}{sig}: {f['text'][:200]}")
    return "\n".join(out) + "\n"


def list_signatures(cat: Catalog, fmt: str) -> str:
    rows = [{"id": e.id, "role": e.role, "library": e.library, "versions": e.versions,
             "reference": e.reference} for e in cat.entries]
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    lines = [f"{r['id']}\t{r['role']}\t{r['library']}\t{r['versions']}" for r in rows]
    return "\n".join(lines) + f"\n{len(rows)} signatures\n"


def class_doc(fc) -> dict:
    return {"class": fc.id, "role": fc.role, "cause": fc.cause, "fix": fc.fix, "reference": fc.reference,
            "after": sorted(fc.after), "examples": fc.examples("Matches")}


def list_classes(fmt: str) -> str:
    rows = [class_doc(fc) for fc in grammar.CLASSES]
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    return "\n".join(f"{r['class']}\t{r['role']}\t{r['reference']}" for r in rows) + f"\n{len(rows)} classes\n"


def explain(cat: Catalog, ident: str, fmt: str) -> tuple[str, int]:
    doc = cat.explain(ident)
    if doc is None and ident in grammar.BY_ID:
        doc = class_doc(grammar.BY_ID[ident])
    if doc is None:
        near = [e.id for _, e in cat.search(ident.replace("-", " "), limit=5)]
        msg = f"triage_log.py: no catalog entry or class {ident!r}" + (f"; close: {', '.join(near)}" if near else "")
        return msg + "\n", EXIT_UNMATCHED
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n", EXIT_MATCHED
    out = []
    for k, v in doc.items():
        if k in ("wordings", "examples", "after"):
            if v:
                out.append(f"{k}:")
                for w in v:
                    out.append(f"  - {w['text']}  ({w['versions']})" if isinstance(w, dict) else f"  - {w}")
            continue
        out.append(f"{k}: {v}")
    return "\n".join(out) + "\n", EXIT_MATCHED


def search(cat: Catalog, text: str, fmt: str) -> tuple[str, int]:
    hits = cat.search(text)
    fc, _ = grammar.classify(clean(text)[0].strip())
    if fmt == "json":
        doc = {"class": fc.id if fc else None,
               "entries": [{"score": s, "id": e.id, "role": e.role, "cause": e.cause,
                            "reference": e.reference} for s, e in hits]}
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n", EXIT_MATCHED if hits else EXIT_UNMATCHED
    out = [f"class: {fc.id} ({fc.reference})" if fc else "class: none (not a failure line to the grammar)"]
    for s, e in hits:
        out.append(f"{s:5.1f}  {e.id}\t{e.role}\t{e.cause[:120]}")
    if not hits:
        out.append("no catalog entry matches; --explain CLASS gives the class's cause and fix")
    return "\n".join(out) + "\n", EXIT_MATCHED if hits else EXIT_UNMATCHED


# --------------------------------------------------------------------------- CLI

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 1 or n > 1 << 40:
        raise argparse.ArgumentTypeError(f"out of range: {value}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="triage_log.py", description=__doc__.splitlines()[0],
                epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="*", metavar="LOG", help="log files, or - for stdin")
    p.add_argument("--version", action="version", version=version_line("triage_log.py"))
    p.add_argument("--output", choices=("text", "json"), default="text", help="report format (default text)")
    p.add_argument("--list-signatures", action="store_true", help="print the catalog and exit")
    p.add_argument("--list-classes", action="store_true", help="print the grammar's failure classes and exit")
    p.add_argument("--explain", metavar="ID", help="print one catalog entry or class (cause, fix, wordings) and exit")
    p.add_argument("--search", metavar="TEXT", help="print the catalog entries matching TEXT, best first, and exit")
    p.add_argument("--fr-dump", action="store_true",  # flight-recorder dumps (fr_dump.py)
                   help="read the inputs as flight-recorder dumps or fr_trace output (found without it too)")
    p.add_argument("--catalog", metavar="DIR", help="catalog folder (default: the sub-skill's catalog/)")
    p.add_argument("--max-bytes", type=_positive, default=MAX_BYTES,
                   help=f"bytes read per input (default {MAX_BYTES})")
    p.add_argument("--max-line", type=_positive, default=MAX_LINE,
                   help=f"characters kept per line (default {MAX_LINE})")
    p.add_argument("--max-seconds", type=_positive, default=MAX_SECONDS,
                   help=f"time budget for the analysis (default {MAX_SECONDS})")
    return p


def _write(stream, text: str):
    try:
        stream.write(text)
        stream.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
    except UnicodeEncodeError:
        try:
            stream.buffer.write(text.encode(getattr(stream, "encoding", None) or "utf-8", "backslashreplace"))
            stream.flush()
        except Exception:
            pass


def triage_inputs(inputs: list[str], cat: Catalog, max_bytes: int, max_line: int, max_seconds: float,
                  notices: list) -> dict:
    """Triage log files (or "-" for stdin) as one input; raises OSError for unreadable input."""
    t = _Triage(cat)
    deadline = time.monotonic() + max_seconds
    n = 0
    try:
        for path in inputs:
            if path == "-":
                t.begin_file("stdin", n)
                n = feed_stream(t, sys.stdin.buffer, "stdin", n, max_bytes, max_line, notices, deadline)
                continue
            fh, skipped = open_tail(path, max_bytes, notices)
            with fh:
                n += skipped
                t.begin_file(path, n - skipped)
                n = feed_stream(t, fh, path, n, max_bytes, max_line, notices, deadline)
    except Deadline as stop:
        notices.append(f"analysis stopped at line {stop.args[0]} after {max_seconds:g} s (--max-seconds)")
    return t.result()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cat = load_catalog(args.catalog)
    except CatalogError as exc:
        _write(sys.stderr, f"triage_log.py: error: {exc}\n")
        return EXIT_USAGE
    if args.list_signatures:
        _write(sys.stdout, list_signatures(cat, args.output))
        return 0
    if args.list_classes:
        _write(sys.stdout, list_classes(args.output))
        return 0
    if args.explain is not None or args.search is not None:
        text, rc = explain(cat, args.explain, args.output) if args.explain is not None else \
            search(cat, args.search, args.output)
        _write(sys.stdout if rc == EXIT_MATCHED or args.search is not None else sys.stderr, text)
        return rc
    if not args.inputs:
        _write(sys.stderr, "triage_log.py: error: give one or more log files, or - for stdin (see --help)\n")
        return EXIT_USAGE
    if args.inputs.count("-") > 1:
        _write(sys.stderr, "triage_log.py: error: stdin (-) can be given once\n")
        return EXIT_USAGE
    # flight-recorder dumps (fr_dump.py beside this script; a copy without it still triages logs)
    fr_path = os.path.join(HERE, "fr_dump.py")
    if args.fr_dump and not os.path.isfile(fr_path):
        _write(sys.stderr, "triage_log.py: error: --fr-dump needs fr_dump.py beside this script\n")
        return EXIT_USAGE
    if os.path.isfile(fr_path) and (args.fr_dump or any(p != "-" and os.path.exists(p) for p in args.inputs)):
        import fr_dump  # HERE is on sys.path
        if args.fr_dump or any(p != "-" and fr_dump.is_dump_path(p) for p in args.inputs):
            try:
                report, fr_notices = fr_dump.triage_dumps(args.inputs, args.max_bytes)
            except fr_dump.FrDumpError as exc:
                _write(sys.stderr, f"triage_log.py: error: {exc}\n")
                return EXIT_USAGE
            for note in fr_notices:
                _write(sys.stderr, f"triage_log.py: notice: {note}\n")
            _write(sys.stdout, fr_dump.render(report, args.output))
            return fr_dump.exit_code(report)
    for path in args.inputs:
        if path != "-" and not os.path.exists(path):
            _write(sys.stderr, f"triage_log.py: error: {path}: no such file\n")
            return EXIT_USAGE
        if path != "-" and os.path.isdir(path):
            _write(sys.stderr, f"triage_log.py: error: {path}: is a directory\n")
            return EXIT_USAGE
    notices: list[str] = []
    # ---- input dispatch: log files and stdin go to the engine (other input kinds hook in here) ----
    try:
        result = triage_inputs(args.inputs, cat, args.max_bytes, args.max_line, args.max_seconds, notices)
    except OSError as exc:
        _write(sys.stderr, f"triage_log.py: error: cannot read input: {exc.strerror or exc}\n")
        return EXIT_USAGE
    # ---- end of input dispatch ----
    for note in notices:
        _write(sys.stderr, f"triage_log.py: notice: {note}\n")
    if args.output == "json":
        _write(sys.stdout, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    else:
        _write(sys.stdout, render_text(result))
    return exit_code(result)


if __name__ == "__main__":
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except (AttributeError, ValueError):
        pass
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except MemoryError:
        sys.stderr.write("triage_log.py: error: out of memory\n")
        sys.exit(EXIT_USAGE)
