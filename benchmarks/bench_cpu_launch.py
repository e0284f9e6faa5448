#!/usr/bin/env python3
"""Time a real two-rank CPU launch of the recipe in configuration-and-cli/references/cpu-multiprocess.md
(prints figures; not a test).

Each run is `ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 ... examples/whoami.py`
from a fresh shell, wall time from start to the launcher's exit, with an empty HF_HOME (no user config).
The load average is printed beside the figures: on a small host most of a launch is each rank importing
torch and accelerate, so other work on the cores stretches it (the reference quotes both cases).

Examples:
  python3 benchmarks/bench_cpu_launch.py                # 3 launches, min / median / max
  python3 benchmarks/bench_cpu_launch.py --runs 5 --output json

Needs accelerate and torch installed (the dev environment: `make venv`). Exit codes: 0 measured;
1 a launch failed (its stderr tail goes to stderr); 2 usage error or accelerate not found.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_args import runs_and_output  # noqa: E402

EXAMPLE = REPO / "sub-skills" / "configuration-and-cli" / "examples" / "whoami.py"


def main(argv=None) -> int:
    a = runs_and_output(__doc__, argv, 3, "launches to time")
    launcher = shutil.which("accelerate", path=os.path.dirname(sys.executable)) or shutil.which("accelerate")
    if not launcher:
        print("bench_cpu_launch: accelerate not found (run from the dev environment: make venv)", file=sys.stderr)
        return 2
    cmd = [launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0", str(EXAMPLE)]
    times, loads = [], []
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, ACCELERATE_USE_CPU="1", HF_HOME=home, OMP_NUM_THREADS="1")
        for _ in range(a.runs):
            loads.append(os.getloadavg()[0])
            t0 = time.perf_counter()
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            times.append(time.perf_counter() - t0)
            if r.returncode != 0 or r.stdout.count("MULTI_CPU") != 2:
                print(f"bench_cpu_launch: launch failed (exit {r.returncode}): {r.stderr[-800:]}", file=sys.stderr)
                return 1
    res = {"runs": a.runs, "min_s": min(times), "median_s": statistics.median(times), "max_s": max(times),
           "load_avg_1min": [round(x, 2) for x in loads], "cores": os.cpu_count()}
    if a.output == "json":
        print(json.dumps(res))
    else:
        print(f"two-rank CPU launch of whoami.py: min {res['min_s']:.1f} s, median {res['median_s']:.1f} s, "
              f"max {res['max_s']:.1f} s over {a.runs} runs; {res['cores']} cores, "
              f"1-min load average at each start {res['load_avg_1min']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
