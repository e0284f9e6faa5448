#!/usr/bin/env python3
"""Verify the release-change index against the upstream git history (a maintainer tool, not a test).

For every line of references/facts/release_changes.jsonl it checks, in the fetched repository
(<mirrors>/huggingface+accelerate/repo, <mirrors>/deepspeedai+DeepSpeed/repo):
  - the sha is a first-parent commit of the default branch and its title ends with "(#PR)";
  - `version` is the first X.Y.Z release tag that contains it; for a commit no tag contains,
    `version` is the pinned release and `pinned_check.contains` occurs in the installed file
    `pinned_check.path` (site-packages of --site);
  - every name in `names` occurs in the commit's diff;
  - `symptom`, when given, occurs in the commit message or diff;
  - `text` is not the commit title (own words: a difflib ratio under 0.75);
  - `backported` names the first earlier patch release whose release branch carries a cherry-pick of
    the same PR (absent when there is none), so a user on that patch release knows they have it.
Coverage: every first-parent commit of each walked range (tests/audit/release_changes/<lib>.decisions.tsv)
has a decision line, and every included one an entry.

With --write it records a sha256 per entry line and the coverage counts in
tests/audit/release_changes_verified.json; CI has no mirror, so tests/facts/test_release_changes.py
checks that every line has a matching record.

Examples:
  python3 tests/audit/verify_release_changes.py
  python3 tests/audit/verify_release_changes.py --write
  python3 tests/audit/verify_release_changes.py --mirrors /work/.mirror --site .venv/lib/python3.11/site-packages

Exit codes: 0 all verified; 1 an entry or the coverage failed; 2 usage error or unreadable index.
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import _changes  # noqa: E402

RECORDS = HERE / "release_changes_verified.json"
DECISIONS = HERE / "release_changes"
GITDIR = {"accelerate": "huggingface+accelerate/repo", "deepspeed": "deepspeedai+DeepSpeed/repo"}
PINNED = {"accelerate": "1.15.0", "deepspeed": "0.19.8"}
TAG_RE = re.compile(r"^v(\d+\.\d+\.\d+)$")


def line_hash(line: str) -> str:
    return hashlib.sha256(line.strip().encode("utf-8")).hexdigest()


class Repo:
    def __init__(self, gitdir: Path):
        self.gitdir = gitdir
        self._tags = None
        self._fp = None

    def git(self, *args) -> str:
        return subprocess.run(["git", "--git-dir", str(self.gitdir), *args], capture_output=True, text=True,
                              errors="replace", check=True).stdout

    def first_parent(self) -> list:
        if self._fp is None:
            self._fp = self.git("rev-list", "--first-parent", "HEAD").split()
        return self._fp

    def backports(self) -> dict:
        """{PR number: the first patch release (X.Y.Z, Z > 0) whose release branch carries a cherry-pick
        of it}: commits reachable from the tag but not from HEAD, titles ending in "(#N)"."""
        if getattr(self, "_bp", None) is None:
            self._bp = {}
            tags = sorted((m.group(1) for t in self.git("tag").split() if (m := TAG_RE.match(t))), key=_changes.vkey)
            for v in tags:
                if _changes.vkey(v)[2] == 0:
                    continue
                for title in self.git("log", "--format=%s", f"v{v}", "--not", "HEAD").splitlines():
                    for n in re.findall(r"\(#(\d+)\)", title):
                        self._bp.setdefault(int(n), v)
        return self._bp

    def first_release(self, sha: str):
        tags = [m.group(1) for t in self.git("tag", "--contains", sha).split() if (m := TAG_RE.match(t))]
        return min(tags, key=_changes.vkey) if tags else None


def check(e: dict, repo: Repo, fp: set, site: Path) -> list:
    bad = []
    sha = e["sha"]
    if sha not in fp:
        return [f"{sha[:10]} is not a first-parent commit of HEAD"]
    title = repo.git("log", "-1", "--format=%s", sha).strip()
    body = repo.git("log", "-1", "--format=%B", sha)
    if not title.endswith(f"(#{e['pr']})"):
        bad.append(f"title does not end with (#{e['pr']}): {title!r}")
    rel = repo.first_release(sha)
    if rel is None:
        pin = e.get("pinned_check")
        if e["version"] != PINNED[e["lib"]]:
            bad.append(f"no release tag contains it; version must be the pinned {PINNED[e['lib']]}")
        elif not (isinstance(pin, dict) and pin.get("path") and pin.get("contains")):
            bad.append("no release tag contains it and pinned_check is missing")
        else:
            f = site / pin["path"]
            try:
                if pin["contains"] not in f.read_text(encoding="utf-8", errors="replace"):
                    bad.append(f"pinned_check text not in {pin['path']}")
            except OSError:
                bad.append(f"pinned_check path unreadable: {f}")
    elif rel != e["version"]:
        bad.append(f"first release is {rel}, entry says {e['version']}")
    bp = repo.backports().get(e["pr"])
    want = bp if bp and _changes.vkey(bp) < _changes.vkey(e["version"]) else None
    if e.get("backported") != want:
        bad.append(f"backported should be {want!r} (a cherry-pick on a patch release branch), entry has "
                   f"{e.get('backported')!r}")
    diff = repo.git("show", "--format=", sha)
    for n in e["names"]:
        core = n.strip().lstrip("-")
        cands = {core, core.rsplit(".", 1)[-1], core.replace("-", "_"), core.replace("_", "-")}
        if not any(c and c in diff for c in cands):
            bad.append(f"name {n!r} not in the diff")
    if e.get("symptom") and e["symptom"] not in diff and e["symptom"] not in body:
        bad.append(f"symptom {e['symptom']!r} not in the commit message or diff")
    ratio = difflib.SequenceMatcher(None, e["text"].lower(), re.sub(r"\s*\(#\d+\)$", "", title).lower()).ratio()
    if ratio >= 0.75:
        bad.append(f"text is the commit title (ratio {ratio:.2f})")
    return bad


def coverage(lib: str, repo: Repo, entries: list) -> tuple:
    """(problems, counts) for the walked range of LIB from its decisions file."""
    path = DECISIONS / f"{lib}.decisions.tsv"
    try:
        rows = [ln.split("\t") for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except OSError:
        return [f"{lib}: no decisions file {path.name}"], {}
    dec = {r[0]: r[1] for r in rows if len(r) >= 2}
    fp = repo.first_parent()
    idx = [i for i, s in enumerate(fp) if s in dec]
    if not idx:
        return [f"{lib}: no decided commit is on the first-parent line"], {}
    lo, hi = min(idx), max(idx)  # fp is newest first
    walked = fp[lo:hi + 1]
    missing = [s for s in walked if s not in dec]
    included = {e["sha"] for e in entries if e["lib"] == lib}
    probs = [f"{lib}: {len(missing)} commits inside the walked range have no decision (e.g. {missing[0][:10]})"] \
        if missing else []
    no_entry = [s for s in walked if dec.get(s) == "include" and s not in included]
    if no_entry:
        probs.append(f"{lib}: {len(no_entry)} commits decided 'include' have no entry (e.g. {no_entry[0][:10]})")
    outside = sorted(included - set(walked))
    counts = {"newest": walked[0], "oldest": walked[-1], "commits": len(walked),
              "included": sum(1 for s in walked if dec.get(s) == "include"), "entries_outside_range": len(outside),
              "from": repo.first_release(walked[-1]) or "", "newest_date":
                  repo.git("log", "-1", "--format=%ad", "--date=short", walked[0]).strip(),
              "oldest_date": repo.git("log", "-1", "--format=%ad", "--date=short", walked[-1]).strip()}
    return probs, counts


def same_window(entries, repos) -> int:
    for lib, repo in repos.items():
        by_pr = {}
        log = repo.git("log", "--first-parent", "--format=%H %s", "HEAD")
        for line in log.splitlines():
            m = re.search(r"\(#(\d+)\)$", line)
            if m:
                by_pr[int(m.group(1))] = line.split()[0]
        for e in entries:
            if e["lib"] != lib or e["kind"] != "fix":
                continue
            body = repo.git("log", "-1", "--format=%B", e["sha"])
            for ref in sorted({int(x) for x in re.findall(r"#(\d{3,5})\b", body)} - {e["pr"]}):
                if ref in by_pr and repo.first_release(by_pr[ref]) == e["version"]:
                    print(f"{lib}\t{e['sha']}\t#{e['pr']}\trefers to #{ref}, also first released in {e['version']}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", default=str(REPO.parent / ".mirror"))
    ap.add_argument("--site", default=next((str(p) for p in sorted((REPO / ".venv" / "lib").glob("python3*/site-packages"))), ""))
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--set-backports", action="store_true",
                    help="rewrite each entry's `backported` field from the release branches (then verify)")
    ap.add_argument("--same-window", action="store_true",
                    help="list fix entries whose commit refers to a PR first released in the same release "
                         "(a regression that may never have shipped: review each by hand)")
    args = ap.parse_args(argv)
    try:
        lines = [ln for ln in _changes.DATA.read_text(encoding="utf-8").splitlines() if ln.strip()]
        entries = _changes.load(_changes.DATA)
    except (OSError, _changes.ChangesError) as exc:
        print(f"verify_release_changes: {exc}", file=sys.stderr)
        return 2
    repos = {lib: Repo(Path(args.mirrors) / d) for lib, d in GITDIR.items()}
    fps = {lib: set(r.first_parent()) for lib, r in repos.items()}
    if args.same_window:
        return same_window(entries, repos)
    if args.set_backports:
        out = []
        for e in entries:
            bp = repos[e["lib"]].backports().get(e["pr"])
            e.pop("backported", None)
            if bp and _changes.vkey(bp) < _changes.vkey(e["version"]):
                e["backported"] = bp
            out.append(json.dumps(e, ensure_ascii=False))
        _changes.DATA.write_text("\n".join(out) + "\n", encoding="utf-8")
        print(f"backported set on {sum('backported' in json.loads(x) for x in out)} entries")
        lines = out
    failed, records = 0, {}
    seen = set()
    for line, e in zip(lines, entries):
        key = (e["lib"], e["sha"])
        probs = check(e, repos[e["lib"]], fps[e["lib"]], Path(args.site))
        if key in seen:
            probs.append("duplicate sha")
        seen.add(key)
        if probs:
            failed += 1
            print(f"FAIL {e['lib']} #{e['pr']} {e['sha'][:10]}: " + "; ".join(probs))
        else:
            records[line_hash(line)] = f"{e['lib']} #{e['pr']}"
    cover = {}
    for lib, r in repos.items():
        probs, counts = coverage(lib, r, entries)
        for p in probs:
            print("FAIL coverage " + p)
        failed += bool(probs)
        if counts:
            cover[lib] = counts
    print(f"{len(entries)} entries, {len(records)} verified, {failed} failures")
    if args.write and not failed:
        RECORDS.write_text(json.dumps({"entries": records, "coverage": cover}, indent=1, sort_keys=True) + "\n",
                           encoding="utf-8")
        cov = {lib: {"from": (f"v{c['from']}" if c["from"] else c["oldest"][:10]) + f" ({c['oldest_date']})",
                     "to": f"{c['newest'][:10]} ({c['newest_date']})", "commits_walked": c["commits"],
                     "included": c["included"]} for lib, c in cover.items()}
        cov.update({k: v for k, v in _changes.coverage().items() if k in _changes.API_LIBS})  # api_history.py's part
        _changes.COVERAGE.write_text(json.dumps(cov, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {RECORDS.relative_to(REPO)} and {_changes.COVERAGE.relative_to(REPO)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
