"""Fixtures for check_backend_availability.py tests.

The checker always runs as a subprocess of ``sys.executable`` (the test
environment's interpreter, which holds the pinned torch CPU build, accelerate,
deepspeed and dalle-pytorch --no-deps).  Expensive runs are session-scoped.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-and-backends" / "scripts"
SCRIPT = SCRIPTS / "check_backend_availability.py"


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, seconds: float):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.seconds = seconds
        self._json = None

    @property
    def json(self) -> dict:
        if self._json is None:
            self._json = json.loads(self.stdout)
        return self._json


def run_checker(*args, python_flags=(), env=None, timeout=120, script=SCRIPT) -> Run:
    import time

    full_env = dict(os.environ)
    full_env.pop("PYTHONPATH", None)
    # Block-buffered stdout in the children, as in most users' shells: a package's banner must
    # still reach the probe's stderr_tail (os._exit in the child once skipped that flush).
    full_env.pop("PYTHONUNBUFFERED", None)
    full_env.update(env or {})
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, *python_flags, str(script), *args], capture_output=True,
                          text=True, env=full_env, timeout=timeout)
    return Run(proc, time.monotonic() - t0)


@pytest.fixture(scope="session")
def checker():
    return run_checker


@pytest.fixture(scope="session")
def real_static() -> Run:
    r = run_checker("--json")
    assert r.rc == 0, r.stderr
    return r


@pytest.fixture(scope="session")
def real_probe() -> Run:
    """One --probe --include-cuda run on the real environment (imports torch & co in children)."""
    r = run_checker("--probe", "--include-cuda", "--timeout", "90", "--json", timeout=300)
    assert r.rc == 0, r.stderr
    return r


def _write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _dist(site: Path, name: str, version: str, top_level=None, record=None, summary=None, entry_points=None):
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if summary:
        meta += f"Summary: {summary}\n"
    _write(d / "METADATA", meta + "\n")
    if top_level is not None:
        _write(d / "top_level.txt", "".join(t + "\n" for t in top_level))
    if record is not None:
        _write(d / "RECORD", "".join(f"{r},,\n" for r in record))
    if entry_points:
        _write(d / "entry_points.txt", entry_points)
    return d


@pytest.fixture(scope="session")
def fakes(tmp_path_factory) -> dict:
    """Fake packages named like real targets, each broken in one way."""
    site = tmp_path_factory.mktemp("fakesite")
    marks = tmp_path_factory.mktemp("marks")
    # 1. import raises RuntimeError (like torch_xla with a broken PJRT runtime)
    _dist(site, "torch-xla", "2.9.0", top_level=["torch_xla"])
    _write(site / "torch_xla" / "__init__.py", """\
        raise RuntimeError("fake torch_xla: PJRT client failed\\nsecond line must not appear")
        """)
    # 2. import raises OSError after printing a banner on stdout (like bitsandbytes' loader)
    _dist(site, "bitsandbytes", "0.45.0", top_level=["bitsandbytes"])
    _write(site / "bitsandbytes" / "__init__.py", """\
        print("===== BUG REPORT banner on stdout =====")
        raise OSError("libbitsandbytes_cuda128.so: cannot open shared object file")
        """)
    # 3. import hangs, after starting a grandchild that would outlive a plain kill
    _dist(site, "transformer-engine", "2.5.0", top_level=["transformer_engine"])
    _write(site / "transformer_engine" / "__init__.py", f"""\
        import subprocess, sys, time
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open({str(marks / 'grandchild.pid')!r}, "w").write(str(p.pid))
        time.sleep(300)
        """)
    _write(site / "transformer_engine" / "pytorch" / "__init__.py", "")
    # 4. import kills itself with SIGSEGV (like a horovod torch extension built for another torch)
    _dist(site, "horovod", "0.28.1", top_level=["horovod"])
    _write(site / "horovod" / "__init__.py", "")
    _write(site / "horovod" / "torch" / "__init__.py", """\
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
        """)
    _write(site / "horovod" / "torch" / ("mpi_lib_v2" + EXTENSION_SUFFIXES[0]), "")
    # 5. metadata without module
    _dist(site, "ms-amp", "0.4.0", top_level=["msamp"])
    # 6. module without metadata: NVIDIA apex layout copied in by hand
    _write(site / "apex" / "__init__.py", "")
    _write(site / "apex" / "amp" / "__init__.py", "")
    _write(site / "apex" / "normalization" / "__init__.py", "")
    # 7. two distributions providing one module (one via top_level.txt, one via RECORD only)
    _dist(site, "triton", "3.1.0", top_level=["triton"])
    _dist(site, "pytorch-triton-rocm", "3.1.0", record=["triton/__init__.py", "triton/language/core.py"])
    _write(site / "triton" / "__init__.py", "__version__ = '3.1.0'\n")
    # NCCL wheels for two CUDA majors side by side
    _dist(site, "nvidia-nccl-cu12", "2.21.5", top_level=["nvidia"])
    _dist(site, "nvidia-nccl-cu13", "2.27.3", top_level=["nvidia"])
    _write(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", "")
    # a torch device plugin that `import torch` would autoload
    _dist(site, "torch-fakedev", "0.1", top_level=["torch_fakedev"],
          entry_points="[torch.backends]\nfakedev = torch_fakedev:autoload\n")
    _write(site / "torch_fakedev" / "__init__.py", "def autoload():\n    pass\n")
    return {"site": site, "marks": marks}


@pytest.fixture(scope="session")
def fake_probe(fakes) -> Run:
    """--probe over the fakes, with site-packages switched off (-S): no torch at all."""
    return run_checker("--probe", "--timeout", "3", "--json", python_flags=("-S",),
                       env={"PYTHONPATH": str(fakes["site"])}, timeout=60)


@pytest.fixture(scope="session")
def fake_static(fakes) -> Run:
    return run_checker("--json", python_flags=("-S",), env={"PYTHONPATH": str(fakes["site"])})
