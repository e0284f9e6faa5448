#!/usr/bin/env python3
"""brun QID -- python3 SCRIPT ARGS...  -- run a bundle script from the bundle root and log its output size."""
import os as _os
from pathlib import Path as _Path
EVAL = _os.environ.get("EVAL_DIR", "/work/s20")  # the working folder of one eval round (authors/, reviews/, answers/, logs/, bundle/)
REPO_ROOT = str(_Path(__file__).resolve().parents[3])
import json, os, subprocess, sys, time
B = os.environ.get("S20_BUNDLE", EVAL + "/bundle")
if len(sys.argv) < 4 or sys.argv[2] != "--":
    sys.exit("usage: brun QID -- python3 sub-skills/.../scripts/X.py ARGS")
qid, cmd = sys.argv[1], sys.argv[3:]
if cmd[0] in ("python3", "python"):
    cmd[0] = "/usr/bin/python3"
script = cmd[1] if len(cmd) > 1 else ""
if not os.path.normpath(os.path.join(B, script)).startswith(B + os.sep) or not script.endswith(".py"):
    sys.exit("brun: only the bundle's own python scripts")
r = subprocess.run(cmd, cwd=B, capture_output=True, text=True, timeout=300)
out = r.stdout + (("\n[stderr]\n" + r.stderr) if r.stderr else "") + f"\n[exit {r.returncode}]\n"
sys.stdout.write(out)
with open(f"{EVAL}/logs/{qid}.jsonl", "a") as f:
    f.write(json.dumps({"t": time.time(), "kind": "run", "cmd": " ".join(cmd[1:]), "chars": len(out)}) + "\n")
