#!/usr/bin/env python3
"""Measure scripts/lookup.py as agents run it: a whole process per query (interpreter start, JSON
load, index, answer), against a bare `python3 -c pass` on the same machine, plus the in-process cost
of loading and indexing references/facts/names.json.

Examples:
  python3 benchmarks/bench_lookup.py                 # 15 runs per case, best and median
  python3 benchmarks/bench_lookup.py --repeat 40 --output json

Exit codes: 0 measured; 2 usage error or the helper/table unreadable.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "lookup.py"
CASES = {"found": ["--nproc-per-node"], "not found (difflib)": ["fsdp_transformer_layer_cls_to_warp"],
         "search": ["--search", "offload"]}


def timed(cmd, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--output", choices=("text", "json"), default="text")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    try:
        spec = importlib.util.spec_from_file_location("lookup_bench", SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        data = mod.load(mod.DATA)
    except Exception as exc:  # noqa: BLE001 - any failure to load is exit 2
        sys.stderr.write(f"bench_lookup.py: error: {exc}\n")
        return 2
    res = {"table_bytes": mod.DATA.stat().st_size, "entries": len(data["entries"])}
    t = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        mod.index(mod.load(mod.DATA)["entries"])
        t.append(time.perf_counter() - t0)
    res["load_and_index_s"] = min(t)
    res["python_bare_s"] = timed([sys.executable, "-c", "pass"], args.repeat)
    for name, a in CASES.items():
        res[name] = timed([sys.executable, str(SCRIPT), *a], args.repeat)
    if args.output == "json":
        print(json.dumps(res, indent=2))
        return 0
    print(f"lookup.py: {res['entries']} entries, {res['table_bytes'] / 1e3:.0f} kB table "
          f"(best / median of {args.repeat}, {sys.executable})")
    print(f"  load + index in process  {res['load_and_index_s'] * 1e3:7.1f} ms")
    print(f"  python -c pass           {res['python_bare_s'][0] * 1e3:7.1f} / {res['python_bare_s'][1] * 1e3:.1f} ms")
    for name in CASES:
        print(f"  {name:<24} {res[name][0] * 1e3:7.1f} / {res[name][1] * 1e3:.1f} ms (whole process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
