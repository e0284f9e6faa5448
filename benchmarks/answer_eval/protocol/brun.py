#!/usr/bin/env python3
"""Run one of the bundle's own Python scripts from the bundle root and log its output size for one question.

usage: brun.py QID -- python3 SCRIPT ARGS...
example: brun.py s20-K1-01 -- python3 sub-skills/failure-triage/scripts/triage_log.py --search "address already in use"
Exit codes: the script's own output is shown with its exit code; 2 usage error (one line on stderr).
"""
import json, os, subprocess, sys, time

from _common import EVAL, REPO_ROOT, fail, run  # noqa: F401


def main(argv):
    B = os.environ.get("S20_BUNDLE", EVAL + "/bundle")
    if len(argv) < 3 or argv[1] != "--":
        fail("usage: brun QID -- python3 sub-skills/.../scripts/X.py ARGS")
    qid, cmd = argv[0], argv[2:]
    if cmd[0] in ("python3", "python"):
        cmd[0] = "/usr/bin/python3"
    script = cmd[1] if len(cmd) > 1 else ""
    if not os.path.normpath(os.path.join(B, script)).startswith(B + os.sep) or not script.endswith(".py"):
        fail("brun: only the bundle's own python scripts")
    r = subprocess.run(cmd, cwd=B, capture_output=True, text=True, timeout=300)
    out = r.stdout + (("\n[stderr]\n" + r.stderr) if r.stderr else "") + f"\n[exit {r.returncode}]\n"
    sys.stdout.write(out)
    with open(f"{EVAL}/logs/{qid}.jsonl", "a") as f:
        f.write(json.dumps({"t": time.time(), "kind": "run", "cmd": " ".join(cmd[1:]), "chars": len(out)}) + "\n")


if __name__ == "__main__":
    run(main, __doc__)
