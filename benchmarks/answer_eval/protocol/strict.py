#!/usr/bin/env python3
"""Merge two grading passes strictly (a point counts when both passes give it; misleading when either says so).

usage: strict.py PASS1_GLOB PASS2_GLOB OUTDIR
example: python3 strict.py "grades/pass1_*.yaml" "grades/pass2_*.yaml" runs/545ac29d-s20
Exit codes: 0 done; 2 usage error or unreadable / malformed grades (one line on stderr).
"""
import glob, sys, yaml

from _common import EVAL, REPO_ROOT, fail, run  # noqa: F401


def load(pat):
    d = {}
    for f in sorted(glob.glob(pat)):
        d.update(yaml.safe_load(open(f)) or {})
    return d


def main(argv):
    if len(argv) != 3:
        fail("usage: strict.py PASS1_GLOB PASS2_GLOB OUTDIR  (--help for more)")
    p1, p2, out = load(argv[0]), load(argv[1]), argv[2]
    yaml.safe_dump(p1, open(f"{out}/grades_pass1.yaml", "w"), sort_keys=True, allow_unicode=True, width=110)
    yaml.safe_dump(p2, open(f"{out}/grades_pass2.yaml", "w"), sort_keys=True, allow_unicode=True, width=110)
    m = {}
    for k in sorted(set(p1) | set(p2)):
        a, b = p1.get(k), p2.get(k)
        if not a or not b:
            print("missing in a pass:", k); m[k] = a or b; continue
        pts = [x and y for x, y in zip(a["points"], b["points"])]
        m[k] = {"points": pts, "misleading": bool(a["misleading"] or b["misleading"]),
                "note": f"pass1: {a.get('note','')} | pass2: {b.get('note','')}"}
        if a["points"] != b["points"] or a["misleading"] != b["misleading"]:
            print("differ:", k, a["points"], a["misleading"], b["points"], b["misleading"])
    yaml.safe_dump(m, open(f"{out}/grades.yaml", "w"), sort_keys=True, allow_unicode=True, width=110)
    print(len(m), "graded")


if __name__ == "__main__":
    run(main, __doc__)
