"""Every launch rule's failing example fires that rule and its passing example does not; the
accelerate examples of error rules are also run through accelerate's own code (one oracle process)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest
from pathlib import Path

from backend_validator import core, docs
from backend_validator.cli import _rules_loaded
from backend_validator.launch.check import check_command, check_node_set

_rules_loaded()
LAUNCH_RULES = sorted((r for r in core.REGISTRY.values() if r.family == "launch"), key=lambda r: r.id)


def _example(text):
    """('$ command', {file name: text})"""
    lines = text.splitlines()
    cmd = lines[0][2:]
    files, cur = {}, None
    for ln in lines[1:]:
        if ln.startswith("# "):
            cur = ln[2:].strip()
            files[cur] = ""
        elif cur:
            files[cur] += ln + "\n"
    return cmd, files


def _run(text, d):
    cmd, files = _example(text)
    for n, t in files.items():
        (d / n).write_text(t)
    if cmd.startswith("--node-set"):
        return check_node_set(shlex.split(cmd)[1:], [], {"HF_HOME": str(d / "hf")}, str(d)), cmd, files
    return check_command(cmd, env={"HF_HOME": str(d / "hf")}, cwd=str(d)), cmd, files


def _examples():
    out = []
    for r in LAUNCH_RULES:
        _, ex = docs.parse_doc(r.doc)
        assert "Fails" in ex and "Passes" in ex, r.id
        for label in ("Fails", "Passes"):
            out.append((r.id, label, ex[label][1]))
    return out


@pytest.mark.parametrize("rid,label,text", _examples(), ids=lambda x: x if isinstance(x, str) and len(x) < 60 else "")
def test_example(rid, label, text, tmp_path):
    res, _, _ = _run(text, tmp_path)
    fired = {f.rule for f in res.findings}
    if label == "Fails":
        assert rid in fired, (rid, [(f.rule, f.message) for f in res.findings])
        f = next(f for f in res.findings if f.rule == rid)
        assert f.file and (f.line is not None or f.file.startswith("<launch-command>")), f
    else:
        assert rid not in fired, (rid, [(f.rule, f.message) for f in res.findings])
        if core.REGISTRY[rid].severity == "error":
            assert not [f for f in res.findings if f.severity == "error"], res.findings


def test_accelerate_error_examples_match_accelerate(python_exe, tmp_path, repo_root):
    items = []
    for rid, label, text in _examples():
        cmd, files = _example(text)
        if not cmd.startswith("accelerate launch") or core.REGISTRY[rid].severity != "error":
            continue
        argv = [a if a not in files else "{config}" for a in shlex.split(cmd)[2:]]
        it = {"id": f"{rid}:{label}", "argv": argv, "cwd": str(tmp_path), "name": "config.yaml"}
        if files:
            it["text"] = next(iter(files.values()))
        items.append(it)
    assert len(items) >= 16
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run([python_exe, str(repo_root / "tests" / "oracle" / "accelerate_oracle.py")],
                          input=json.dumps({"configs": items}), capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    wrong = [(k, v["verdict"], v["stage"], v["message"]) for k, v in got.items()
             if (v["verdict"] == "reject") != k.endswith(":Fails")]
    assert not wrong, wrong


# what accelerate's own run shows for each warning rule's failing example (the value is lost or changed)
WARNING_PROOF = {
    "launch-flag-ignored": lambda o: o["launcher"] == "torchrun" and not any(
        k.startswith("ACCELERATE_DEEPSPEED") for k in o["env"]) and o["env"].get("ACCELERATE_USE_FSDP") == "true",
    "launch-paradigm-flag-overrides-file": lambda o: o["launcher"] == "torchrun" and "deepspeed" not in o["plugins"],
    "launch-flag-repeated": lambda o: o["args"]["num_processes"] == 4,
    "launch-bool-flag-value": lambda o: o["args_all"]["megatron_lm_no_load_optim"] is True,
    "launch-machine-rank-default": lambda o: o["args"]["node_rank"] == 0,
    "launch-flag-loses-to-deepspeed-json": lambda o: o["plugins"]["deepspeed"]["zero_stage"] == 3,
}


def test_accelerate_warning_examples_show_the_loss(python_exe, tmp_path, repo_root):
    items, order = [], []
    for rid, label, text in _examples():
        cmd, files = _example(text)
        if label != "Fails" or not cmd.startswith("accelerate launch") or core.REGISTRY[rid].severity != "warning":
            continue
        d = tmp_path / rid
        d.mkdir()
        for n, t in files.items():
            (d / n).write_text(t)
        argv = [a if a != "config.yaml" else "{config}" for a in shlex.split(cmd)[2:]]
        it = {"id": rid, "argv": argv, "cwd": str(d), "name": "config.yaml"}
        if "config.yaml" in files:
            it["text"] = files["config.yaml"]
        items.append(it)
        order.append(rid)
    assert set(order) == set(WARNING_PROOF), set(order) ^ set(WARNING_PROOF)
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run([python_exe, str(repo_root / "tests" / "oracle" / "accelerate_oracle.py")],
                          input=json.dumps({"configs": items}), capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    for rid in order:
        o = got[rid]
        assert o["verdict"] == "accept", (rid, o["stage"], o["message"])
        assert WARNING_PROOF[rid](o), (rid, o["launcher"], o["args"], o["env"], o["plugins"])


RUNNER_PROOF = {
    "launch-torchrun-standalone-overrides": lambda v: v["rdzv_endpoint"] == "localhost:0" and v["rdzv_backend"] == "c10d",
    "launch-torchrun-ignored-flag": lambda v: v["node_rank"] is None and v["rdzv_backend"] == "c10d",
    "launch-torchrun-multinode-rendezvous": lambda v: v["rdzv_endpoint"] == "127.0.0.1:29500" and v["node_rank"] == 0,
    "launch-ds-hostfile-missing": lambda v: v["hosts"] == 1,
    "launch-ds-gpus-exceed-slots": lambda v: v["world_size"] == 24,
}


def test_runner_warning_examples_show_the_loss(python_exe, tmp_path):
    items = []
    for rid, label, text in _examples():
        cmd, files = _example(text)
        launcher = cmd.split()[0]
        if label != "Fails" or launcher not in ("torchrun", "deepspeed") or core.REGISTRY[rid].severity != "warning":
            continue
        d = tmp_path / rid
        d.mkdir()
        for n, t in files.items():
            (d / n).write_text(t)
        items.append({"id": rid, "launcher": launcher, "argv": shlex.split(cmd)[1:], "cwd": str(d)})
    assert {i["id"] for i in items} == set(RUNNER_PROOF)
    oracle = Path(__file__).with_name("runner_oracle.py")
    proc = subprocess.run([python_exe, str(oracle)], input=json.dumps({"commands": items}), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for r in json.loads(proc.stdout)["results"]:
        assert r["verdict"] == "accept", r
        assert RUNNER_PROOF[r["id"]](r["values"]), r
