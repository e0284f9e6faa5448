#!/usr/bin/env python3
"""bread QID PATH [FIRST_LINE [LAST_LINE]] -- print a bundle file (path relative to the bundle root) and log what was shown."""
import os as _os
from pathlib import Path as _Path
EVAL = _os.environ.get("EVAL_DIR", "/work/s20")  # the working folder of one eval round (authors/, reviews/, answers/, logs/, bundle/)
REPO_ROOT = str(_Path(__file__).resolve().parents[3])
import json, os, sys, time
B = os.environ.get("S20_BUNDLE", EVAL + "/bundle")
if len(sys.argv) < 3:
    sys.exit("usage: bread QID PATH [FIRST_LINE [LAST_LINE]]")
qid, rel = sys.argv[1], sys.argv[2].split("#")[0]
p = os.path.normpath(os.path.join(B, rel))
if not p.startswith(B + os.sep) or not os.path.isfile(p):
    sys.exit(f"bread: no bundle file {rel!r}")
lines = open(p, encoding="utf-8", errors="replace").read().splitlines(True)
a = int(sys.argv[3]) if len(sys.argv) > 3 else 1
b = int(sys.argv[4]) if len(sys.argv) > 4 else len(lines)
text = "".join(lines[a - 1:b])
sys.stdout.write(text)
if len(sys.argv) > 3:
    sys.stdout.write(f"\n[bread: lines {a}-{min(b, len(lines))} of {len(lines)}]\n")
with open(f"{EVAL}/logs/{qid}.jsonl", "a") as f:
    f.write(json.dumps({"t": time.time(), "kind": "read", "file": os.path.relpath(p, B), "chars": len(text)}) + "\n")
