#!/usr/bin/env python3
"""Check references/facts/{torch,transformers,deepspeed,accelerate}_body_changes.jsonl against the
release files (wheels; DeepSpeed's sdist) the entries were written from (a maintainer tool: CI has no wheels, so tests/facts/test_body_changes.py checks that every
line has a record here and that each `pinned_check` holds in the installed package).

An entry says the change first appears in `version` and names the older release it was compared with
in `evidence` ("<lib> A -> B (wheel sources): ..." or "(release sources)"). For each entry this script
opens the release files of A and B (wheels of any platform, or sdists `<lib>-X.tar.gz`: only the Python
sources are read; sdist members `<lib>-X/<path>` are read as `<path>`, so entries use package-relative
paths like deepspeed/runtime/zero/stage_1_and_2.py) and requires:
  before.contains  in A's before.path and not in B's (the old code that went away), and/or
  after.contains   in B's after.path and not in A's (the new code);
at least one of the two. Whitespace runs count as one space on both sides.

With --write it records sha256(line) -> the two wheels' names and sha256 in
tests/audit/body_changes_verified.json (kept lines only; a changed line needs a new check).

Examples:
  python3 tests/audit/verify_body_changes.py --wheels /tmp/wheels            # check, write nothing
  python3 tests/audit/verify_body_changes.py --wheels /tmp/wheels --write
  pip download transformers==4.47.1 --no-deps -d /tmp/wheels                 # getting a wheel
  pip download torch==2.6.0 --no-deps --only-binary=:all: --platform macosx_11_0_arm64 -d /tmp/wheels
  pip download deepspeed==0.19.8 --no-deps --no-binary :all: -d /tmp/wheels  # DeepSpeed: an sdist
  pip download accelerate==1.15.0 --no-deps -d /tmp/wheels

Exit codes: 0 every entry verified; 1 at least one failed (listed on stderr); 2 usage error.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import _changes  # noqa: E402

RECORDS = Path(__file__).resolve().parent / "body_changes_verified.json"
EVIDENCE = re.compile(r"^(torch|transformers|deepspeed|accelerate) (\d+\.\d+\.\d+) -> (\d+\.\d+\.\d+)"
                      r" \((?:wheel|release) sources\)")
RELEASE = re.compile(r"^(torch|transformers|deepspeed|accelerate)-(\d+\.\d+\.\d+)(?:(?:\+[^-]*)?-.*\.whl|\.tar\.gz)$")


def squash(s: str) -> str:
    return re.sub(r"\s+", " ", s)


class Wheels:
    def __init__(self, folder: Path):
        self.by_version = {}
        for w in sorted(folder.iterdir()):
            m = RELEASE.match(w.name)
            if m:  # a wheel wins over an sdist of the same release (sorted: '-' < '.')
                self.by_version.setdefault((m.group(1), m.group(2)), w)
        self.cache = {}

    def text(self, lib, version, path):
        w = self.by_version.get((lib, version))
        if w is None:
            raise KeyError(f"no {lib} {version} wheel or sdist")
        key = (w, path)
        if key not in self.cache:
            self.cache[key] = squash(read_member(w, path, f"{lib}-{version}/"))
        return self.cache[key]

    def sha(self, lib, version):
        w = self.by_version[(lib, version)]
        return w.name, hashlib.sha256(w.read_bytes()).hexdigest()


def read_member(archive: Path, path: str, sdist_top: str) -> str:
    """PATH's text in a wheel, or in an sdist under its top folder SDIST_TOP ('' when absent)."""
    try:
        if archive.name.endswith(".tar.gz"):
            with tarfile.open(archive, "r:gz") as t:
                f = t.extractfile(sdist_top + path)
                return f.read().decode("utf-8", "replace") if f else ""
        with zipfile.ZipFile(archive) as z:
            return z.read(path).decode("utf-8", "replace")
    except KeyError:
        return ""


def verify(e, wheels):
    """'' when the entry holds in its wheels, else why not."""
    m = EVIDENCE.match(e.get("evidence", ""))
    if not m or m.group(1) != e["lib"] or m.group(3) != e["version"]:
        return ("evidence must start '<lib> OLD -> VERSION (wheel sources)' or '(release sources)' with"
                " VERSION = the entry's version")
    lib, old, new = m.groups()
    if not (e.get("before") or e.get("after")):
        return "needs 'before' and/or 'after'"
    try:
        for side, there, gone in (("before", old, new), ("after", new, old)):
            c = e.get(side)
            if not c:
                continue
            t = squash(c["contains"])
            if t not in wheels.text(lib, there, c["path"]):
                return f"{side}: text not in {lib} {there} {c['path']}"
            if t in wheels.text(lib, gone, c["path"]):
                return f"{side}: text still in {lib} {gone} {c['path']}"
    except KeyError as exc:
        return str(exc.args[0])
    return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", required=True, help="folder with the wheels (and DeepSpeed sdists)")
    ap.add_argument("--write", action="store_true", help="record the verified lines")
    a = ap.parse_args(argv)
    folder = Path(a.wheels)
    if not folder.is_dir():
        print(f"error: no such folder: {folder}", file=sys.stderr)
        return 2
    wheels = Wheels(folder)
    records, bad = {}, 0
    for path in _changes.BODY:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
            except ValueError:
                print(f"{path.name}:{n}: not JSON", file=sys.stderr)
                bad += 1
                continue
            why = _changes.check_entry(e) or verify(e, wheels)
            if why:
                print(f"{path.name}:{n}: {why}", file=sys.stderr)
                bad += 1
                continue
            lib, old, new = EVIDENCE.match(e["evidence"]).groups()
            records[hashlib.sha256(line.strip().encode()).hexdigest()] = {
                "file": path.name, "old": wheels.sha(lib, old), "new": wheels.sha(lib, new)}
    print(f"{len(records)} verified, {bad} failed")
    if a.write and not bad:
        RECORDS.write_text(json.dumps({"entries": records}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
