#!/usr/bin/env python3
"""Summarise the field-coverage mining ledger (threads.tsv): threads, mechanisms, which recur
(two or more threads) and where each is covered.

Usage:
  python3 benchmarks/field_coverage/summarize.py            # counts and one line per mechanism
  python3 benchmarks/field_coverage/summarize.py --markdown # the table used in MECHANISMS.md

Exit codes: 0 ok, 2 the ledger is missing or malformed.
"""
from __future__ import annotations

import argparse
import collections
import csv
import sys
from pathlib import Path

LEDGER = Path(__file__).resolve().parent / "threads.tsv"
COLUMNS = ["url", "repo", "mechanism", "established_answer", "covered_by"]


def load(path: Path = LEDGER) -> list[dict]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        if reader.fieldnames != COLUMNS:
            raise ValueError(f"{path}: header must be {COLUMNS}, got {reader.fieldnames}")
        rows = list(reader)
    for i, r in enumerate(rows, start=2):
        if not all(r.get(c) for c in COLUMNS):
            raise ValueError(f"{path}:{i}: empty field")
    return rows


def mechanisms(rows: list[dict]) -> list[tuple[str, int, str]]:
    count = collections.Counter(r["mechanism"] for r in rows)
    where = {r["mechanism"]: r["covered_by"] for r in rows}
    return sorted(((m, n, where[m]) for m, n in count.items()), key=lambda t: (-t[1], t[0]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--markdown", action="store_true", help="print the MECHANISMS.md table")
    args = ap.parse_args(argv)
    try:
        rows = load()
    except (OSError, ValueError) as e:
        print(f"summarize.py: {e}", file=sys.stderr)
        return 2
    mechs = mechanisms(rows)
    if args.markdown:
        print("| Mechanism | Threads | Recurs | Covered by |")
        print("| --- | --- | --- | --- |")
        for m, n, w in mechs:
            print(f"| `{m}` | {n} | {'yes' if n >= 2 else 'no'} | {w} |")
        return 0
    recur = [m for m in mechs if m[1] >= 2]
    print(f"threads: {len(rows)}  repositories: {len({r['repo'] for r in rows})}  "
          f"mechanisms: {len(mechs)}  recurring: {len(recur)}  "
          f"recurring uncovered: {sum(1 for m in recur if m[2].startswith('uncovered'))}")
    for m, n, w in mechs:
        print(f"{n:3d}  {m}  ->  {w}")
    return 0


if __name__ == "__main__":
    import signal
    if hasattr(signal, "SIGPIPE"):  # a reader that stops early (`| head`) ends us quietly, like any Unix filter
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
