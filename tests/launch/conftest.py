"""Fixtures for the launch-command tests: a generated grid of command lines x configs, run through
the validator in-process and through the real launchers' code in ONE oracle process per launcher
family (tests/oracle/accelerate_oracle.py with "argv"; tests/launch/runner_oracle.py)."""
from __future__ import annotations

import itertools
import json
import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launch_grid import ACC_ORACLE, CONFIGS, RUN_ORACLE, accelerate_grid, runner_grid  # noqa: E402


@pytest.fixture(scope="session")
def launch_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("launch")
    (d / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}))
    (d / "hostfile").write_text("worker-1 slots=8\nworker-2 slots=8\n")
    (d / "bad_hostfile").write_text("worker-1 slots=8\nworker-2 gpus=8\n")
    (d / "dup_hostfile").write_text("worker-1 slots=8\nworker-1 slots=8\n")
    (d / "hf_home").mkdir()
    return d


def _words_after(command, launcher):
    w = shlex.split(command)
    if w[0] == "accelerate":
        return w[2:]
    if w[0] == "python":
        return w[3:]
    return w[1:]


@pytest.fixture(scope="session")
def acc_oracle(launch_dir, python_exe):
    items = []
    for case in accelerate_grid():
        argv = [a if a != "config.yaml" else "{config}" for a in _words_after(case["command"], "accelerate")]
        it = {"id": case["id"], "argv": argv, "cwd": str(launch_dir), "name": "config.yaml"}
        if CONFIGS[case["config"]] is not None:
            it["text"] = CONFIGS[case["config"]]
        items.append(it)
    env = dict(os.environ, HF_HOME=str(launch_dir / "hf_home"))
    proc = subprocess.run([python_exe, str(ACC_ORACLE)], input=json.dumps({"configs": items}), capture_output=True,
                          text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ans = json.loads(proc.stdout)
    assert ans["versions"]["accelerate"] == "1.15.0"
    return {r["id"]: r for r in ans["results"]}


@pytest.fixture(scope="session")
def run_oracle(launch_dir, python_exe):
    items = [{"id": c["id"], "launcher": c["launcher"], "argv": _words_after(c["command"], c["launcher"]),
              "cwd": str(launch_dir)} for c in runner_grid()]
    proc = subprocess.run([python_exe, str(RUN_ORACLE)], input=json.dumps({"commands": items}), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ans = json.loads(proc.stdout)
    assert ans["versions"]["torch"].startswith("2.13.0") and ans["versions"]["deepspeed"] == "0.19.8"
    return {r["id"]: r for r in ans["results"]}
