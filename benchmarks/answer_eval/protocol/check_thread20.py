#!/usr/bin/env python3
"""Set-20 eligibility checker (benchmarks/answer_eval/set20/SPLIT.md).

usage: python3 check_thread20.py URL [URL ...]
Prints, per URL: ELIGIBLE or REJECT with the reason.
example: S20_SELF=/work/s20/authors/K3.yaml python3 check_thread20.py https://github.com/owner/repo/issues/1234
Exit codes: 0 all eligible; 1 at least one REJECT; 2 usage error or unreadable exclusion files (one line).
Env S20_SELF=path/to/own/author/file excludes that file from the cross-author check.
"""
import glob
import hashlib
import os
import re
import subprocess
import sys
import urllib.parse

import yaml

from _common import EVAL, REPO_ROOT, run  # noqa: F401

REPO = REPO_ROOT
S20 = EVAL + ""

GH = re.compile(r"https?://(?:www\.)?github\.com/([^/\s]+)/([^/\s#?]+)/(issues|pull|discussions)/(\d+)", re.I)
FORUM = re.compile(r"https?://(?:www\.)?(discuss\.huggingface\.co|discuss\.pytorch\.org|dev-discuss\.pytorch\.org)/t/(?:[^/\s]+/)?(\d+)", re.I)
SE = re.compile(r"https?://(?:www\.)?([a-z0-9.]*(?:stackoverflow\.com|stackexchange\.com|serverfault\.com|superuser\.com|askubuntu\.com))/(?:questions|q|a)/(\d+)", re.I)


def norm_key(url):
    m = GH.search(url)
    if m:
        return ("gh", f"{m.group(1).lower()}/{m.group(2).lower()}", int(m.group(4)))
    m = FORUM.search(url)
    if m:
        return ("forum", m.group(1).lower(), int(m.group(2)))
    m = SE.search(url)
    if m:
        return ("forum", m.group(1).lower(), int(m.group(2)))
    p = urllib.parse.urlsplit(url.strip())
    host = (p.hostname or "").lower()
    if host.startswith("www."):
        host = host[4:]
    path = urllib.parse.unquote(p.path).rstrip("/")
    return ("page", host + path, None)


def page_hash_odd(key):
    h = hashlib.sha1(key.encode("utf-8")).hexdigest()
    return int(h[-1], 16) % 2 == 1, h


SHORT_REF = re.compile(r"(?<![\w/.#-])((?:[A-Za-z0-9][\w.-]*/)?[A-Za-z][\w.-]*)#(\d{2,})\b")


def short_ref_excluded(ex, repo, num):
    """The reason a GitHub thread is excluded because a set file names it as repo#num, or None."""
    return ex.get(("short", repo.split("/")[-1], num))


def urls_in(text):
    return re.findall(r"https?://[^\s\"'<>)\]]+", text)


def excluded_keys():
    ex = {}
    def add(url, why):
        k = norm_key(url.rstrip(".,;:"))
        ex.setdefault(k, why)
    tsv = f"{REPO}/benchmarks/field_coverage/threads.tsv"
    for line in open(tsv, encoding="utf-8"):
        for u in urls_in(line):
            add(u, "in field_coverage/threads.tsv")
    for f in sorted(glob.glob(f"{REPO}/benchmarks/answer_eval/**/*.yaml", recursive=True)) + \
            sorted(glob.glob(f"{REPO}/benchmarks/answer_eval/*/SPLIT.md")):
        if "/runs/" in f:
            continue
        txt = open(f, encoding="utf-8").read()
        for u in urls_in(txt):
            add(u, f"used in {os.path.relpath(f, REPO)}")
        for name, num in SHORT_REF.findall(txt):  # "owner/repo#123" or "repo#123" in prose
            ex.setdefault(("short", name.lower().rsplit("/", 1)[-1], int(num)),
                          f"named as {name}#{num} in {os.path.relpath(f, REPO)}")
    me = os.environ.get("S20_SELF")
    for f in sorted(glob.glob(f"{S20}/authors/*.yaml")) + sorted(glob.glob(f"{S20}/reviews/*.yaml")):
        if me and os.path.abspath(f) == os.path.abspath(me):
            continue
        try:
            txt = open(f, encoding="utf-8").read()
        except OSError:
            continue
        for u in urls_in(txt):
            add(u, f"already taken by another set-20 author/reviewer ({os.path.basename(f)})")
    return ex


def cited_in_bundle(kind, repo, num, key):
    """True when the bundle (committed files outside benchmarks/) names this thread."""
    if kind == "gh":
        pats = [f"{repo}/issues/{num}", f"{repo}/pull/{num}", f"{repo}/discussions/{num}", f"{repo}#{num}"]
        name = repo.split("/")[1]
        pats.append(f"{name}#{num}")
    elif kind == "forum":
        pats = [f"/{num}"]
    else:
        pats = [key]
    out = subprocess.run(["git", "-C", REPO, "grep", "-l", "-i", "-F"] + sum((["-e", p] for p in pats), [])
                         + ["--", ".", ":!benchmarks"], capture_output=True, text=True)
    hits = [h for h in out.stdout.split() if h]
    if kind == "forum" and hits:
        # a bare /NNNN is too loose: confirm the host appears on the same line
        real = []
        for h in hits:
            for line in open(os.path.join(REPO, h), encoding="utf-8", errors="replace"):
                if f"/{num}" in line and repo.split(".")[0] in line.lower():
                    real.append(h)
                    break
        hits = real
    if kind == "gh":
        # "#N" patterns: confirm word boundary
        real = []
        for h in hits:
            txt = open(os.path.join(REPO, h), encoding="utf-8", errors="replace").read().lower()
            if re.search(rf"{re.escape(repo)}/(issues|pull|discussions)/{num}\b", txt) or \
               re.search(rf"\b{re.escape(repo.split('/')[1])}#{num}\b", txt):
                real.append(h)
        hits = real
    return hits


def check(url, ex):
    kind, repo, num = norm_key(url)
    k = (kind, repo, num)
    if k in ex:
        return False, ex[k]
    if kind in ("gh", "forum"):
        if num % 2 == 0:
            return False, f"even-numbered ({num}): writers' side"
        hits = cited_in_bundle(kind, repo, num, None)
        if hits:
            return False, f"cited in the bundle: {hits[:3]}"
        return True, f"odd {kind} thread {repo} {num}"
    odd, h = page_hash_odd(repo)
    if not odd:
        return False, f"web page key '{repo}' hashes even (sha1 ...{h[-6:]}): writers' side"
    hits = cited_in_bundle(kind, None, None, repo)
    if hits:
        return False, f"named in the bundle: {hits[:3]}"
    return True, f"web page key '{repo}' hashes odd (sha1 ...{h[-6:]})"


def main(argv, rule=None, name="check_thread20.py"):
    """Check each URL against the exclusions and a split rule (this set's `check` unless given)."""
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv:
        print(f"usage: {name} URL [URL ...]  (--help for more)", file=sys.stderr)
        return 2
    ex = excluded_keys()
    ok = True
    for u in argv:
        good, why = (rule or check)(u, ex)
        ok &= good
        print(("ELIGIBLE " if good else "REJECT   ") + u + "  -- " + why)
    return 0 if ok else 1


if __name__ == "__main__":
    run(main, __doc__)
