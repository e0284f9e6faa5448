#!/usr/bin/env python3
"""Reading cost of the bundle as answering agents meet it: the size (characters / 4, the unit the
answer evaluation counts) of the router, of every sub-skill SKILL.md and of the references the
recorded answers opened most, with how often each was opened, and the tokens per answer.

The answers under benchmarks/answer_eval/runs/*/answers.yaml record `files_opened` and `tokens_read`
for each question; the sizes are those of the files in this checkout (so a cut shows up here before
a new evaluation round measures it).

Examples:
  python3 benchmarks/reading_cost.py                  # all runs, top 25 references
  python3 benchmarks/reading_cost.py --run 70cda53-s5 --top 10
  python3 benchmarks/reading_cost.py --output json

Exit codes: 0 measured; 2 usage error or an answers file unreadable.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "benchmarks" / "answer_eval" / "runs"


def tokens(path: Path) -> int:
    try:
        return len(path.read_text(encoding="utf-8")) // 4
    except OSError:
        return -1  # moved or deleted since the run


def load_runs(names):
    import yaml
    out = {}
    for d in sorted(p for p in RUNS.iterdir() if p.is_dir()):
        if names and d.name not in names:
            continue
        f = d / "answers.yaml"
        if f.is_file():
            data = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
            out[d.name] = [a for a in data.values() if isinstance(a, dict)]
    return out


def measure(run_names, top):
    runs = load_runs(run_names)
    if run_names and set(run_names) - set(runs):
        raise ValueError(f"no answers.yaml for run(s) {sorted(set(run_names) - set(runs))}")
    opened = Counter()
    per_run = {}
    for name, answers in runs.items():
        toks = [a["tokens_read"] for a in answers if isinstance(a.get("tokens_read"), (int, float))]
        nfiles = [len(a.get("files_opened") or []) for a in answers]
        per_run[name] = {"answers": len(answers),
                         "median_tokens": statistics.median(toks) if toks else None,
                         "median_files": statistics.median(nfiles) if nfiles else None}
        for a in answers:
            for f in set(a.get("files_opened") or []):
                opened[f.split("#")[0].lstrip("./")] += 1
    total = sum(len(a) for a in runs.values())
    skills = {"SKILL.md": tokens(REPO / "SKILL.md")}
    for p in sorted((REPO / "sub-skills").glob("*/SKILL.md")):
        skills[p.relative_to(REPO).as_posix()] = tokens(p)
    refs = [(f, n, tokens(REPO / f)) for f, n in opened.most_common() if not f.endswith("SKILL.md")][:top]
    # what a typical answer pays: router + the SKILL.md opened + references, weighted by opening
    return {"answers": total, "runs": per_run,
            "skill_md": {f: {"tokens": t, "opened": opened.get(f, 0)} for f, t in skills.items()},
            "references": [{"file": f, "opened": n, "tokens": t} for f, n, t in refs]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__[__doc__.index("Examples:"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", default=[], help="a run folder under runs/ (repeatable)")
    ap.add_argument("--top", type=int, default=25, help="references to list (default 25)")
    ap.add_argument("--output", choices=("text", "json"), default="text")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    if args.top < 1:
        print("reading_cost.py: --top must be at least 1", file=sys.stderr)
        return 2
    try:
        res = measure(args.run, args.top)
    except Exception as e:  # noqa: BLE001 - one line, no traceback
        print(f"reading_cost.py: {e}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(res, indent=1))
        return 0
    print(f"answers: {res['answers']}")
    for name, r in res["runs"].items():
        print(f"  run {name}: {r['answers']} answers, median {r['median_tokens']} tokens, "
              f"median {r['median_files']} files")
    print("\nSKILL.md files (tokens = chars/4, times opened over all runs):")
    for f, r in sorted(res["skill_md"].items(), key=lambda x: -x[1]["opened"]):
        print(f"  {r['tokens']:6d}  {r['opened']:4d}x  {f}")
    print(f"\nreferences opened most (top {len(res['references'])}; -1 = file no longer exists):")
    for r in res["references"]:
        print(f"  {r['tokens']:6d}  {r['opened']:4d}x  {r['file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
