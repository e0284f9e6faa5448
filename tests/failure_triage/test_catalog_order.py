"""Match order of the signature catalog: explicit, deterministic, and the same in the script and tests.

- two entries of one role whose patterns both match an example line must be linked by
  `specializes` (so a second entry for a known message cannot come back unnoticed);
- each `specializes` declaration is real (the general pattern matches the specific example);
- `match_order` puts role first, then declared specificity, then file name and position,
  whatever the file names are;
- catalog errors in `specializes` (unknown id, other role, cycle) are rejected, by the CLI with exit 2;
- the reproduction helper (_repro.first_match) is the script's matcher, not a copy of it.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parents[1] / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"


def _repro():
    import _repro as module  # tests/failure_triage is on sys.path (conftest.py)
    return module


def _general_of(catalog) -> dict[str, set[str]]:
    """id -> every id it specializes, transitively."""
    direct = {e.id: set(e.specializes) for e in catalog.entries}
    out = {}
    for eid in direct:
        seen, todo = set(), list(direct[eid])
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo += direct.get(g, ())
        out[eid] = seen
    return out


def test_no_two_entries_of_a_role_match_one_example_unless_declared(catalog, triage):
    general = _general_of(catalog)
    undeclared = []
    for e in catalog.entries:
        line = triage.clean(str(e.raw["example"]))[0].strip()
        for other in catalog.matches(line):
            if other.id == e.id or other.role != e.role:
                continue
            if other.id in general[e.id] or e.id in general[other.id]:
                continue
            undeclared.append((e.id, other.id))
    assert not undeclared, ("entries matching the same example line; merge them into one entry, or "
                            f"declare the narrower one with specializes: {undeclared}")


def test_every_specializes_declaration_is_an_actual_overlap(catalog, triage):
    by_id = catalog.by_id
    stale = []
    for e in catalog.entries:
        line = triage.clean(str(e.raw["example"]))[0].strip()
        for gid in e.specializes:
            if not by_id[gid].regex.search(line):
                stale.append((e.id, gid))
    assert not stale, f"specializes names entries whose pattern does not match the example: {stale}"


def test_the_declared_specific_entry_wins_in_the_real_catalog(catalog):
    line = "RuntimeError: unable to write to file </torch_1234_3141592653_0>: No space left on device (28)"
    assert [e.id for e in catalog.matches(line)][:2] == ["torch-shm-write-failed", "os-no-space-left"]
    assert catalog.match(line).id == "torch-shm-write-failed"


def _entry(eid, pattern, role="root", **extra):
    e = {"id": eid, "library": "torch", "versions": "2.13.0", "role": role, "pattern": pattern,
         "example": "x", "source": {"cite": "synthetic test entry"}, "cause": "c", "fix": "f"}
    e.update(extra)
    return e


def _write(folder: Path, name: str, entries: list[dict]):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(entries), encoding="utf-8")  # JSON is YAML


def test_order_role_then_specificity_then_file_and_position(tmp_path, triage):
    # the general entry sits in the file that sorts first; the specific one wins only by declaration
    _write(tmp_path, "a.yaml", [_entry("torch-general", "Error: disk"),
                                _entry("torch-warn", "Error: disk full", role="warning"),
                                _entry("torch-cascade", "Error", role="cascade")])
    _write(tmp_path, "b.yaml", [_entry("torch-other", "disk"),
                                _entry("torch-specific", "Error: disk full", specializes=["torch-general"]),
                                _entry("torch-narrowest", r"Error: disk full \(28\)",
                                       specializes="torch-specific")])
    cat = triage.load_catalog(tmp_path)
    assert [e.id for e in cat.ordered] == ["torch-narrowest", "torch-specific", "torch-general", "torch-other",
                                           "torch-cascade", "torch-warn"]
    assert cat.match("Error: disk full (28)").id == "torch-narrowest"
    assert cat.match("Error: disk full").id == "torch-specific"
    assert cat.match("Error: disk quota").id == "torch-general"
    assert cat.match("Error: something").id == "torch-cascade"
    # without the declaration, position decides: a.yaml before b.yaml, whatever the load order
    _write(tmp_path / "plain", "b.yaml", [_entry("torch-specific", "Error: disk full")])
    _write(tmp_path / "plain", "a.yaml", [_entry("torch-general", "Error: disk")])
    assert triage.load_catalog(tmp_path / "plain").match("Error: disk full").id == "torch-general"


@pytest.mark.parametrize("entries,message", [
    ([_entry("torch-a", "x", specializes=["torch-missing"])], "unknown id 'torch-missing'"),
    ([_entry("torch-a", "x"), _entry("torch-b", "x", role="cascade", specializes=["torch-a"])], "another role"),
    ([_entry("torch-a", "x", specializes=["torch-b"]), _entry("torch-b", "x", specializes=["torch-a"])], "cycle"),
    ([_entry("torch-a", "x", specializes=[3])], "list of ids"),
])
def test_bad_specializes_is_a_catalog_error(tmp_path, triage, entries, message):
    _write(tmp_path, "c.yaml", entries)
    with pytest.raises(triage.CatalogError, match=message):
        triage.load_catalog(tmp_path)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--catalog", str(tmp_path), "--list-signatures"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and message.split("'")[0] in proc.stderr and "Traceback" not in proc.stderr


def test_repro_helper_uses_the_scripts_matcher(catalog, triage):
    R = _repro()
    for e in catalog.entries:
        line = R.clean_line(str(e.raw["example"]))
        got = R.first_match(line)
        assert got is not None and got["id"] == catalog.match(line).id == e.id
    # a line two entries match goes to the declared narrower one in both
    line = "RuntimeError: unable to write to file </torch_9_9_0>: No space left on device (28)"
    assert R.first_match(line)["id"] == "torch-shm-write-failed"
    assert "sorted(" not in textwrap.dedent((HERE / "_repro.py").read_text())


_TIMEOUT = ("[rank{r}]:[E626 05:06:30.929096625 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) "
            "ran for 600020 milliseconds before timing out.")


def test_first_watchdog_timeout_is_root_only_without_an_earlier_error(triage, catalog):
    """reading-logs.md, cascade lines: the first NCCL timeout is the root cause only when nothing failed before it."""
    only = triage.triage_text("\n".join(["step 10", _TIMEOUT.format(r=1), _TIMEOUT.format(r=2)]), catalog)
    assert only["root_cause"]["line"] == 2 and only["root_cause"]["signature"] == "nccl-watchdog-timeout"
    assert [(f["line"], f["role"]) for f in only["findings"]] == [(2, "root"), (3, "cascade")]
    oom = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB"
    after = triage.triage_text("\n".join([oom, _TIMEOUT.format(r=1), _TIMEOUT.format(r=2)]), catalog)
    assert after["root_cause"]["line"] == 1 and after["root_cause"]["signature"] == "cuda-out-of-memory"
    assert {(f["line"], f["role"]) for f in after["findings"]} >= {(2, "cascade")}
    # the aborted-communicator line quotes the timeout but is its own cascade entry
    aborted = ("RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: "
               + _TIMEOUT.format(r=3).split("] ", 1)[1])
    assert catalog.match(aborted).id == "nccl-communicator-aborted"
