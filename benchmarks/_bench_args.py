"""The command line the timing benchmarks share: --runs N (at least 1) and --output text|json."""
from __future__ import annotations

import argparse


def runs_and_output(doc: str, argv, default_runs: int, runs_help: str) -> argparse.Namespace:
    """Parse --runs/--output for a benchmark whose --help is its module docstring."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=default_runs, help=f"{runs_help} (default {default_runs})")
    ap.add_argument("--output", choices=("text", "json"), default="text")
    a = ap.parse_args(argv)
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    return a
