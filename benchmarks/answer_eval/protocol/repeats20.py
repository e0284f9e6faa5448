#!/usr/bin/env python3
"""Collect the entries dropped only because an earlier set has the same answer -> set20/repeats.yaml.

usage: repeats20.py                 print the classification
       MERGE=--write repeats20.py   also write the file
example: EVAL_DIR=/work/s20 python3 repeats20.py
Exit codes: 0 done; 2 unreadable or malformed author/review file (one line on stderr).
"""
import glob, os, re, yaml

from _common import EVAL, REPO_ROOT, fail, run  # noqa: F401


def main(argv):
    OUT = REPO_ROOT + "/benchmarks/answer_eval/set20/repeats.yaml"
    authors = {}
    for f in glob.glob(EVAL + "/authors/*.yaml"):
        for e in yaml.safe_load(open(f)) or []:
            authors[e["id"]] = e
    rep = []
    # dropped for another reason too (ineligible, unseen or unestablished source, downstream cause)
    FORCE_REPEAT = {"s20-K3-06"}
    NOT_REPEAT = {"s20-K13-02", "s20-K1-01", "s20-K1-02", "s20-K2-01", "s20-K10-07", "s20-K3-01", "s20-K6-03", "s20-K6-04", "s20-K5-04", "s20-K8-07", "s20-K10-03"}
    for f in sorted(glob.glob(EVAL + "/reviews/*.yaml")):
        for it in yaml.safe_load(open(f)) or []:
            r = it.get("reason", "")
            if it["id"] in FORCE_REPEAT or (it.get("verdict") == "drop" and it["id"] not in NOT_REPEAT and re.search(r"duplicate|same answer as|answer is the same as", r, re.I)):
                e = dict(it.get("entry") or authors[it["id"]])
                if it["id"] in FORCE_REPEAT:
                    r = "Lead drop for consistency: exit code -9 = SIGKILL from the host OOM killer is the answer of s2-fd-01 and s9-fd-e01 (s20-K4-02 and s20-K8-06 were dropped for it); reviewed entry (fix) kept here. Reviewer: " + r
                e["repeat_of"] = r
                rep.append(e)
                print(it["id"], "|", r[:110])
            elif it.get("verdict") == "drop":
                print("  (not a repeat)", it["id"], "|", r[:110])
    if "--write" in os.environ.get("MERGE", ""):
        with open(OUT, "w") as fh:
            fh.write("# Set 20 repeats: fresh threads whose answer an earlier set already has (dropped from the held-out set;\n"
                     "# ground truths are the authors', checked by reviewers only for the duplication). Secondary figure.\n")
            yaml.safe_dump({"questions": rep}, fh, sort_keys=False, allow_unicode=True, width=110)
    print(len(rep), "repeats")


if __name__ == "__main__":
    run(main, __doc__)
