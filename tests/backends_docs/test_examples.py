"""Every example config: parsed, loaded by accelerate's own loader, launch-simulated, plugin built
under the launcher's environment (outcome as annotated in its header), and validated by the
bundle's validator (clean, or exactly the annotated rule)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

D = sys.modules["backends_docs__docs"]  # loaded by this folder's conftest.py
accelerate_examples = D.accelerate_examples

EXAMPLES = sorted(p for p in D.EXAMPLES.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def annotations(path):
    """'# validator: clean' or '# validator: RULE-ID', '# oracle: load=.. launch=.. plugin=..'."""
    text = path.read_text()
    out = {}
    m = re.search(r"^# validator: (\S+)", text, re.M)
    if m:
        out["validator"] = m.group(1)
    m = re.search(r"^# oracle: (.*)$", text, re.M)
    if m:
        out["oracle"] = dict(kv.split("=", 1) for kv in m.group(1).split("(")[0].split())
    return out


def test_examples_exist_and_include_fsdp2():
    names = {p.name for p in EXAMPLES}
    assert "fsdp2.yaml" in names
    assert len(EXAMPLES) >= 8
    shown = {annotations(p)["validator"] for p in EXAMPLES if p.suffix == ".yaml"} - {"clean"}
    assert len(shown) >= 3, "counter-examples must show validator rules"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_parses_and_is_annotated(path):
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        assert isinstance(data, dict) and "zero_optimization" in data
        return
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict) and data.get("distributed_type")
    ann = annotations(path)
    assert "validator" in ann and "oracle" in ann, "header must state the expected outcomes"


@pytest.mark.parametrize("path", [p for p in accelerate_examples()], ids=lambda p: p.name)
def test_example_against_accelerate(path, oracle):
    res = {r["path"]: r for r in oracle["examples"]}[str(path.relative_to(D.REPO))]
    want = annotations(path)["oracle"]
    for stage in ("load", "launch", "plugin"):
        if stage not in want:
            continue
        got = res.get(stage, "not reached")
        if want[stage] == "ok":
            assert got == "ok", f"{stage}: {got}"
        else:
            assert got.startswith(want[stage] + ":"), f"{stage}: expected {want[stage]}, got {got}"
    # a stage after an expected failure must not have been reached
    if want.get("launch", "ok") != "ok":
        assert "plugin" not in res


def test_fsdp2_example_builds_fsdp2_plugin(oracle):
    res = {r["path"]: r for r in oracle["examples"]}["sub-skills/distributed-training-backends/examples/fsdp2.yaml"]
    built = res["built"]["FullyShardedDataParallelPlugin"]
    assert built["fsdp_version"] == 2 and built["reshard_after_forward"] == "True"
    assert built["state_dict_type"].endswith("SHARDED_STATE_DICT")
    assert res["env"]["FSDP_VERSION"] == "2" and res["launcher"] == "torchrun"


def test_deepspeed_examples_use_documented_launchers(oracle):
    res = {r["path"].rsplit("/", 1)[1]: r for r in oracle["examples"]}
    assert res["deepspeed-zero2.yaml"]["launcher"] == "torchrun"  # single node: torchrun
    assert res["deepspeed-multinode.yaml"]["launcher"] == "deepspeed"  # pdsh: deepspeed CLI
    assert res["deepspeed-file.yaml"]["built"]["DeepSpeedPlugin"]["zero_stage"] == 3  # read from the JSON
    off = res["deepspeed-zero3-offload.yaml"]["built"]["DeepSpeedPlugin"]
    assert off["offload_param_device"] == "cpu" and off["zero3_init_flag"] is True
    assert "ACCELERATE_DYNAMO_BACKEND" not in res["deepspeed-zero2.yaml"]["env"]  # DeepSpeed exports no dynamo
    assert "ACCELERATE_DYNAMO_BACKEND" in res["fsdp2.yaml"]["env"]  # ... while torchrun launches do


# ------------------------------------------------------------------ validator (bundled helper)
def run_validator(path):
    # the DeepSpeed JSON example is read by accelerate (named by deepspeed-file.yaml)
    extra = ["--consumer", "accelerate"] if path.suffix == ".json" else []
    proc = subprocess.run([sys.executable, str(D.VALIDATOR), "--output", "json", *extra, str(path)],
                          capture_output=True, text=True, cwd=D.REPO, timeout=60)
    return proc


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_through_validator(path):
    assert D.VALIDATOR.is_file(), f"validator not found at {D.VALIDATOR}"
    proc = run_validator(path)
    assert proc.returncode in (0, 1), proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    want = annotations(path).get("validator", "clean") if path.suffix != ".json" else "clean"
    if want == "clean":
        assert proc.returncode == 0 and not errors, findings
        assert not [f for f in findings if f["severity"] == "warning"], findings
    else:
        assert {f["rule"] for f in findings} == {want}, findings
