#!/usr/bin/env python3
"""Set-23 eligibility checker (benchmarks/answer_eval/set23/SPLIT.md): thread numbers that are odd or
2 mod 4 (anything but 0 mod 4, the writers' side); web pages whose key's last SHA-1 hex digit is not 0, 4,
8 or c; the exclusions of sets 20-22, which include every set-1..22 file because the exclusion reader
takes every benchmarks/answer_eval/**/*.yaml.

usage: python3 check_thread23.py URL [URL ...]
Prints, per URL: ELIGIBLE or REJECT with the reason.
example: EVAL_DIR=/work/s23 S23_SELF=/work/s23/authors/K3.yaml python3 check_thread23.py https://github.com/owner/repo/issues/1235
Exit codes: 0 all eligible; 1 at least one REJECT; 2 usage error or unreadable exclusion files (one line).
Env S23_SELF=path/to/own/author/file excludes that file from the cross-author check.
"""
import os

from _common import run

if os.environ.get("S23_SELF"):
    os.environ["S20_SELF"] = os.environ["S23_SELF"]     # the set-20 exclusion reader's name for it
import check_thread21 as c21  # noqa: E402 - reads S20_SELF at call time


def _not_writers_side(num):
    return (False, f"number {num} is 0 mod 4: writers' side") if num % 4 == 0 else (True, "odd or 2 mod 4")


def check(url, ex):
    return c21.split_check(url, ex, _not_writers_side, "1235679abdef", "set-23")


def main(argv):
    return c21.c20.main(argv, check, "check_thread23.py")


if __name__ == "__main__":
    run(main, __doc__)
