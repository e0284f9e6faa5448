#!/usr/bin/env python3
"""Set-22 eligibility checker (benchmarks/answer_eval/set22/SPLIT.md): set 21's quarter rule (thread numbers
2 mod 4; web pages whose key's last SHA-1 hex digit is 2, 6, a or e) and its exclusions, which include every
set-21 file because the exclusion reader takes every benchmarks/answer_eval/**/*.yaml.

usage: python3 check_thread22.py URL [URL ...]
Prints, per URL: ELIGIBLE or REJECT with the reason.
example: EVAL_DIR=/work/s22 S22_SELF=/work/s22/authors/K3.yaml python3 check_thread22.py https://github.com/owner/repo/issues/1234
Exit codes: 0 all eligible; 1 at least one REJECT; 2 usage error or unreadable exclusion files (one line).
Env S22_SELF=path/to/own/author/file excludes that file from the cross-author check.
"""
import os

from _common import run

if os.environ.get("S22_SELF"):
    os.environ["S21_SELF"] = os.environ["S22_SELF"]
import check_thread21 as c21  # noqa: E402


def check(url, ex):
    ok, why = c21.check(url, ex)
    return ok, why.replace("set-21", "set-22")


def main(argv):
    return c21.c20.main(argv, check, "check_thread22.py")


if __name__ == "__main__":
    run(main, __doc__)
