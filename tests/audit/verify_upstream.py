#!/usr/bin/env python3
"""Verify the ledger's `upstream:` citations and record what was read (a maintainer tool, not a test).

A claim about code that is not installed in the test environment (an older or newer release, a
repository such as torchtitan, enroot, pyxis, horovod or the Kubeflow operator) cites it as

    evidence:
      upstream: huggingface/accelerate@v1.13.0:src/accelerate/accelerator.py   # owner/repo@rev:path
      contains: [text that must be in that file at that revision, ...]
      absent_at: v1.12.0      # optional: a revision (for a wheel: another wheel file) whose copy of the
                              # file, if any, has none of them, for "since vX" claims
    # or, for a file inside a published wheel that is not installed:
      upstream: wheel:torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl:torch/distributed/_functional_collectives.py

This script reads each cited file (git snapshots under --mirrors, laid out as <owner>+<repo>/repo, as
the tool library's `fetch` leaves them; wheels from --wheels folders), checks every `contains` text,
and with --write records the file's sha256 in tests/audit/upstream_verified.json. CI has neither the
snapshots nor the wheels, so tests/audit/test_claims_ledger.py checks that every citation has a
matching record; this script is what re-reads them.

Examples:
  python3 tests/audit/verify_upstream.py                     # check, print one line per citation
  python3 tests/audit/verify_upstream.py --write             # check and (re)write the records
  python3 tests/audit/verify_upstream.py --mirrors /data/mirrors --wheels /opt/pypi-more/files

Exit codes: 0 all verified; 1 a citation failed (file missing or a text absent); 2 usage error or an
unreadable ledger.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RECORDS = HERE / "upstream_verified.json"


def parse(spec: str):
    """('wheel', wheel file name, member) or ('git', 'owner/repo', rev, path); ValueError if neither."""
    if spec.startswith("wheel:"):
        _, wheel, member = spec.split(":", 2)
        if not wheel.endswith(".whl") or not member:
            raise ValueError(f"bad wheel citation {spec!r}")
        return ("wheel", wheel, member)
    repo, sep, rest = spec.partition("@")
    rev, sep2, path = rest.partition(":")
    if not (sep and sep2 and repo.count("/") == 1 and rev and path):
        raise ValueError(f"bad upstream citation {spec!r} (want owner/repo@rev:path)")
    return ("git", repo, rev, path)


def needles(ev) -> list:
    c = ev.get("contains")
    return [c] if isinstance(c, str) else list(c or [])


def read_cited(spec: str, mirrors: list, wheels: list) -> bytes:
    kind = parse(spec)
    if kind[0] == "wheel":
        for folder in wheels:
            p = Path(folder) / kind[1]
            if p.is_file():
                with zipfile.ZipFile(p) as z:
                    return z.read(kind[2])
        raise FileNotFoundError(f"wheel {kind[1]} not in {wheels}")
    _, repo, rev, path = kind
    for folder in mirrors:
        gitdir = Path(folder) / repo.replace("/", "+") / "repo"
        if gitdir.is_dir():
            r = subprocess.run(["git", "--git-dir", str(gitdir), "show", f"{rev}:{path}"], capture_output=True)
            if r.returncode == 0:
                return r.stdout
            raise FileNotFoundError(f"{repo}: {r.stderr.decode(errors='replace').strip()}")
    raise FileNotFoundError(f"no snapshot of {repo} under {mirrors}")


def _default_mirrors() -> list:
    """../.mirror beside the checkout, and beside the main checkout when this is a git worktree."""
    found = [REPO.parent / ".mirror"]
    r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                       capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        found.append(Path(r.stdout.strip()).parent.parent / ".mirror")
    return [str(p) for p in dict.fromkeys(found)]


def upstream_claims():
    sys.path.insert(0, str(HERE))
    from test_claims_ledger import LEDGER  # noqa: E402  (reads the YAML only)
    return [c for _, c in LEDGER if isinstance(c.get("evidence"), dict) and "upstream" in c["evidence"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", action="append",
                    help="folder of git snapshots (default: ../.mirror beside this checkout and beside the main "
                         "checkout of a worktree)")
    ap.add_argument("--wheels", action="append", help="folder of wheels (default: /opt/pypi-more/files)")
    ap.add_argument("--write", action="store_true", help="rewrite tests/audit/upstream_verified.json")
    a = ap.parse_args(argv)
    mirrors = a.mirrors or _default_mirrors()
    wheels = a.wheels or ["/opt/pypi-more/files"]
    records, failed = {}, 0
    try:
        claims = upstream_claims()
    except Exception as e:  # a broken ledger file: one line, not a traceback
        print(f"verify_upstream: cannot read the ledger: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    for c in claims:
        ev = c["evidence"]
        try:
            data = read_cited(ev["upstream"], mirrors, wheels)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
            print(f"FAIL {c['id']}: {e}")
            failed += 1
            continue
        text = data.decode("utf-8", errors="replace")
        if not all(isinstance(n, str) for n in needles(ev)):
            print(f"FAIL {c['id']}: every contains: entry must be a string (quote YAML text with ': ')")
            failed += 1
            continue
        missing = [n for n in needles(ev) if n not in text]
        if missing or not needles(ev):
            print(f"FAIL {c['id']}: {ev['upstream']} lacks {missing or 'a contains: text'}")
            failed += 1
            continue
        rec = {"upstream": ev["upstream"], "contains": needles(ev), "sha256": hashlib.sha256(data).hexdigest(),
               "verified": datetime.date.today().isoformat()}
        if ev.get("absent_at"):
            kind = parse(ev["upstream"])
            # git: another revision of the same path; wheel: another wheel file, same member
            before = (f"{kind[1]}@{ev['absent_at']}:{kind[3]}" if kind[0] == "git"
                      else f"wheel:{ev['absent_at']}:{kind[2]}")
            try:
                old = read_cited(before, mirrors, wheels).decode("utf-8", errors="replace")
            except (FileNotFoundError, KeyError) as e:
                if "no snapshot" in str(e) or "not in" in str(e):
                    print(f"FAIL {c['id']}: {e}")
                    failed += 1
                    continue
                old = ""  # the file did not exist at that revision
            present = [n for n in needles(ev) if n in old]
            if present:
                print(f"FAIL {c['id']}: {before} already has {present}")
                failed += 1
                continue
            rec["absent_at"] = ev["absent_at"]
        print(f"ok   {c['id']}: {ev['upstream']}" + (f" (none of it at {ev['absent_at']})" if ev.get("absent_at") else ""))
        records[c["id"]] = rec
    if a.write:
        if failed:
            print(f"verify_upstream: {failed} failed; records not written", file=sys.stderr)
        else:
            RECORDS.write_text(json.dumps(dict(sorted(records.items())), indent=1, ensure_ascii=False) + "\n",
                               encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
