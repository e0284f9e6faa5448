#!/usr/bin/env python3
"""Measure triage_log.py on the labelled real logs: root-line hits, fix-keyword hits, time per log.

Reads tests/failure_triage/real_logs/labels.yaml (a list of {file, source, root_line, root_rank,
resolution, fix_keywords, expected_signature}) and triages every log through the script's Python
API (triage_lines over the file's lines, as the CLI reads them).

  root-line hit    the reported root_cause.line equals the labelled root_line
  fix-keyword hit  the reported fix (lower-cased) contains at least one of fix_keywords
  signature        the reported signature equals expected_signature (informational)

Examples:
  python3 benchmarks/bench_triage.py
  python3 benchmarks/bench_triage.py --misses          # list each miss with what was reported
  python3 benchmarks/bench_triage.py --output json
  python3 benchmarks/bench_triage.py --repeat 20       # more timing samples per log

Exit codes: 0 measured; 2 labels or script unreadable.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
LABELS = REPO / "tests" / "failure_triage" / "real_logs" / "labels.yaml"


def load_script():
    spec = importlib.util.spec_from_file_location("triage_log_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_lines(tri, path: Path):
    """The file's lines exactly as the CLI reads them (same bounded reader)."""
    with open(path, "rb") as fh:
        return [ln for _, ln in tri._iter_binary(fh, 1 << 40, tri.MAX_LINE, [], str(path))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="\n".join(__doc__.splitlines()[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", default=str(LABELS), help="labels.yaml (default: the test set)")
    ap.add_argument("--catalog", help="catalog folder (default: the sub-skill's catalog/)")
    ap.add_argument("--repeat", type=int, default=5, help="timing runs per log (default 5)")
    ap.add_argument("--throughput-mib", type=int, default=16,
                    help="also time a synthetic training log of this many MiB (0: skip; default 16)")
    ap.add_argument("--misses", action="store_true", help="print each miss")
    ap.add_argument("--output", choices=("text", "json"), default="text")
    args = ap.parse_args(argv)
    try:
        import yaml
        labels = yaml.safe_load(Path(args.labels).read_text(encoding="utf-8"))
        tri = load_script()
        catalog = tri.load_catalog(args.catalog)
    except Exception as exc:  # noqa: BLE001 - a benchmark reports and stops
        print(f"bench_triage: cannot start: {exc}", file=sys.stderr)
        return 2
    base = Path(args.labels).parent
    rows = []
    for lab in labels:
        path = base / lab["file"]
        lines = read_lines(tri, path)
        times = []
        res = None
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            res = tri.triage_lines(lines, catalog)
            times.append(time.perf_counter() - t0)
        root = res["root_cause"] or {}
        fix = (root.get("fix") or "").lower()
        rows.append({
            "file": lab["file"],
            "root_hit": root.get("line") == lab["root_line"],
            "fix_hit": any(k.lower() in fix for k in lab.get("fix_keywords") or []),
            "signature_hit": root.get("signature") == lab.get("expected_signature"),
            "reported_line": root.get("line"), "labelled_line": lab["root_line"],
            "reported_signature": root.get("signature"), "expected_signature": lab.get("expected_signature"),
            "seconds": min(times), "lines": len(lines),
        })
    n = len(rows)
    secs = [r["seconds"] for r in rows]
    summary = {
        "logs": n,
        "root_line_hit_pct": round(100 * sum(r["root_hit"] for r in rows) / n, 1) if n else 0.0,
        "fix_keyword_hit_pct": round(100 * sum(r["fix_hit"] for r in rows) / n, 1) if n else 0.0,
        "signature_hit_pct": round(100 * sum(r["signature_hit"] for r in rows) / n, 1) if n else 0.0,
        "time_per_log_ms_mean": round(1000 * statistics.mean(secs), 3) if n else 0.0,
        "time_per_log_ms_max": round(1000 * max(secs), 3) if n else 0.0,
        "catalog_entries": len(catalog.entries),
    }
    if args.throughput_mib > 0:
        noise = [f"step {i} loss={1 / (i + 1):.4f} lr=1e-4 grad_norm=0.98 tokens/s=12345\n" for i in range(4096)]
        lines, size = [], 0
        while size < args.throughput_mib * 1024 * 1024:
            lines.extend(noise)
            size += sum(len(x) for x in noise)
        lines.extend(["Traceback (most recent call last):\n", '  File "train.py", line 1, in <module>\n',
                      "ValueError: Tried to find ckpt but folder does not exist\n"])
        t0 = time.perf_counter()
        res = tri.triage_lines(lines, catalog)
        dt = time.perf_counter() - t0
        summary["throughput_mib_per_s"] = round(size / dt / 1024 / 1024, 1)
        summary["throughput_found_root"] = (res["root_cause"] or {}).get("line") == len(lines)
    if args.output == "json":
        print(json.dumps({"summary": summary, "logs": rows}, indent=2))
        return 0
    print(f"logs: {n}   catalog entries: {summary['catalog_entries']}")
    print(f"root-line hit:    {summary['root_line_hit_pct']}%")
    print(f"fix-keyword hit:  {summary['fix_keyword_hit_pct']}%")
    print(f"signature match:  {summary['signature_hit_pct']}%")
    print(f"time per log:     mean {summary['time_per_log_ms_mean']} ms, max {summary['time_per_log_ms_max']} ms "
          f"(best of {args.repeat}, in-process, catalog loaded once)")
    if "throughput_mib_per_s" in summary:
        print(f"throughput:       {summary['throughput_mib_per_s']} MiB/s on a {args.throughput_mib} MiB synthetic log "
              f"(root found at its last line: {summary['throughput_found_root']})")
    if args.misses:
        for r in rows:
            if not (r["root_hit"] and r["fix_hit"]):
                print(f"  MISS {r['file']}: line {r['reported_line']} (label {r['labelled_line']}), "
                      f"signature {r['reported_signature']} (expected {r['expected_signature']}), "
                      f"fix hit {r['fix_hit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
