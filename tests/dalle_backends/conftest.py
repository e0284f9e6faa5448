"""Fixtures for the distributed-and-backends sub-skill tests.

Expensive oracles run once per session, in subprocesses started together: the backend oracle with
deepspeed importable, the same oracle with deepspeed blocked, and the availability checker's --help.
The pytest process itself never imports torch, deepspeed or dalle_pytorch.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SKILL = REPO / "sub-skills" / "distributed-and-backends"
CHECKER = SKILL / "scripts" / "check_backend_availability.py"
DOC_NAMES = ("SKILL.md", "references/distributed-backends.md", "references/docker-and-system-setup.md",
             "references/launching.md", "references/troubleshooting.md")


def _env():
    env = dict(os.environ)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    env["PYTHONWARNINGS"] = "ignore"
    return env


@pytest.fixture(scope="session")
def skill_dir() -> Path:
    return SKILL


@pytest.fixture(scope="session")
def docs() -> dict[str, str]:
    return {name: (SKILL / name).read_text(encoding="utf-8") for name in DOC_NAMES}


@pytest.fixture(scope="session")
def all_docs_text(docs) -> str:
    return "\n".join(docs.values())


@pytest.fixture(scope="session")
def front_matter(docs) -> dict:
    text = docs["SKILL.md"]
    m = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert m, "SKILL.md has no front matter block"
    return yaml.safe_load(m.group(1))


@pytest.fixture(scope="session")
def repo_facts() -> dict:
    return json.loads((HERE / "repo_facts_58c1e1a.json").read_text())


@pytest.fixture(scope="session")
def upstream_facts() -> dict:
    return json.loads((HERE / "upstream_facts.json").read_text())


@pytest.fixture(scope="session")
def gpu_run() -> dict:
    return json.loads((HERE / "gpu_run_h200.json").read_text())


@pytest.fixture(scope="session")
def _oracle_runs():
    """Start every subprocess oracle at once; each fixture below waits for its own."""
    oracle = str(HERE / "oracle_backends.py")
    procs = {
        "ds": subprocess.Popen([sys.executable, oracle], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=_env(), cwd=str(HERE)),
        "nods": subprocess.Popen([sys.executable, oracle, "--hide-deepspeed"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=_env(), cwd=str(HERE)),
    }
    yield procs
    for p in procs.values():
        if p.poll() is None:
            p.kill()


def _collect(proc) -> dict:
    out, err = proc.communicate(timeout=240)
    for line in out.splitlines():
        if line.startswith("ORACLE_JSON "):
            return json.loads(line[len("ORACLE_JSON "):])
    pytest.fail(f"oracle printed no result (rc={proc.returncode}); stderr tail:\n{err[-3000:]}")


@pytest.fixture(scope="session")
def oracle_ds(_oracle_runs) -> dict:
    return _collect(_oracle_runs["ds"])


@pytest.fixture(scope="session")
def oracle_nods(_oracle_runs) -> dict:
    return _collect(_oracle_runs["nods"])


@pytest.fixture(scope="session")
def checker_help() -> str:
    if not CHECKER.is_file():
        pytest.fail(f"{CHECKER} is missing; SKILL.md documents it")
    p = subprocess.run([sys.executable, str(CHECKER), "--help"], capture_output=True, text=True, timeout=60,
                       env=_env())
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture(scope="session")
def fake_site(tmp_path_factory) -> Path:
    """A folder with the PyPI namesake `apex` and a Horovod whose torch extension fails to import."""
    root = tmp_path_factory.mktemp("fake_site")
    (root / "apex").mkdir()
    (root / "apex" / "__init__.py").write_text("")
    di = root / "apex-0.9.10dev.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 1.1\nName: apex\nVersion: 0.9.10dev\nSummary: Pyramid toolkit "
                                 "to add Velruse, Flash Messages,CSRF, ReCaptcha and Sessions\n")
    (di / "top_level.txt").write_text("apex\n")
    (di / "RECORD").write_text("apex/__init__.py,,\n")
    (root / "horovod" / "torch").mkdir(parents=True)
    (root / "horovod" / "__init__.py").write_text("")
    (root / "horovod" / "torch" / "__init__.py").write_text(
        "raise ImportError('/x/horovod/torch/mpi_lib_v2.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')\n")
    dh = root / "horovod-0.28.1.dist-info"
    dh.mkdir()
    (dh / "METADATA").write_text("Metadata-Version: 2.1\nName: horovod\nVersion: 0.28.1\n")
    (dh / "top_level.txt").write_text("horovod\n")
    (dh / "RECORD").write_text("horovod/__init__.py,,\nhorovod/torch/__init__.py,,\n")
    return root


@pytest.fixture(scope="session")
def checker_outputs(fake_site) -> dict:
    """Checker text output on the real environment and with the fake apex/horovod in front of it."""
    env = _env()
    real = subprocess.run([sys.executable, str(CHECKER)], capture_output=True, text=True, timeout=120, env=env)
    env2 = dict(env)
    env2["PYTHONPATH"] = str(fake_site) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    fake = subprocess.run([sys.executable, str(CHECKER), "--probe", "--only", "horovod,apex"], capture_output=True,
                          text=True, timeout=120, env=env2)
    return {"real": real.stdout, "real_rc": real.returncode, "fake": fake.stdout, "fake_rc": fake.returncode,
            "stderr": real.stderr + fake.stderr}
