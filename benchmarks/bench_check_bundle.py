#!/usr/bin/env python3
"""How long the bundle linter (scripts/check_bundle.py) takes on this checkout: prints the file count and
the median, min and max wall time of N in-process runs. A figure, not a test.

    python3 benchmarks/bench_check_bundle.py            # 5 runs
    python3 benchmarks/bench_check_bundle.py --runs 20

Exit codes: 0 printed, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="example: python3 benchmarks/bench_check_bundle.py --runs 20")
    ap.add_argument("--runs", type=int, default=5, help="in-process runs (default 5)")
    args = ap.parse_args(argv)
    if args.runs < 1:
        print("bench_check_bundle.py: --runs must be at least 1", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("check_bundle", ROOT / "scripts" / "check_bundle.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_bundle"] = mod          # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    times, files = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        _findings, files, _worst = mod.lint(ROOT, "pytorch-distributed-training")
        times.append(time.perf_counter() - t0)
    print(f"{len(files)} files, {args.runs} runs: median {statistics.median(times):.3f} s, "
          f"min {min(times):.3f} s, max {max(times):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
