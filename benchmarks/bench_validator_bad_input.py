#!/usr/bin/env python3
"""Time the validator on hostile inputs (prints figures; not a test).

tests/validator/test_bad_input.py checks that each case is refused by a limit (bytes read, nodes
expanded after aliases, nesting depth); this prints how long each refusal takes in-process, so a
regression that keeps the limit but slows the path shows up as a number.

Examples:
  python3 benchmarks/bench_validator_bad_input.py              # 5 runs per case, median and max
  python3 benchmarks/bench_validator_bad_input.py --runs 20 --output json

Exit codes: 0 measured; 2 usage error; 1 a case no longer exits 2 (the figure would be meaningless).
"""
from __future__ import annotations

import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_args import runs_and_output  # noqa: E402

sys.path.insert(0, str(REPO / "sub-skills" / "distributed-training-backends" / "scripts"))


def cases(tmp: Path):
    """name -> (argv, stdin bytes or None); files written once under tmp."""
    big = tmp / "huge.yaml"
    with open(big, "wb") as f:
        f.write(b"distributed_type: 'NO'\n# " + b"x" * (50 * 1024 * 1024) + b"\n")
    bomb = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    bomb += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    texts = {
        "alias bomb (9^10 nodes)": ("bomb.yaml", "\n".join(bomb) + "\n"),
        "10,000 nested flow sequences": ("deep.yaml", "a: " + "[" * 10_000 + "]" * 10_000 + "\n"),
        "10,000 nested flow mappings": ("deepm.yaml", "a: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n"),
        "1,500 nested block mappings": ("deepb.yaml", "".join(" " * i + f"k{i}:\n" for i in range(1500))
                                        + " " * 1500 + "v: 1\n"),
        "10,000 nested JSON arrays": ("deep.json", '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"),
        "binary file": ("model.yaml", None),
    }
    out = {"50 MiB file": ([str(big)], None),
           "50 MiB on standard input": (["-"], b"a: " + b"x" * (50 * 1024 * 1024))}
    for name, (fname, text) in texts.items():
        p = tmp / fname
        p.write_bytes(b"\x00\x01PK\x03\x04" + bytes(range(256)) if text is None else text.encode())
        out[name] = ([str(p)], None)
    return out


def main(argv=None):
    a = runs_and_output(__doc__, argv, 5, "runs per case")
    import backend_validator.cli as cli
    cli._rules_loaded()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, (args, data) in cases(Path(d)).items():
            times = []
            for _ in range(a.runs):
                stdin = None if data is None else io.TextIOWrapper(io.BytesIO(data), encoding="utf-8",
                                                                   errors="surrogateescape")
                out, err = io.StringIO(), io.StringIO()
                t0 = time.perf_counter()
                rc = cli.main(args, stdin=stdin, stdout=out, stderr=err)
                times.append(time.perf_counter() - t0)
                if rc != 2:
                    print(f"bench_validator_bad_input: {name}: exit {rc}, expected 2", file=sys.stderr)
                    return 1
            rows.append({"case": name, "median_s": statistics.median(times), "max_s": max(times),
                         "runs": a.runs})
    if a.output == "json":
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'case':34} {'median s':>9} {'max s':>8}")
        for r in rows:
            print(f"{r['case']:34} {r['median_s']:9.3f} {r['max_s']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
