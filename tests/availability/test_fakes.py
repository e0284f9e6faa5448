"""Broken installs on a temporary path, with site-packages switched off (-S), so
torch is not installed at all.  Each fake is reported correctly, within the
timeouts, with the documented exit codes."""
from __future__ import annotations

import os
import time
from pathlib import Path


def test_static_states(fake_static):
    r = fake_static
    assert r.rc == 0, r.stderr
    p = r.json["packages"]
    assert p["torch"]["state"] == "not_installed"
    assert p["torch-xla"]["state"] == "installed" and p["torch-xla"]["version"] == "2.9.0"
    # metadata without module
    assert p["ms-amp"]["state"] == "metadata_only"
    assert p["ms-amp"]["dist"] == "ms-amp" and p["ms-amp"]["module_path"] is None
    # module without metadata, recognised as NVIDIA apex by its layout
    assert p["apex"]["state"] == "module_only" and p["apex"]["version"] is None
    assert p["apex"]["facts"]["flavour"] == "nvidia"
    assert "apex/amp/" in p["apex"]["facts"]["evidence"]
    assert p["horovod"]["facts"]["torch_extension"]  # the fake mpi_lib_v2 extension file
    assert p["transformer-engine"]["dists_found"] == ["transformer-engine"]


def test_static_conflicts_nccl_plugins(fake_static):
    j = fake_static.json
    conflicts = {c["module"]: c for c in j["conflicts"]}
    assert set(conflicts) == {"triton"}
    assert sorted(d.split()[0] for d in conflicts["triton"]["dists"]) == ["pytorch-triton-rocm", "triton"]
    assert any("several triton flavours" in n for n in j["packages"]["triton"]["notes"])
    wheels = sorted((w["dist"], w["version"]) for w in j["nccl_wheels"]["wheels"])
    assert wheels == [("nvidia-nccl-cu12", "2.21.5"), ("nvidia-nccl-cu13", "2.27.3")]
    assert any("2 NCCL wheels installed" in f for f in j["nccl_wheels"]["findings"])
    assert j["torch_backend_plugins"] == [{"dist": "torch-fakedev", "name": "fakedev",
                                           "target": "torch_fakedev:autoload"}]


def test_static_verdicts_without_torch(fake_static):
    v = fake_static.json["verdicts"]
    assert not [k for k, x in v.items() if x["verdict"] == "yes"]
    for k in ("accelerate-fsdp2", "dalle-dummy", "accelerate-deepspeed"):
        assert v[k]["verdict"] == "no"
    assert "torch is not installed" in v["apex-amp"]["reason"]
    assert "ms-amp 0.4.0 has metadata but no importable 'msamp' module" in v["accelerate-fp8-msamp"]["reason"]
    assert "2 distributions provide the module 'triton'" in v["deepspeed-sparse-attention"]["reason"] or \
        "deepspeed is not installed" in v["deepspeed-sparse-attention"]["reason"]


def test_probe_classification(fake_probe):
    r = fake_probe
    assert r.rc == 3, (r.stdout[-2000:], r.stderr)  # a probe crashed / timed out
    pr = r.json["probes"]
    assert pr["torch"] == {"status": "not_installed", "module": "torch",
                           "message": "no distribution and no module found (static scan; no child started)"}
    x = pr["torch-xla"]
    assert (x["status"], x["exception"], x["message"]) == ("error", "RuntimeError", "fake torch_xla: PJRT client failed")
    b = pr["bitsandbytes"]
    assert (b["status"], b["exception"]) == ("error", "OSError")
    assert b["message"] == "libbitsandbytes_cuda128.so: cannot open shared object file"
    assert any("BUG REPORT banner" in ln for ln in b["stderr_tail"])  # its stdout went to stderr
    te = pr["transformer-engine"]
    assert te["status"] == "timed_out" and te["timeout"] == 3
    assert 3 <= te["wall_seconds"] < 8
    h = pr["horovod"]
    assert (h["status"], h["signal"], h["returncode"]) == ("killed", "SIGSEGV", -11)
    assert h["module"] == "horovod.torch"
    m = pr["ms-amp"]  # metadata without module: the child confirms it cannot be imported
    assert (m["status"], m["exception"], m["missing_module"]) == ("not_installed", "ModuleNotFoundError", "msamp")
    assert pr["apex"]["status"] == "ok"  # module without metadata still imports
    assert pr["triton"]["status"] == "ok" and pr["triton"]["version"] == "3.1.0"
    assert sorted(r.json["crashed"]) == ["horovod: killed by SIGSEGV",
                                         "transformer-engine: timed out after 3.0 s (process group killed)"]
    # probe failures feed the verdicts
    assert "--probe: import torch_xla -> error: RuntimeError" in r.json["verdicts"]["accelerate-tpu"]["reason"]
    assert "killed by SIGSEGV" in r.json["verdicts"]["dalle-horovod"]["reason"]
    # children run in parallel: one timeout bounds the whole run
    assert r.seconds < 3 + 10


def test_probe_kills_the_whole_process_group(fake_probe, fakes):
    assert fake_probe.json["probes"]["transformer-engine"]["status"] == "timed_out"
    pid = int((fakes["marks"] / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        raise AssertionError("grandchild %d survived the timeout" % pid)


def test_require_beats_crash_exit_code(checker, fakes):
    env = {"PYTHONPATH": str(fakes["site"])}
    r = checker("--probe", "--only", "torch-xla", "--json", python_flags=("-S",), env=env)
    assert r.rc == 0  # an exception during import is reported, not a crash
    assert r.json["probes"]["torch-xla"]["status"] == "error"
    r = checker("--probe", "--only", "horovod,torch-xla", "--json", python_flags=("-S",), env=env)
    assert r.rc == 3
    # statically torch-xla looks installed; only its probe shows the RuntimeError
    r = checker("--require", "torch-xla", "--json", python_flags=("-S",), env=env)
    assert r.rc == 0
    r = checker("--probe", "--only", "horovod,torch-xla", "--require", "torch-xla", "--json",
                python_flags=("-S",), env=env)
    assert r.rc == 1  # a required item unmet wins over a crashed probe (3)
    assert r.json["requirements"][0]["detail"].startswith("--probe: import torch_xla -> error: RuntimeError")
    assert r.json["crashed"] == ["horovod: killed by SIGSEGV"]
    r = checker("--require", "ms-amp", "--json", python_flags=("-S",), env=env)
    assert r.rc == 1 and "metadata but no importable" in r.json["requirements"][0]["detail"]
    r = checker("--require", "triton", "--json", python_flags=("-S",), env=env)
    assert r.rc == 1 and "distributions provide the module 'triton'" in r.json["requirements"][0]["detail"]
    r = checker("--require", "apex", "--json", python_flags=("-S",), env=env)
    assert r.rc == 0, r.json["requirements"]


def test_no_torch_isolated_mode(checker):
    """python -I -S: nothing but the standard library on sys.path."""
    r = checker("--json", python_flags=("-I", "-S"))
    assert r.rc == 0, r.stderr
    p = r.json["packages"]
    assert all(rec["state"] == "not_installed" for rec in p.values())
    assert r.json["verdicts"]["accelerate-fsdp2"]["verdict"] == "no"
    r = checker("--include-cuda", "--json", python_flags=("-I", "-S"))
    assert r.rc == 0
    cu = r.json["cuda"]
    assert (cu["status"], cu["exception"], cu["stage"]) == ("not_installed", "ModuleNotFoundError", "import torch")
    r = checker("--require", "gpu", python_flags=("-I", "-S"))
    assert r.rc == 1


def test_pypi_apex_namesake(checker, tmp_path):
    site = tmp_path / "site"
    d = site / "apex-0.9.10.dev0.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: apex\nVersion: 0.9.10dev\n"
                                "Summary: Pyramid toolkit for authentication and authorization\n\n")
    (d / "top_level.txt").write_text("apex\n")
    (site / "apex").mkdir()
    (site / "apex" / "__init__.py").write_text("")
    (site / "apex" / "views.py").write_text("")
    r = checker("--require", "apex", "--json", python_flags=("-S",), env={"PYTHONPATH": str(site)})
    assert r.rc == 1
    apex = r.json["packages"]["apex"]
    assert apex["facts"]["flavour"] == "pypi-namesake"
    assert "not NVIDIA apex" in r.json["requirements"][0]["detail"]
    assert "Pyramid" in apex["facts"]["evidence"][0]


def test_checker_writes_nothing(checker, tmp_path):
    """Run a copy of the scripts folder: no __pycache__ or any other file appears."""
    import shutil

    src = Path(__file__).resolve().parents[2] / "sub-skills" / "distributed-and-backends" / "scripts"
    dst = tmp_path / "scripts"
    shutil.copytree(src / "availability", dst / "availability",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(src / "check_backend_availability.py", dst)
    before = sorted(p.relative_to(dst) for p in dst.rglob("*"))
    r = checker("--probe", "--only", "setuptools", "--json", script=dst / "check_backend_availability.py")
    assert r.rc == 0
    assert sorted(p.relative_to(dst) for p in dst.rglob("*")) == before


def test_broken_torch_plugin_is_named(checker, tmp_path):
    """A CUDA build of torch whose import dies in a torch.backends plugin's autoload."""
    site = tmp_path / "site"
    d = site / "torch-2.13.0+cu128.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cu128\n"
                                "Requires-Dist: nvidia-nccl-cu12==2.27.3; platform_system == \"Linux\"\n\n")
    (d / "top_level.txt").write_text("torch\n")
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.13.0+cu128'\ndebug = False\n"
        "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n")
    (site / "torch" / "__init__.py").write_text(
        "raise RuntimeError('Failed to load the backend extension: fakedev. You can disable extension "
        "auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.')\n")
    p = site / "torch_fakedev-0.1.dist-info"
    p.mkdir()
    (p / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-fakedev\nVersion: 0.1\n\n")
    (p / "entry_points.txt").write_text("[torch.backends]\nfakedev = torch_fakedev:autoload\n")
    env = {"PYTHONPATH": str(site)}
    r = checker("--json", python_flags=("-S",), env=env)
    assert r.json["packages"]["torch"]["facts"]["flavour"] == "cuda"
    assert r.json["packages"]["torch"]["facts"]["cuda"] == "12.8"
    # torch pins nvidia-nccl-cu12 but no NCCL wheel is installed
    assert r.json["nccl_wheels"]["findings"] == ["torch requires nvidia-nccl-cu12==2.27.3 but it is not installed"]
    assert r.json["verdicts"]["accelerate-fsdp2"]["reason"].startswith("accelerate is not installed")
    r = checker("--probe", "--only", "torch", "--json", python_flags=("-S",), env=env)
    assert r.rc == 0
    t = r.json["probes"]["torch"]
    assert (t["status"], t["exception"]) == ("error", "RuntimeError")
    assert t["message"].startswith("Failed to load the backend extension: fakedev")
    assert "fakedev (torch-fakedev)" in t["hint"] and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in t["hint"]
    assert "--probe: import torch -> error: RuntimeError" in r.json["verdicts"]["dalle-dummy"]["reason"]
