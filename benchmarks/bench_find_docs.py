#!/usr/bin/env python3
"""Measure scripts/find_docs.py as agents run it: a whole process per query (interpreter start, reading
and splitting every bundle reference, BM25 over the sections), against a bare `python3 -c pass`, plus
the in-process cost of building the index, and what a hit saves: the lines of its range against the
lines of the whole file it points into.

Examples:
  python3 benchmarks/bench_find_docs.py                 # 10 runs per case, best and median
  python3 benchmarks/bench_find_docs.py --repeat 20 --output json

Exit codes: 0 measured; 2 usage error or the bundle unreadable.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "find_docs.py"
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lookup import timed  # noqa: E402 - one whole-process timer for the helper benchmarks
CASES = {"error line": ["Grad strides do not match bucket view strides"],
         "names": ["NCCL_SOCKET_IFNAME", "multi-node"],
         "description": ["zero3", "generate", "hang", "after", "eval"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--output", choices=("text", "json"), default="text")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    try:
        import _docsearch
        t, idx = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            idx = _docsearch.Index(REPO)
            t.append(time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - any failure to read the bundle is exit 2
        sys.stderr.write(f"bench_find_docs.py: error: {exc}\n")
        return 2
    res = {"files": len({s.path for s in idx.sections}), "sections": len(idx.sections), "index_s": min(t),
           "python_bare_s": timed([sys.executable, "-c", "pass"], args.repeat)}
    saved = []
    for name, words in CASES.items():
        res[name] = timed([sys.executable, str(SCRIPT), *words], args.repeat)
        (_, s), = idx.search(" ".join(words), 1)
        whole = len((REPO / s.path).read_text(encoding="utf-8").splitlines())
        saved.append({"case": name, "hit": f"{s.path}:{s.start}-{s.end}", "range_lines": s.end - s.start + 1,
                      "file_lines": whole})
    res["top_hits"] = saved
    if args.output == "json":
        print(json.dumps(res, indent=2))
        return 0
    print(f"find_docs.py: {res['files']} files, {res['sections']} sections "
          f"(best / median of {args.repeat}, {sys.executable})")
    print(f"  build index in process   {res['index_s'] * 1e3:7.1f} ms")
    print(f"  python -c pass           {res['python_bare_s'][0] * 1e3:7.1f} / {res['python_bare_s'][1] * 1e3:.1f} ms")
    for name in CASES:
        print(f"  {name:<24} {res[name][0] * 1e3:7.1f} / {res[name][1] * 1e3:.1f} ms (whole process)")
    for h in saved:
        print(f"  top hit for {h['case']!r}: {h['hit']} — {h['range_lines']} of {h['file_lines']} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
