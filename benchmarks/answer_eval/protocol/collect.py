#!/usr/bin/env python3
"""collect.py RUNDIR -- answers/*.yaml + logs -> RUNDIR/answers.yaml with files_opened, tokens_read."""
import os as _os
from pathlib import Path as _Path
EVAL = _os.environ.get("EVAL_DIR", "/work/s20")  # the working folder of one eval round (authors/, reviews/, answers/, logs/, bundle/)
REPO_ROOT = str(_Path(__file__).resolve().parents[3])
import glob, json, os, sys, yaml
run = sys.argv[1]
os.makedirs(run, exist_ok=True)
out = {}
for f in sorted(glob.glob(EVAL + "/answers/*.yaml")):
    for qid, a in (yaml.safe_load(open(f)) or {}).items():
        files, chars = [], 0
        lp = f"{EVAL}/logs/{qid}.jsonl"
        if os.path.exists(lp):
            for line in open(lp):
                r = json.loads(line)
                chars += r["chars"]
                key = r.get("file") or ("run: " + r.get("cmd", ""))
                if key not in files:
                    files.append(key)
        out[qid] = {"answer": a["answer"] if isinstance(a, dict) else a, "files_opened": files,
                    "tokens_read": chars // 4, "answerer": os.path.basename(f)[:-5]}
yaml.safe_dump(out, open(f"{run}/answers.yaml", "w"), sort_keys=True, allow_unicode=True, width=110)
print(len(out), "answers")
