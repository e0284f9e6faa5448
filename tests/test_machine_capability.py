"""What DeepSpeed's CPU accelerator accepts on this CPU, and the switch that forces it.

fp16: CPU_Accelerator.is_fp16_supported (deepspeed/accelerator/cpu_accelerator.py) returns the oneDNN
probe torch.ops.mkldnn._is_mkldnn_fp16_supported() (true on AVX512-FP16 / AMX-FP16 CPUs), and
DeepSpeedEngine._do_sanity_check raises "Type fp16 is not supported on your device." when it is false.
bf16: CPU_Accelerator.is_bf16_supported is unconditionally true, so bf16 holds on every x86 CPU.
PDT_FORCE_CPU_FP16=0|1 (tests/conftest.py, tests/_capability/sitecustomize.py) forces the fp16 probe
in the pytest process and in every Python child; `make test-no-fp16` / `make test-fp16` use it.
One child interpreter answers everything below (both branches forced in-process).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parent / "_capability" / "sitecustomize.py"
REFUSED = "Type fp16 is not supported on your device."

_CHILD = r'''
import importlib.util, json, os, sys, types
os.environ["DS_ACCELERATOR"] = "cpu"
import torch
spec = importlib.util.spec_from_file_location("shim", sys.argv[1])
shim = importlib.util.module_from_spec(spec); spec.loader.exec_module(shim)
from deepspeed.accelerator import get_accelerator
from deepspeed.runtime.engine import DeepSpeedEngine
acc = get_accelerator()

def sanity(fp16, bf16):
    fake = types.SimpleNamespace(fp16_enabled=lambda: fp16, bfloat16_enabled=lambda: bf16,
                                 _assert_valid_mixed_precision_config=lambda: None)
    try:
        DeepSpeedEngine._do_sanity_check(fake)
    except ValueError as e:
        return str(e)
    except Exception:  # a later check of the real method, past the precision checks
        return "passed"
    return "passed"

def state():
    return {"probe": bool(torch.ops.mkldnn._is_mkldnn_fp16_supported()),
            "fp16": bool(acc.is_fp16_supported()), "bf16": bool(acc.is_bf16_supported()),
            "float16_listed": torch.float16 in acc.supported_dtypes(),
            "fp16_check": sanity(True, False), "bf16_check": sanity(False, True)}

out = {"accelerator": acc._name, "as_started": state()}
for value in (False, True):
    shim.patch_torch(torch, value)
    out[f"forced_{int(value)}"] = state()
# bf16 does not ask oneDNN: the bf16 probe answering False changes nothing
real = torch.ops.mkldnn._is_mkldnn_bf16_supported
torch.ops.mkldnn._is_mkldnn_bf16_supported = shim._ForcedProbe(real, False)
out["bf16_probe_off"] = state()
print("JSON" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def child() -> dict:
    env = dict(os.environ, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1",
               PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, "-c", _CHILD, str(SHIM)], capture_output=True, text=True, timeout=300,
                       env=env)
    lines = [line for line in p.stdout.splitlines() if line.startswith("JSON")]
    assert p.returncode == 0 and lines, p.stdout[-2000:] + p.stderr[-3000:]
    return json.loads(lines[-1][4:])


def test_child_answers_as_this_process(child, cpu_fp16_supported):
    """A child interpreter sees the same fp16 answer (the switch reaches it when set)."""
    assert child["accelerator"] == "cpu"
    assert child["as_started"]["probe"] is cpu_fp16_supported
    assert child["as_started"]["fp16"] is cpu_fp16_supported


def test_fp16_as_this_cpu_answers(child, cpu_fp16_supported):
    here = child["as_started"]
    assert here["float16_listed"] is cpu_fp16_supported
    assert here["fp16_check"] == ("passed" if cpu_fp16_supported else REFUSED)


@pytest.mark.parametrize("value", [0, 1])
def test_fp16_both_branches_forced(child, value):
    got = child[f"forced_{value}"]
    assert got["probe"] is bool(value) and got["fp16"] is bool(value) and got["float16_listed"] is bool(value)
    assert got["fp16_check"] == ("passed" if value else REFUSED)


def test_bf16_holds_on_every_cpu(child):
    """bf16 is accepted whatever the fp16 answer and whatever oneDNN says about bf16."""
    for key in ("as_started", "forced_0", "forced_1", "bf16_probe_off"):
        assert child[key]["bf16"] is True and child[key]["bf16_check"] == "passed", key


def test_switch_value_is_checked(repo_root):
    """A mistyped PDT_FORCE_CPU_FP16 stops pytest with a usage error instead of silently testing nothing."""
    env = dict(os.environ, PDT_FORCE_CPU_FP16="yes")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(repo_root), "-c", str(repo_root / "pytest.ini"),
                        "--confcutdir", str(repo_root / "tests"), str(repo_root / "tests" / "test_ci_guard.py"),
                        "--collect-only"], capture_output=True, text=True, timeout=120, env=env, cwd=repo_root)
    assert p.returncode == 4, p.stdout[-1000:] + p.stderr[-1000:]
    assert "PDT_FORCE_CPU_FP16 must be 0 (fp16 absent), 1 (fp16 present) or unset, not 'yes'" in p.stdout + p.stderr


ORACLE = Path(__file__).resolve().parent / "oracle" / "deepspeed_oracle.py"


@pytest.fixture(scope="module")
def oracle_fp16_both_ways(tmp_path_factory) -> dict:
    """The DeepSpeed oracle (tests/oracle/deepspeed_oracle.py) on one fp16 config, started once as each
    kind of CPU through the switch; it runs the engine and, where fp16 is refused, re-runs it without."""
    jobs = tmp_path_factory.mktemp("fp16_oracle") / "jobs.json"
    jobs.write_text(json.dumps([{"id": "fp16", "text": json.dumps({"train_batch_size": 1, "fp16": {"enabled": True}}),
                                 "consumer": "deepspeed", "world_size": None, "effect": None}]))
    procs = {}
    for value in (0, 1):  # both at once: each is mostly one interpreter importing deepspeed
        paths = [str(SHIM.parent), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
        env = dict(os.environ, PDT_FORCE_CPU_FP16=str(value), PYTHONPATH=os.pathsep.join(paths),
                   DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        with open(jobs, "rb") as stdin:
            procs[value] = subprocess.Popen([sys.executable, str(ORACLE)], stdin=stdin, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True, env=env)
    out = {}
    for value, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0 and stdout.strip(), stderr[-3000:]
        out[value] = json.loads(stdout)[0]
    return out


@pytest.mark.parametrize("value", [0, 1])
def test_oracle_accepts_fp16_configs_on_either_cpu(oracle_fp16_both_ways, value):
    """An fp16 config is a valid config on both kinds of CPU: the refusal is the machine's, not the
    config's, so the validator agreement tests mean the same on every CPU."""
    r = oracle_fp16_both_ways[value]
    assert r["verdict"] == "accept", r
    assert r["engine"] == ("ran" if value else "ran (fp16 switched off: unsupported on CPU)"), r


@pytest.mark.parametrize("value", [0, 1])
def test_switch_survives_a_look_before_the_import(value):
    """The import hook still patches torch when something looks torch up first without importing it
    (tests/conftest.py finds torch's folder with importlib.util.find_spec before any test imports torch):
    a lookup that consumed the hook left `make test-no-fp16` testing the real CPU answer."""
    code = ("import importlib.util, sys; importlib.util.find_spec('torch'); importlib.util.find_spec('torch');"
            "import torch; print('PROBE', bool(torch.ops.mkldnn._is_mkldnn_fp16_supported()))")
    env = dict(os.environ, PDT_FORCE_CPU_FP16=str(value),
               PYTHONPATH=os.pathsep.join([str(SHIM.parent), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"PROBE {bool(value)}" in p.stdout, p.stdout + p.stderr[-2000:]
