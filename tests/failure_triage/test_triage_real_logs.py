"""The acceptance figures of issue 12 on the labelled real logs, through benchmarks/bench_triage.py.

Root-line hit >= ROOT_LINE_MIN and fix-keyword hit >= FIX_MIN over every log in
real_logs/labels.yaml, the dev part (the benchmark prints the per-log time; timing is not asserted
here). Only the dev part is scored: the held-out part in real_logs_test/ is measured by the
benchmark's default run and reported, never asserted.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT_LINE_MIN = 90.0
FIX_MIN = 80.0


def test_bench_figures_meet_the_issue_thresholds():
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_triage.py"), "--output", "json",
                        "--part", "dev", "--repeat", "1", "--throughput-mib", "0"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["parts"]) == {"dev"}, "only the dev part may be scored here"
    s = doc["parts"]["dev"]["summary"]
    misses = [x for x in doc["parts"]["dev"]["logs"] if not (x["root_hit"] and x["fix_hit"])]
    assert s["logs"] >= 3
    assert s["root_line_hit_pct"] >= ROOT_LINE_MIN, misses
    assert s["fix_keyword_hit_pct"] >= FIX_MIN, misses
