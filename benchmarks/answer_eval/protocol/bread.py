#!/usr/bin/env python3
"""Print a bundle file (path relative to the exported bundle) and log what was shown for one question.

usage: bread.py QID PATH [FIRST_LINE [LAST_LINE]]
example: bread.py s20-K1-01 sub-skills/torch-distributed/SKILL.md 1 40
Exit codes: 0 shown; 2 usage error or no such bundle file (one line on stderr).
"""
import json, os, sys, time

from _common import EVAL, REPO_ROOT, fail, run  # noqa: F401


def main(argv):
    B = os.environ.get("S20_BUNDLE", EVAL + "/bundle")
    if len(argv) < 2:
        fail("usage: bread QID PATH [FIRST_LINE [LAST_LINE]]")
    qid, rel = argv[0], argv[1].split("#")[0]
    p = os.path.normpath(os.path.join(B, rel))
    if not p.startswith(B + os.sep) or not os.path.isfile(p):
        fail(f"bread: no bundle file {rel!r}")
    lines = open(p, encoding="utf-8", errors="replace").read().splitlines(True)
    a = int(argv[2]) if len(argv) > 2 else 1
    b = int(argv[3]) if len(argv) > 3 else len(lines)
    text = "".join(lines[a - 1:b])
    sys.stdout.write(text)
    if len(argv) > 2:
        sys.stdout.write(f"\n[bread: lines {a}-{min(b, len(lines))} of {len(lines)}]\n")
    with open(f"{EVAL}/logs/{qid}.jsonl", "a") as f:
        f.write(json.dumps({"t": time.time(), "kind": "read", "file": os.path.relpath(p, B), "chars": len(text)}) + "\n")


if __name__ == "__main__":
    run(main, __doc__)
