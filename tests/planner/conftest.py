"""Fixtures for the plan_backend.py tests: run the planner as a subprocess (as agents do) or
import it in-process for the pure arithmetic."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
PLANNER = SCRIPTS / "plan_backend.py"
VALIDATOR = SCRIPTS / "validate_backend_config.py"


def run_planner(*args, cwd=None):
    return subprocess.run([sys.executable, str(PLANNER), *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd or REPO, stdin=subprocess.DEVNULL)


def plan_json(*args):
    r = run_planner(*args, "--output", "json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def candidate(result, strategy, offload="none", device=None):
    found = [c for c in result["candidates"] if c["strategy"] == strategy and c["offload"] == offload
             and (device is None or c["offload_device"] == device)]
    assert found, (strategy, offload)
    return found[0]


@pytest.fixture(scope="session")
def planner_module():
    spec = importlib.util.spec_from_file_location("plan_backend", PLANNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_config(tmp_path: Path, cfg: dict, name="config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return p
