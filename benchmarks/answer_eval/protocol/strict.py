#!/usr/bin/env python3
"""strict.py PASS1_GLOB PASS2_GLOB OUTDIR -- merge two grading passes strictly."""
import os as _os
from pathlib import Path as _Path
EVAL = _os.environ.get("EVAL_DIR", "/work/s20")  # the working folder of one eval round (authors/, reviews/, answers/, logs/, bundle/)
REPO_ROOT = str(_Path(__file__).resolve().parents[3])
import glob, sys, yaml
def load(pat):
    d = {}
    for f in sorted(glob.glob(pat)):
        d.update(yaml.safe_load(open(f)) or {})
    return d
p1, p2, out = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
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
