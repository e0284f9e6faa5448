#!/usr/bin/env python3
"""Measure triage_log.py on the labelled real logs: root-line hits, fix-keyword hits, time per log.

The real-log collection has two parts, each a folder of logs with a labels.yaml (a list of {file,
source, root_line, root_rank, resolution, fix_keywords, expected_signature}):

  dev   tests/failure_triage/real_logs/       catalog patterns and grammar are written from it
  test  tests/failure_triage/real_logs_test/  held out: nobody writing patterns reads it; its
                                               figure is the one that counts

Every log is triaged through the script's Python API (triage_lines over the file's lines, as the
CLI reads them) and each part gets its own figures.

  root-line hit    the reported root_cause.line equals the labelled root_line
  fix-keyword hit  the reported fix (lower-cased) contains at least one of fix_keywords
  signature        the reported signature equals expected_signature (informational)

Examples:
  python3 benchmarks/bench_triage.py                   # both parts
  python3 benchmarks/bench_triage.py --part dev --misses   # misses of the part patterns are written from
  python3 benchmarks/bench_triage.py --output json     # {"parts": {"dev": ..., "test": ...}, ...}
  python3 benchmarks/bench_triage.py --labels other/labels.yaml   # one labels file of your own
  python3 benchmarks/bench_triage.py --repeat 20       # more timing samples per log

JSON output: "parts" maps each part to {"labels", "summary", "logs"}; "summary" and "logs" at the
top level repeat the dev part (or the --labels file) for callers of the one-part format;
"catalog_entries" and the throughput figures are top-level.

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
PARTS = {
    "dev": REPO / "tests" / "failure_triage" / "real_logs" / "labels.yaml",
    "test": REPO / "tests" / "failure_triage" / "real_logs_test" / "labels.yaml",
}
LABELS = PARTS["dev"]


def load_script():
    spec = importlib.util.spec_from_file_location("triage_log_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_lines(tri, path: Path):
    """The file's lines exactly as the CLI reads them (same bounded reader)."""
    with open(path, "rb") as fh:
        return [ln for _, ln in tri._iter_binary(fh, 1 << 40, tri.MAX_LINE, [], str(path))]


def score(tri, catalog, labels: list, base: Path, repeat: int) -> tuple[dict, list]:
    """Triage every labelled log under base; return (summary, rows)."""
    rows = []
    for lab in labels:
        path = base / lab["file"]
        lines = read_lines(tri, path)
        times = []
        res = None
        for _ in range(max(1, repeat)):
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
    return summary, rows


def _noise_lines(n: int) -> list[str]:
    """Training-log noise of three common shapes: DeepSpeed's logger, the HF Trainer's dict, tqdm."""
    out = []
    for i in range(n):
        k = i % 3
        if k == 0:
            out.append(f"[2026-12-01 12:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d}] [INFO] [logging.py:128:log_dist] "
                       f"[Rank 0] step={i}, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]\n")
        elif k == 1:
            out.append(f"{{'loss': {1 / (i + 1):.4f}, 'grad_norm': 0.98, 'learning_rate': 1e-05, 'epoch': {i / 4096:.2f}}}\n")
        else:
            out.append(f" {i % 100:2d}%|#####     | {i}/40960 [01:02<03:04, 12.34it/s]\n")
    return out


def _cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _child_cpu(argv: list[str], bytecode: bool = True) -> float:
    """CPU seconds (user + system) one child process used; bytecode=False runs it with
    PYTHONDONTWRITEBYTECODE=1 and an empty PYTHONPYCACHEPREFIX (every module compiled from source, as
    on a read-only install without bytecode files)."""
    import os
    import subprocess
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    import tempfile
    with tempfile.TemporaryDirectory() as empty:
        if not bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            env["PYTHONPYCACHEPREFIX"] = empty
        before = _cpu()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600, env=env)
        return _cpu() - before


def speed(tri, mib: int, repeat: int) -> dict:
    """Issue 20 item 8: a small log's CPU time against the interpreter's start, a mib-MiB log against
    a plain Python loop over its lines, and random bytes; every figure the best of `repeat` runs."""
    import os
    import random
    import tempfile
    script = str(Path(tri.__file__))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small.log")
        with open(small, "w", encoding="utf-8") as fh:
            fh.write("step 1 loss 0.5\nTraceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                     "    main()\nValueError: Tried to find /ckpt/step_9 but folder does not exist\nstep 2\n")
        _child_cpu([sys.executable, script, small])  # the first run may (re)build the catalog cache and .pyc
        start = min(_child_cpu([sys.executable, "-c", "pass"]) for _ in range(repeat))
        run = min(_child_cpu([sys.executable, script, small]) for _ in range(repeat))
        cold = min(_child_cpu([sys.executable, script, small], bytecode=False) for _ in range(repeat))
        cold_start = min(_child_cpu([sys.executable, "-c", "pass"], bytecode=False) for _ in range(repeat))
        out.update(small_log_cpu_s=round(run, 4), interpreter_start_cpu_s=round(start, 4),
                   small_log_ratio=round(run / start, 1) if start else None,
                   small_log_no_bytecode_cpu_s=round(cold, 4),
                   small_log_no_bytecode_ratio=round(cold / cold_start, 1) if cold_start else None,
                   interpreter_start_no_bytecode_cpu_s=round(cold_start, 4))
        big = os.path.join(tmp, "big.log")
        noise = _noise_lines(6000)
        size = 0
        with open(big, "w", encoding="utf-8") as fh:
            while size < mib * 1024 * 1024:
                fh.writelines(noise)
                size += sum(len(x) for x in noise)
            fh.write("Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n"
                     "ValueError: Tried to find ckpt but folder does not exist\n")
        loops, runs, found = [], [], False
        for _ in range(max(1, min(repeat, 3))):
            t0 = time.process_time()
            with open(big, encoding="utf-8", errors="replace") as fh:
                for _line in fh:
                    pass
            loops.append(time.process_time() - t0)
            t0 = time.process_time()
            res = tri.triage_inputs([big], tri.load_catalog(), tri.MAX_BYTES, tri.MAX_LINE, tri.MAX_SECONDS, [])
            runs.append(time.process_time() - t0)
            found = (res["root_cause"] or {}).get("signature") == "accelerate-load-state-missing-dir"
        out.update(big_log_mib=round(os.path.getsize(big) / 1024 / 1024, 1), big_log_cpu_s=round(min(runs), 3),
                   plain_loop_cpu_s=round(min(loops), 3), big_log_ratio=round(min(runs) / min(loops), 1),
                   big_log_mib_per_s=round(os.path.getsize(big) / 1024 / 1024 / min(runs), 1), big_log_found_root=found)
        rnd = os.path.join(tmp, "random.bin")
        with open(rnd, "wb") as fh:
            fh.write(random.Random(0).randbytes(50 * 1024 * 1024))
        t0 = time.process_time()
        res = tri.triage_inputs([rnd], tri.load_catalog(), tri.MAX_BYTES, tri.MAX_LINE, tri.MAX_SECONDS, [])
        out.update(random_50mb_cpu_s=round(time.process_time() - t0, 3),
                   random_50mb_root=None if res["root_cause"] is None else res["root_cause"]["class"])
    out.update(small_log_target="< 6x interpreter start", big_log_target="< 15x plain loop")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="\n".join(__doc__.splitlines()[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("both", "dev", "test"), default="both",
                    help="which part of the real-log collection to score (default: both)")
    ap.add_argument("--labels", help="score this labels.yaml alone (its logs beside it) instead of the parts")
    ap.add_argument("--catalog", help="catalog folder (default: the sub-skill's catalog/)")
    ap.add_argument("--repeat", type=int, default=5, help="timing runs per log (default 5)")
    ap.add_argument("--throughput-mib", type=int, default=56,
                    help="speed figures (issue 20 item 8): a small log vs the interpreter's start, a synthetic "
                         "training log of this many MiB vs a plain loop over its lines, 50 MB of random bytes "
                         "(0: skip; default 56)")
    ap.add_argument("--misses", action="store_true", help="print each miss, per part")
    ap.add_argument("--output", choices=("text", "json"), default="text")
    args = ap.parse_args(argv)
    if args.labels:
        chosen = {"labels": Path(args.labels)}
    else:
        chosen = {name: path for name, path in PARTS.items() if args.part in ("both", name)}
    try:
        import yaml
        tri = load_script()
        catalog = tri.load_catalog(args.catalog)
        loaded = {}
        for name, path in chosen.items():
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise ValueError(f"{path} is not a YAML list")
            loaded[name] = data
    except Exception as exc:  # noqa: BLE001 - a benchmark reports and stops
        print(f"bench_triage: cannot start: {exc}", file=sys.stderr)
        return 2
    parts = {}
    for name, labels in loaded.items():
        summary, rows = score(tri, catalog, labels, Path(chosen[name]).parent, args.repeat)
        parts[name] = {"labels": str(chosen[name]), "summary": summary, "logs": rows}
    extra = speed(tri, args.throughput_mib, max(3, args.repeat)) if args.throughput_mib > 0 else {}
    first = parts.get("dev") or parts.get("labels") or next(iter(parts.values()))
    if args.output == "json":
        doc = {"catalog_entries": len(catalog.entries), "parts": parts,
               "summary": dict(first["summary"], **extra), "logs": first["logs"]}
        doc.update(extra)
        print(json.dumps(doc, indent=2))
        return 0
    print(f"catalog entries: {len(catalog.entries)}")
    print(f"{'part':<8}{'logs':>6}{'root line':>12}{'fix keyword':>13}{'signature':>11}"
          f"{'ms/log mean':>13}{'ms/log max':>12}")
    for name, part in parts.items():
        s = part["summary"]
        print(f"{name:<8}{s['logs']:>6}{s['root_line_hit_pct']:>11}%{s['fix_keyword_hit_pct']:>12}%"
              f"{s['signature_hit_pct']:>10}%{s['time_per_log_ms_mean']:>13}{s['time_per_log_ms_max']:>12}")
    if "test" in parts:
        print("test is the held-out part (tests/failure_triage/real_logs_test/): its figure is the one that counts")
    print(f"time per log: best of {args.repeat}, in-process, catalog loaded once")
    if extra:
        e = extra
        print(f"small log:    {e['small_log_cpu_s']} s CPU = {e['small_log_ratio']}x the interpreter's start "
              f"({e['interpreter_start_cpu_s']} s, python -c pass; target < 6x); without bytecode files "
              f"{e['small_log_no_bytecode_cpu_s']} s = {e['small_log_no_bytecode_ratio']}x the start without them "
              f"({e['interpreter_start_no_bytecode_cpu_s']} s)")
        print(f"big log:      {e['big_log_cpu_s']} s CPU for {e['big_log_mib']} MiB ({e['big_log_mib_per_s']} MiB/s) = "
              f"{e['big_log_ratio']}x a plain loop over its lines ({e['plain_loop_cpu_s']} s; target < 15x); "
              f"root found: {e['big_log_found_root']}")
        print(f"random bytes: {e['random_50mb_cpu_s']} s CPU for 50 MB, root: {e['random_50mb_root']}")
    if args.misses:
        for name, part in parts.items():
            misses = [r for r in part["logs"] if not (r["root_hit"] and r["fix_hit"])]
            print(f"misses in {name} ({len(misses)}):")
            for r in misses:
                print(f"  MISS {r['file']}: line {r['reported_line']} (label {r['labelled_line']}), "
                      f"signature {r['reported_signature']} (expected {r['expected_signature']}), "
                      f"fix hit {r['fix_hit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
