"""The code-body change files of torch, transformers, deepspeed and accelerate (`lookup.py --changes`): every line is valid, was
checked against its two wheels by tests/audit/verify_body_changes.py (a record per line), states its
release pair, and each `pinned_check` holds in the installed package."""
from __future__ import annotations

import hashlib
import json
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests" / "audit"))
import _changes  # noqa: E402
import verify_body_changes as vb  # noqa: E402

SITE = Path(sysconfig.get_paths()["purelib"])


def lines():
    for path in _changes.BODY:
        for ln in path.read_text(encoding="utf-8").splitlines():
            if ln.strip():
                yield path, ln


def test_every_line_is_valid_verified_and_in_its_file():
    records = json.loads(vb.RECORDS.read_text(encoding="utf-8"))["entries"]
    n = 0
    for path, ln in lines():
        e = json.loads(ln)
        assert _changes.check_entry(e) == "", ln[:80]
        assert path.name.startswith(e["lib"] + "_"), (path.name, e["lib"])
        assert e.get("before") or e.get("after"), ln[:80]
        m = vb.EVIDENCE.match(e["evidence"])
        assert m and m.group(3) == e["version"], ln[:80]
        assert _changes.vkey(m.group(2)) < _changes.vkey(e["version"])
        assert hashlib.sha256(ln.strip().encode()).hexdigest() in records, \
            f"re-run tests/audit/verify_body_changes.py --wheels DIR --write: {ln[:80]}"
        n += 1
    assert n == len(records)


def test_pinned_checks_hold_in_the_installed_packages():
    for _, ln in lines():
        e = json.loads(ln)
        pin = e.get("pinned_check")
        if pin:
            text = vb.squash((SITE / pin["path"]).read_text(encoding="utf-8", errors="replace"))
            assert vb.squash(pin["contains"]) in text, (e["lib"], e["version"], pin["path"])


def test_verify_rejects_what_the_wheels_do_not_show(tmp_path):
    import zipfile
    for v, body in (("4.46.3", "def f():\n    return old_path()\n"), ("4.47.0", "def f():\n    return new_path()\n")):
        with zipfile.ZipFile(tmp_path / f"transformers-{v}-py3-none-any.whl", "w") as z:
            z.writestr("transformers/trainer.py", body)
    w = vb.Wheels(tmp_path)
    good = {"lib": "transformers", "version": "4.47.0", "kind": "fix", "area": "trainer", "names": ["f"],
            "text": "t", "evidence": "transformers 4.46.3 -> 4.47.0 (wheel sources): trainer.py f",
            "before": {"path": "transformers/trainer.py", "contains": "return   old_path()"},
            "after": {"path": "transformers/trainer.py", "contains": "return new_path()"}}
    assert vb.verify(good, w) == ""
    assert "still in" in vb.verify(dict(good, after={"path": "transformers/trainer.py", "contains": "def f():"}), w)
    assert "not in" in vb.verify(dict(good, before={"path": "transformers/trainer.py", "contains": "nowhere"}), w)
    assert "evidence" in vb.verify(dict(good, version="4.48.0"), w)
    assert "no transformers 4.45.0 wheel" in vb.verify(
        dict(good, evidence="transformers 4.45.0 -> 4.47.0 (wheel sources)"), w)
    assert "needs" in vb.verify({k: v for k, v in good.items() if k not in ("before", "after")}, w)


def test_verify_reads_sdists_by_package_relative_path(tmp_path):
    import io
    import tarfile
    for v, body in (("0.19.6", "def step(self):\n    buf = torch.zeros_like(grad)\n"),
                    ("0.19.7", "def step(self):\n    buf = torch.zeros_like(grad, dtype=torch.float32)\n")):
        with tarfile.open(tmp_path / f"deepspeed-{v}.tar.gz", "w:gz") as t:
            data = body.encode()
            info = tarfile.TarInfo(f"deepspeed-{v}/deepspeed/runtime/zero/muon/muon_optimizer.py")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    w = vb.Wheels(tmp_path)
    path = "deepspeed/runtime/zero/muon/muon_optimizer.py"
    good = {"lib": "deepspeed", "version": "0.19.7", "kind": "fix", "area": "muon", "names": ["step"],
            "text": "t", "evidence": "deepspeed 0.19.6 -> 0.19.7 (release sources): muon_optimizer.py: step",
            "after": {"path": path, "contains": "zeros_like(grad, dtype=torch.float32)"}}
    assert _changes.check_entry(good) == ""  # a body entry: evidence, no pr/sha
    assert "sha" in _changes.check_entry(good, git=True) or "pr" in _changes.check_entry(good, git=True)
    assert vb.verify(good, w) == ""
    assert "still in" in vb.verify(dict(good, after={"path": path, "contains": "def step(self):"}), w)
    assert "not in" in vb.verify(dict(good, after={"path": "deepspeed-0.19.7/" + path, "contains": "zeros"}), w)
    assert "no deepspeed 0.19.5" in vb.verify(
        dict(good, evidence="deepspeed 0.19.5 -> 0.19.7 (release sources)"), w)
