#!/usr/bin/env python3
"""Benchmark: the validator on DeepSpeed JSON vs deepspeed's own verdict, side by side.

Prints, in one run (all wall-clock, best of N, interpreter start included):
  1. one DeepSpeed JSON end to end:  validate_backend_config.py --format deepspeed FILE
  2. an Accelerate YAML that names a DeepSpeed JSON (both files checked)
  3. every DeepSpeed JSON of ../shared/corpus in one invocation
  4. deepspeed itself on the same single file: a fresh interpreter that imports deepspeed
     and builds DeepSpeedConfig(FILE) (its config-parse verdict; deepspeed.initialize would
     add process-group setup on top)

Usage: python benchmarks/bench_validator_deepspeed.py [--repeat N] [--python PY]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "sub-skills" / "distributed-training-backends" / "scripts" / "validate_backend_config.py"
CORPUS = REPO.parent / "shared" / "corpus"
ONE = CORPUS / "deepspeed" / "huggingface__accelerate__examples__deepspeed_config_templates__zero_stage3_offload_config.json"


def best(cmd, repeat, cwd=None):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        times.append(time.perf_counter() - t)
        if p.returncode not in (0, 1, 2):  # 2: the corpus holds unparseable files on purpose
            raise SystemExit(f"command failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr[-800:]}")
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--python", default=sys.executable, help="interpreter with deepspeed for row 4")
    a = ap.parse_args()
    py = sys.executable
    files = sorted(str(p) for p in (CORPUS / "deepspeed").iterdir()) + \
        sorted(str(p) for p in (CORPUS / "broken").iterdir() if p.suffix in (".json", ".conf"))
    with tempfile.TemporaryDirectory() as d:
        ds = Path(d) / "ds.json"
        ds.write_text(ONE.read_text(encoding="utf-8"), encoding="utf-8")
        y = Path(d) / "acc.yaml"
        y.write_text("distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n"
                     "  deepspeed_config_file: ds.json\n  zero3_init_flag: true\n", encoding="utf-8")
        rows = [
            ("1 DeepSpeed JSON, end to end", best([py, CLI, "--format", "deepspeed", ONE], a.repeat)),
            ("Accelerate YAML + its JSON", best([py, CLI, y], a.repeat, cwd=d)),
            (f"corpus: {len(files)} JSON files, one run", best([py, CLI, "--format", "deepspeed", *files],
                                                               max(1, a.repeat // 2))),
        ]
    probe = ("import sys, logging; logging.disable(logging.CRITICAL)\n"
             "from deepspeed.runtime.config import DeepSpeedConfig\n"
             "DeepSpeedConfig(sys.argv[1])\n")
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=tempfile.mkdtemp())
    t = []
    for _ in range(max(1, a.repeat // 2)):
        s = time.perf_counter()
        subprocess.run([a.python, "-c", probe, str(ONE)], capture_output=True, env=env)
        t.append(time.perf_counter() - s)
    rows.append(("deepspeed DeepSpeedConfig(file), fresh process", min(t)))
    w = max(len(r[0]) for r in rows)
    print(f"{'what':<{w}}  seconds")
    for name, sec in rows:
        print(f"{name:<{w}}  {sec:7.3f}")
    print(f"(best of {a.repeat}; {os.cpu_count()} CPUs; single file: {ONE.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
