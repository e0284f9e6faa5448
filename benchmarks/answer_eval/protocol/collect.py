#!/usr/bin/env python3
"""Join the answerers' files and the reading logs into RUNDIR/answers.yaml (files_opened, tokens_read).

usage: collect.py RUNDIR
example: EVAL_DIR=/work/s20 python3 collect.py benchmarks/answer_eval/runs/545ac29d-s20
Exit codes: 0 done; 2 usage error or unreadable answers/log file (one line on stderr).
"""
import glob, json, os, sys, yaml

from _common import EVAL, REPO_ROOT, fail, run  # noqa: F401


def main(argv):
    if len(argv) != 1:
        fail("usage: collect.py RUNDIR  (--help for more)")
    rundir = argv[0]
    os.makedirs(rundir, exist_ok=True)
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
    yaml.safe_dump(out, open(f"{rundir}/answers.yaml", "w"), sort_keys=True, allow_unicode=True, width=110)
    print(len(out), "answers")


if __name__ == "__main__":
    run(main, __doc__)
