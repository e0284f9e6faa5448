#!/usr/bin/env python3
"""Merge reviewed entries (reviews/*.yaml of the round) into setN/questions.yaml (N: env SET, default 20)
and print a summary.

usage: merge20.py [ID ...]          ids the lead drops on top of the reviewers' drops
       MERGE=--write merge20.py ... write the file (otherwise only the summary is printed)
example: EVAL_DIR=/work/s20 python3 merge20.py s20-K3-06
         SET=21 EVAL_DIR=/work/s21 python3 merge20.py        (set 21: repeat_of counted, kept in the set)
Exit codes: 0 done; 2 unreadable or malformed review file (one line on stderr).
"""
import collections, glob, os, sys, yaml

from _common import EVAL, REPO_ROOT, fail, run  # noqa: F401


def main(argv):
    n = os.environ.get("SET", "20")
    OUT = REPO_ROOT + f"/benchmarks/answer_eval/set{n}/questions.yaml"
    drop_ids = set(argv)  # extra ids dropped by the lead (cross-batch duplicates)
    kept, verdicts = [], collections.Counter()
    per_author = collections.Counter()
    for f in sorted(glob.glob(EVAL + "/reviews/*.yaml")):
        items = yaml.safe_load(open(f)) or []
        for it in items:
            v = it.get("verdict")
            verdicts[v] += 1
            if v in ("keep", "fix") and it.get("entry"):
                e = it["entry"]
                if e["id"] in drop_ids:
                    verdicts["lead-drop"] += 1
                    continue
                for k in ("id", "area", "question", "source", "ground_truth", "must_mention", "misleading_if", "verified_against"):
                    assert e.get(k), (f, e.get("id"), k)
                assert 2 <= len(e["must_mention"]) <= 4, e["id"]
                e.setdefault("question_form", "paraphrase")
                e["review"] = v
                kept.append(e)
                per_author[os.path.basename(f)[:-5]] += 1
    ids = [e["id"] for e in kept]
    assert len(ids) == len(set(ids)), [i for i, c in collections.Counter(ids).items() if c > 1]
    order = ["id", "area", "source", "source_kind", "question_form", "question", "ground_truth", "must_mention",
             "misleading_if", "established_by", "evidence", "verified_against", "cpu_check", "pinned_note", "repeat_of",
             "review"]
    kept = [{k: e[k] for k in order + sorted(set(e) - set(order)) if k in e} for e in kept]
    if "--write" in os.environ.get("MERGE", ""):
        with open(OUT, "w") as fh:
            fh.write(f"# Set {n}: held-out questions, committed before any answer (see SPLIT.md)\n")
            yaml.safe_dump({"questions": kept}, fh, sort_keys=False, allow_unicode=True, width=110)
    print("verdicts", dict(verdicts))
    print("kept", len(kept), dict(per_author))
    print("areas", dict(collections.Counter(e["area"] for e in kept)))
    print("source_kind", dict(collections.Counter(e.get("source_kind") for e in kept)))
    print("established_by", dict(collections.Counter(e.get("established_by") for e in kept)))
    print("form", dict(collections.Counter(e.get("question_form") for e in kept)))
    print("repeat_of set", sum(1 for e in kept if e.get("repeat_of")))


if __name__ == "__main__":
    run(main, __doc__)
