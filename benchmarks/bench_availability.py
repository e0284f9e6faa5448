#!/usr/bin/env python3
"""Benchmark: check_backend_availability.py (default tier) against its peers.

Runs, interleaved round by round in one process, whole-process timings of
  ours          python sub-skills/distributed-and-backends/scripts/check_backend_availability.py
  ds_report     DeepSpeed's environment report
  accelerate    accelerate env
  collect_env   python -m torch.utils.collect_env
all with the same interpreter (--python, default: this one), and prints the
median wall and CPU (user+sys of the process tree) seconds per command, the
ratios peer/ours and the load average around the run.  Targets from issue 6:
ours <= 0.15 s wall and >= 20x faster than each peer.

A peer whose console script is missing is reported as skipped.  Exit code 0
when every command ran (whatever the figures), 1 when one failed, 2 on usage.

Examples:
  python benchmarks/bench_availability.py
  python benchmarks/bench_availability.py --runs 7 --python /path/to/venv/bin/python
  python benchmarks/bench_availability.py --json
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "sub-skills", "distributed-and-backends", "scripts", "check_backend_availability.py")
TARGET_WALL = 0.15
TARGET_RATIO = 20.0


def commands(python):
    bindir = os.path.dirname(python)
    cmds = {"ours": [python, SCRIPT]}
    ds = os.path.join(bindir, "ds_report")
    acc = os.path.join(bindir, "accelerate")
    cmds["ds_report"] = [python, ds] if os.path.isfile(ds) else None
    cmds["accelerate env"] = [python, acc, "env"] if os.path.isfile(acc) else None
    cmds["collect_env"] = [python, "-m", "torch.utils.collect_env"]
    return cmds


def timed(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, proc.returncode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="timed rounds per command (default 5; ours runs 3x as often)")
    ap.add_argument("--python", default=sys.executable, help="interpreter whose environment is measured")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    cmds = commands(os.path.abspath(args.python))
    live = {k: v for k, v in cmds.items() if v}
    load_before = os.getloadavg()
    # warm-up (page cache, .pyc files of the peers)
    for cmd in live.values():
        timed(cmd)
    samples = {k: {"wall": [], "cpu": [], "rc": []} for k in live}
    for _ in range(args.runs):
        for name, cmd in live.items():
            reps = 3 if name == "ours" else 1
            for _ in range(reps):
                wall, cpu, rc = timed(cmd)
                samples[name]["wall"].append(wall)
                samples[name]["cpu"].append(cpu)
                samples[name]["rc"].append(rc)
    load_after = os.getloadavg()
    res = {"python": args.python, "cpu_count": os.cpu_count(), "runs": args.runs,
           "loadavg_before": [round(x, 2) for x in load_before],
           "loadavg_after": [round(x, 2) for x in load_after], "commands": {}}
    ours_wall = statistics.median(samples["ours"]["wall"])
    ours_cpu = statistics.median(samples["ours"]["cpu"])
    failed = False
    for name, cmd in cmds.items():
        if cmd is None:
            res["commands"][name] = {"skipped": "console script not found next to %s" % args.python}
            continue
        s = samples[name]
        w, c = statistics.median(s["wall"]), statistics.median(s["cpu"])
        row = {"cmd": " ".join(cmd), "n": len(s["wall"]), "wall_median": round(w, 4), "cpu_median": round(c, 4),
               "wall_min": round(min(s["wall"]), 4), "wall_max": round(max(s["wall"]), 4),
               "returncodes": sorted(set(s["rc"]))}
        if name != "ours":
            row["ratio_wall"] = round(w / ours_wall, 1)
            row["ratio_cpu"] = round(c / ours_cpu, 1) if ours_cpu > 0 else None
        failed |= any(rc != 0 for rc in s["rc"])
        res["commands"][name] = row
    ratios = [r["ratio_wall"] for n, r in res["commands"].items() if n != "ours" and "ratio_wall" in r]
    res["targets"] = {"ours_wall_le_0.15s": ours_wall <= TARGET_WALL,
                      "each_peer_ge_20x": bool(ratios) and min(ratios) >= TARGET_RATIO}
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print("interpreter: %s  (%d CPUs)  load average before %s, after %s" % (
            args.python, os.cpu_count(), res["loadavg_before"], res["loadavg_after"]))
        print("%-16s %4s %11s %10s %17s %9s %9s  %s" % ("command", "n", "wall med s", "cpu med s", "wall min-max s",
                                                       "x wall", "x cpu", "exit"))
        for name, row in res["commands"].items():
            if "skipped" in row:
                print("%-16s skipped: %s" % (name, row["skipped"]))
                continue
            print("%-16s %4d %11.3f %10.3f %8.3f-%-8.3f %9s %9s  %s" % (
                name, row["n"], row["wall_median"], row["cpu_median"], row["wall_min"], row["wall_max"],
                row.get("ratio_wall", "-"), row.get("ratio_cpu", "-"), row["returncodes"]))
        print("target ours <= %.2f s wall: %s;  each peer >= %dx slower (wall): %s" % (
            TARGET_WALL, "met" if res["targets"]["ours_wall_le_0.15s"] else "NOT met",
            TARGET_RATIO, "met" if res["targets"]["each_peer_ge_20x"] else "NOT met"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
