"""Checks on the deepspeed / torch / system catalog files beyond the generic schema test.

- the catalog names the pinned version for pinned packages (that each template is verbatim in the
  named file is test_catalog.py's check, for every catalog file);
- every example line, cleaned like a log line, is matched by its own pattern and the
  entry is the first match in catalog order (no broader entry shadows it);
- ids carry their library prefix; library, role and reference are from the fixed sets.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml




import _repro  # noqa: E402  (tests/failure_triage is on sys.path: conftest.py)

FILES = ("deepspeed.yaml", "torch.yaml", "system.yaml")
PINNED = {"deepspeed": "0.19.8", "torch": "2.13.0"}
LIBRARIES = {"deepspeed", "torch", "nccl", "cuda", "os", "python"}
ROLES = {"root", "cascade", "warning"}
REFERENCES = {"reading-logs", "startup-and-config", "runtime-errors", "hangs-and-timeouts", "out-of-memory",
              "build-failures", "checkpoints-and-resume", "numerics", "generation-under-sharding", "multi-node",
              "failure-matrix"}
KEYS = {"id", "library", "versions", "role", "pattern", "example", "source", "cause", "fix", "reference"}


def _entries():
    out = []
    for name in FILES:
        path = _repro.CATALOG_DIR / name
        for e in yaml.safe_load(path.read_text(encoding="utf-8")):
            out.append(pytest.param(e, id=e["id"]))
    return out


ENTRIES = _entries()


def test_my_files_hold_enough_entries():
    assert len(ENTRIES) >= 100


def test_ids_unique_across_catalog():
    ids = [e["id"] for e in _repro.catalog()]
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes


@pytest.mark.parametrize("e", ENTRIES)
def test_entry_shape(e):
    assert set(e) - {"specializes", "wordings"} == KEYS, set(e) ^ KEYS  # specializes, wordings: optional
    assert e["library"] in LIBRARIES
    assert e["role"] in ROLES
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", e["id"])
    prefix = e["id"].split("-", 1)[0]
    assert prefix == e["library"] or (prefix, e["library"]) == ("os", "python")
    if e["library"] in PINNED:
        assert PINNED[e["library"]] in str(e["versions"])
    ref = e["reference"]
    assert ref.startswith("sub-skills/failure-triage/references/") and ref.endswith(".md")
    assert Path(ref).stem in REFERENCES
    for key in ("cause", "fix", "example", "pattern"):
        assert isinstance(e[key], str) and e[key].strip()


# The template-in-source check for these files is test_catalog.py's, which covers every catalog file
# (and reads each compiled library once).


@pytest.mark.parametrize("e", ENTRIES)
def test_example_matches_and_is_not_shadowed(e):
    line = _repro.clean_line(e["example"])
    assert re.search(e["pattern"], line), (e["pattern"], line)
    first = _repro.first_match(line)
    assert first is not None and first["id"] == e["id"], f"shadowed by {first and first['id']}"
