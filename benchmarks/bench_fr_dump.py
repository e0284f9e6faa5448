#!/usr/bin/env python3
"""Measure fr_dump.py on synthetic flight-recorder dumps: load (JSON, pickle walker) and analysis.

Builds one dump per rank with N entries shaped like torch 2.13.0's gloo entries (each with a
4-frame stack, as _dump_fr_trace() writes them), the last rank stopping one collective early,
and times: json.loads + normalise per dump, the restricted pickle walker per dump (against the
stdlib's pickle.loads on the same bytes, which is unsafe and only a yardstick), and analyse().

Examples:
  python3 benchmarks/bench_fr_dump.py                       # 2 ranks, 2000 entries (torch's default ring)
  python3 benchmarks/bench_fr_dump.py --entries 20000 --ranks 8
  python3 benchmarks/bench_fr_dump.py --output json

Exit codes: 0 measured; 2 usage error or the script unreadable.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pickle
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "sub-skills" / "failure-triage" / "scripts" / "fr_dump.py"


def load_script():
    spec = importlib.util.spec_from_file_location("fr_dump_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_dump(entries: int, stop_early: bool) -> dict:
    n = entries - 1 if stop_early else entries
    frames = [{"filename": f"/site-packages/torch/distributed/file{i}.py", "line": 100 + i, "name": f"fn{i}"}
              for i in range(4)]
    out = []
    for i in range(n):
        op = ("all_reduce", "broadcast", "all_gather")[i % 3]
        out.append({"collective_seq_id": i + 1, "frames": frames, "input_dtypes": ["Float"],
                    "input_sizes": [[1024, 4]], "is_p2p": False, "op_id": i + 1, "output_dtypes": ["Float"],
                    "output_sizes": [[1024, 4]], "p2p_seq_id": 0, "pg_id": 0,
                    "process_group": ("0", "default_pg"), "profiling_name": f"gloo:{op}", "record_id": i,
                    "retired": True, "state": "scheduled", "thread_id": "1", "thread_name": "python",
                    "time_created_ns": 10 ** 18 + i, "time_discovered_completed_ns": None,
                    "time_discovered_started_ns": None, "timeout_ms": 600000})
    return {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
            "comm_lib_version": "", "pg_status": {}, "entries": out}


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--output", choices=("text", "json"), default="text")
    args = p.parse_args(argv)
    if args.entries < 2 or args.ranks < 2 or args.repeat < 1:
        p.error("--entries and --ranks need at least 2, --repeat at least 1")
    try:
        fr = load_script()
    except Exception as exc:  # noqa: BLE001 - report any import failure as exit 2
        sys.stderr.write(f"bench_fr_dump.py: error: cannot load {SCRIPT}: {exc}\n")
        return 2
    dumps = {r: make_dump(args.entries, r == args.ranks - 1) for r in range(args.ranks)}
    pkl = {r: pickle.dumps(d, protocol=2) for r, d in dumps.items()}
    js = {r: json.dumps({**d, "entries": [{k: v for k, v in e.items() if k != "frames"} for e in d["entries"]]}).encode()
          for r, d in dumps.items()}
    norm = {r: fr.load_dump(js[r], f"fr_{r}.json") for r in dumps}
    report = fr.analyse(norm)
    assert report["divergence"]["ranks"] == [args.ranks - 1]
    res = {
        "entries_per_rank": args.entries, "ranks": args.ranks,
        "pickle_bytes_per_rank": len(pkl[0]), "json_bytes_per_rank": len(js[0]),
        "walker_s_per_rank": best(lambda: fr.load_pickle_restricted(pkl[0]), args.repeat),
        "stdlib_pickle_s_per_rank": best(lambda: pickle.loads(pkl[0]), args.repeat),
        "json_load_normalise_s_per_rank": best(lambda: fr.load_dump(js[0], "fr_0.json"), args.repeat),
        "analyse_s_all_ranks": best(lambda: fr.analyse(norm), args.repeat),
    }
    res["walker_mb_per_s"] = len(pkl[0]) / res["walker_s_per_rank"] / 1e6
    if args.output == "json":
        print(json.dumps(res, indent=2))
    else:
        print(f"fr_dump.py: {args.ranks} ranks x {args.entries} entries (best of {args.repeat})")
        print(f"  pickle walker      {res['walker_s_per_rank'] * 1e3:8.1f} ms/rank  "
              f"({res['pickle_bytes_per_rank'] / 1e6:.2f} MB, {res['walker_mb_per_s']:.1f} MB/s; "
              f"stdlib pickle.loads {res['stdlib_pickle_s_per_rank'] * 1e3:.1f} ms)")
        print(f"  JSON + normalise   {res['json_load_normalise_s_per_rank'] * 1e3:8.1f} ms/rank  "
              f"({res['json_bytes_per_rank'] / 1e6:.2f} MB)")
        print(f"  analyse            {res['analyse_s_all_ranks'] * 1e3:8.1f} ms for all ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
