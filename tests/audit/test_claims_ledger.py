"""The claims ledger (tests/audit/claims/*.yaml) stays honest.

One YAML file per sub-skill (`references.yaml` for the top-level references/). Each claim names
the reference it lives in, quotes a fragment of it, and carries its evidence:

- `test: tests/<path>.py::test_name` -- a test that runs the code path (the function must exist);
- `source: <package>/<path>.py::<qualname>` plus `contains: <text>` -- a cited line in the
  installed package (.venv site-packages), for claims with no CPU path;
- `upstream: owner/repo@rev:path` (or `wheel:<file>.whl:<member>`) plus `contains: <text>` -- a cited
  line in code that is not installed here (an older or newer release, torchtitan, enroot, pyxis, the
  Kubeflow operator, horovod); tests/audit/verify_upstream.py reads it from git snapshots or wheels and
  records the file's sha256 in tests/audit/upstream_verified.json, which this test checks (CI has
  neither the snapshots nor the wheels). Counted as cited;
- `benchmark: benchmarks/<file>.py` -- for a measured figure (a timing): the script that prints it;
- `none` -- not backed yet; counted per file in the terminal summary, never a failure.

A claim with no CPU path may also carry `device_run: tests/device/records/<file>.json::<probe>` -- the
probe of tests/device/gpu_probes.py that ran its code path on a GPU (a recorded run; CI has no GPU, so
the record is checked, not re-run: tests/device/test_device_record.py). Counted as "GPU-run"; a claim
whose only evidence is such a run is not counted as unbacked.

A test evidence with `inspects_source: true` reads the installed source instead of running the
path (older tests in tests/backends_docs and tests/accel_siblings); it is counted as cited, not run.
A claim found wrong by the audit carries `found_wrong:` (what was wrong) and a test that catches it.

A fragment that is no longer in its reference fails here, so editing a claimed sentence forces
its re-audit. The check is fast: no torch, accelerate or deepspeed import (the cited files are
read as text from the installed site-packages).
"""
from __future__ import annotations

import ast
import re
import sysconfig
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLAIMS = Path(__file__).resolve().parent / "claims"
SITE = Path(sysconfig.get_paths()["purelib"])
KINDS = {"behaviour", "default", "precedence", "ignored", "memory", "raises", "format", "version", "names"}
EVIDENCE = {"test", "source", "upstream", "benchmark", "none"}
UPSTREAM_RECORDS = Path(__file__).resolve().parent / "upstream_verified.json"


def _norm(text: str) -> str:
    return " ".join(text.split())


def load_ledger():
    """[(yaml file name, claim dict)] for every claim of every ledger file."""
    out = []
    for path in sorted(CLAIMS.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(data, dict) and isinstance(data.get("claims"), list), path.name
        for claim in data["claims"]:
            out.append((path.name, claim))
    return out


LEDGER = load_ledger()


def evidence_kind(claim) -> str:
    ev = claim.get("evidence")
    if ev == "none":
        return "none"
    assert isinstance(ev, dict) and len(set(ev) & EVIDENCE) == 1, f"{claim.get('id')}: evidence {ev!r}"
    return next(iter(set(ev) & EVIDENCE))


def counts_per_file():
    table: dict[str, dict[str, int]] = {}
    for name, claim in LEDGER:
        row = table.setdefault(name, {"claims": 0, "test": 0, "source": 0, "upstream": 0, "benchmark": 0,
                                      "none": 0, "found_wrong": 0, "device_run": 0})
        row["claims"] += 1
        kind = evidence_kind(claim)
        if kind == "test" and claim["evidence"].get("inspects_source"):
            kind = "source"
        if kind == "none" and claim.get("device_run"):
            kind = "device_only"             # run on a GPU, recorded; nothing runs or cites it on CPU
        row[kind] = row.get(kind, 0) + 1
        row["found_wrong"] += bool(claim.get("found_wrong"))
        row["device_run"] += bool(claim.get("device_run"))
    return table


_test_names: dict[Path, set] = {}


def _defined_functions(path: Path) -> set:
    if path not in _test_names:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        _test_names[path] = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return _test_names[path]


def test_ledger_files_exist_and_are_well_formed():
    assert {p.name for p in CLAIMS.glob("*.yaml")} >= {
        "distributed-training-backends.yaml", "configuration-and-cli.yaml", "training-loop-integration.yaml",
        "checkpointing-and-tracking.yaml", "references.yaml"}
    ids = [c["id"] for _, c in LEDGER]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for name, c in LEDGER:
        missing = {"id", "file", "claim", "kind", "conditions", "evidence"} - set(c)
        assert not missing, (name, c.get("id"), missing)
        assert c["kind"] in KINDS, (c["id"], c["kind"])
        assert isinstance(c["claim"], str) and len(c["claim"]) >= 12, c["id"]
        evidence_kind(c)


@pytest.mark.parametrize("name,claim", LEDGER, ids=[c["id"] for _, c in LEDGER])
def test_claim_is_still_in_its_reference_and_its_evidence_exists(name, claim):
    doc = REPO / claim["file"]
    assert doc.is_file(), f"{claim['id']}: no file {claim['file']}"
    sub = name[:-len(".yaml")]
    want_dir = "references" if sub == "references" else f"sub-skills/{sub}/references"
    assert claim["file"].startswith(want_dir + "/"), (claim["id"], claim["file"], want_dir)
    assert _norm(claim["claim"]) in _norm(doc.read_text(encoding="utf-8")), (
        f"{claim['id']}: the quoted fragment is no longer in {claim['file']}: re-audit the claim")
    kind = evidence_kind(claim)
    ev = claim["evidence"]
    if kind == "test":
        for node in ([ev["test"]] if isinstance(ev["test"], str) else ev["test"]):
            rel, _, func = node.partition("::")
            path = REPO / rel
            assert rel.startswith("tests/") and path.is_file(), f"{claim['id']}: no test file {rel}"
            func = func.split("[")[0]
            assert func in _defined_functions(path), f"{claim['id']}: no test {func} in {rel}"
    elif kind == "source":
        rel, _, qual = ev["source"].partition("::")
        path = SITE / rel
        assert path.is_file(), f"{claim['id']}: cited {rel} is not in {SITE}"
        text = path.read_text(encoding="utf-8")
        if qual:
            assert re.search(rf"\b(def|class) {re.escape(qual.split('.')[-1])}\b", text), (claim["id"], qual)
        needles = ev.get("contains")
        assert needles, f"{claim['id']}: a source citation needs `contains:`"
        for needle in [needles] if isinstance(needles, str) else needles:
            assert needle in text, f"{claim['id']}: {rel} no longer contains {needle!r}"
    elif kind == "upstream":
        import json
        spec = ev["upstream"]
        ok = re.fullmatch(r"[\w.-]+/[\w.-]+@[\w.^~/-]+:\S+|wheel:[\w.+-]+\.whl:\S+", spec)
        assert ok, f"{claim['id']}: upstream {spec!r} is not owner/repo@rev:path or wheel:FILE.whl:member"
        needles = ev.get("contains")
        assert needles, f"{claim['id']}: an upstream citation needs `contains:`"
        needles = [needles] if isinstance(needles, str) else list(needles)
        rec = json.loads(UPSTREAM_RECORDS.read_text(encoding="utf-8")).get(claim["id"])
        assert rec and rec["upstream"] == spec and rec["contains"] == needles and \
            rec.get("absent_at") == ev.get("absent_at"), (
            f"{claim['id']}: no matching record in {UPSTREAM_RECORDS.name}: run tests/audit/verify_upstream.py --write")
        assert re.fullmatch(r"[0-9a-f]{64}", rec["sha256"]), claim["id"]
    elif kind == "benchmark":
        rel = ev["benchmark"]
        assert rel.startswith("benchmarks/") and (REPO / rel).is_file(), f"{claim['id']}: no benchmark {rel}"


def test_found_wrong_claims_say_what_was_wrong():
    for _, c in LEDGER:
        if c.get("found_wrong"):
            assert isinstance(c["found_wrong"], str) and len(c["found_wrong"]) > 20, c["id"]
            assert evidence_kind(c) == "test" and not c["evidence"].get("inspects_source"), (
                f"{c['id']}: a corrected claim needs a test that runs the path and catches it")


def test_device_runs_name_a_recorded_probe():
    import json
    seen = 0
    for _, c in LEDGER:
        ref = c.get("device_run")
        if not ref:
            continue
        seen += 1
        for one in [ref] if isinstance(ref, str) else ref:
            rel, _, probe = one.partition("::")
            path = REPO / rel
            assert rel.startswith("tests/device/records/") and path.is_file(), f"{c['id']}: no record {rel}"
            names = {p["probe"] for p in json.loads(path.read_text(encoding="utf-8"))["probes"]}
            assert probe in names, f"{c['id']}: {rel} has no probe {probe!r}"
    assert seen >= 10, "the GPU-run claims lost their device_run links"
