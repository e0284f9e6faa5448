#!/usr/bin/env python3
"""Set-21 eligibility checker (benchmarks/answer_eval/set21/SPLIT.md): the set-20 checker's exclusions with
a quarter split — held-out side is thread numbers (GitHub, forum, Stack Exchange ids) = 2 mod 4 and web
pages whose key's last SHA-1 hex digit is 2, 6, a or e.

usage: python3 check_thread21.py URL [URL ...]
Prints, per URL: ELIGIBLE or REJECT with the reason.
example: EVAL_DIR=/work/s21 S21_SELF=/work/s21/authors/K3.yaml python3 check_thread21.py https://github.com/owner/repo/issues/1234
Exit codes: 0 all eligible; 1 at least one REJECT; 2 usage error or unreadable exclusion files (one line).
Env S21_SELF=path/to/own/author/file excludes that file from the cross-author check.
"""
import hashlib
import os

from _common import run

if os.environ.get("S21_SELF"):
    os.environ["S20_SELF"] = os.environ["S21_SELF"]     # the set-20 exclusion reader's name for it
import check_thread20 as c20  # noqa: E402 - reads S20_SELF at call time


def split_check(url, ex, number_ok, page_digits, set_name="set-21"):
    """The exclusions, then a number rule: number_ok(num) -> (ok, why) for GitHub / forum ids; web pages
    are eligible when their key's last SHA-1 hex digit is in page_digits."""
    kind, repo, num = c20.norm_key(url)
    if (kind, repo, num) in ex:
        return False, ex[(kind, repo, num)].replace("set-20", set_name)
    short = c20.short_ref_excluded(ex, repo, num) if kind == "gh" else None
    if short:
        return False, short
    if kind in ("gh", "forum"):
        ok, why = number_ok(num)
        if not ok:
            return False, why
        hits = c20.cited_in_bundle(kind, repo, num, None)
        return (False, f"cited in the bundle: {hits[:3]}") if hits else (True, f"{kind} thread {repo} {num} ({why})")
    h = hashlib.sha1(repo.encode("utf-8")).hexdigest()
    if h[-1] not in page_digits:
        return False, f"web page key '{repo}' ends sha1 ...{h[-6:]}: not one of {'/'.join(page_digits)}"
    hits = c20.cited_in_bundle(kind, None, None, repo)
    return (False, f"named in the bundle: {hits[:3]}") if hits else (True, f"web page key '{repo}' (sha1 ...{h[-6:]})")


def _quarter(num):
    if num % 4 == 2:
        return True, "2 mod 4"
    side = "odd: earlier sets' side" if num % 2 else "0 mod 4: writers' side"
    return False, f"number {num} is not 2 mod 4 ({side})"


def check(url, ex):
    return split_check(url, ex, _quarter, "26ae")


def main(argv):
    return c20.main(argv, check, "check_thread21.py")


if __name__ == "__main__":
    run(main, __doc__)
