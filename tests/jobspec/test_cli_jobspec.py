"""validate_backend_config.py --job-spec end to end: exit codes, output formats, positions, hostile input."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from backend_validator import cli

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "sub-skills", "distributed-training-backends", "scripts",
                      "validate_backend_config.py")
BAD = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:2
srun bash -c "torchrun --nnodes 2 --nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr localhost train.py"
"""


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(argv, stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def test_text_json_sarif_github(tmp_path):
    p = tmp_path / "job.sbatch"
    p.write_text(BAD)
    rc, out, err = run(["--job-spec", str(p)])
    assert rc == 1 and "jobspec-node-rank-same" in out and f"{p}:5:" in out and "1 job spec(s)" in err
    rc, out, _ = run(["--job-spec", str(p), "--output", "json"])
    doc = json.loads(out)
    assert doc["summary"]["errors"] >= 2
    step = doc["job_specs"][0]["steps"][0]
    assert step["nodes"] == 2 and [l["node_rank"] for l in step["launches"]] == ["0", "0"]
    rc, out, _ = run(["--job-spec", str(p), "--output", "sarif"])
    res = json.loads(out)["runs"][0]["results"]
    assert {r["ruleId"] for r in res} >= {"jobspec-node-rank-same", "jobspec-rendezvous-local"}
    assert all(r["locations"][0]["physicalLocation"]["region"]["startLine"] == 5 for r in res)
    rc, out, _ = run(["--job-spec", str(p), "--output", "github"])
    assert out.startswith("::error file=") and "line=5" in out


def test_clean_script_exit_0(tmp_path):
    p = tmp_path / "ok.sbatch"
    p.write_text(BAD.replace('"torchrun', "'torchrun").replace('train.py"', "train.py'")
                 .replace("localhost", "$MASTER_ADDR").replace("srun", 'export MASTER_ADDR=$(scontrol show hostnames '
                                                                        '"$SLURM_JOB_NODELIST" | head -n 1)\nsrun'))
    rc, out, err = run(["--job-spec", str(p)])
    assert rc == 0, out + err


@pytest.mark.parametrize("content,needle", [
    (b"\x00\x01binary", "binary"),
    (b"#!/bin/bash\nsrun bash -c 'torchrun train.py\n", "quote"),
    (b"#!/bin/bash\nsrun bash -c \"torchrun $(train.py\n", "error"),
    (b"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec: [\n", "YAML"),
    (b"apiVersion: v1\nkind: Pod\n", "PyTorchJob"),
    (b"\xff\xfe bad utf8", "UTF-8"),
    (b"#" * (6 * 1024 * 1024), "limit"),
    (b"kind: PyTorchJob\napiVersion: kubeflow.org/v1\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n", "aliases"),
])
def test_hostile_input_one_line_exit_2(tmp_path, content, needle):
    p = tmp_path / "spec"
    p.write_bytes(content)
    proc = subprocess.run([sys.executable, SCRIPT, "--job-spec", str(p)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if "error:" in x]
    assert len(lines) == 1 and needle.lower() in lines[0].lower() and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("name,content", [
    ("job.json", "[1, 2]"), ("job.json", "{}"), ("job.json", "null"), ("job.yaml", ""),
    ("job.yml", '"text"'), ("spec", '{"a": 1}'), ("spec", "[]"),
])
def test_manifest_without_a_job_is_an_input_error(tmp_path, name, content):
    """A .json/.yaml/.yml file, or text opening with { or [, is a manifest: with no PyTorchJob/TrainJob in it
    the answer is an input error (exit 2), not 'no launch command found' as if it were a batch script."""
    p = tmp_path / name
    p.write_text(content)
    rc, out, err = run(["--job-spec", str(p)])
    assert rc == 2 and "no PyTorchJob" in err and "jobspec-not-checked" not in out, out + err


def test_a_batch_script_with_no_launch_is_still_an_info(tmp_path):
    p = tmp_path / "job.sbatch"
    p.write_text("#!/bin/bash\n#SBATCH --nodes=1\necho hello\n")
    rc, out, err = run(["--job-spec", str(p)])
    assert rc == 0 and "jobspec-not-checked" in out, out + err


def test_missing_file_and_combination(tmp_path):
    rc, _, err = run(["--job-spec", str(tmp_path / "nope.sh")])
    assert rc == 2 and "no such file" in err
    rc, _, err = run(["--job-spec", str(tmp_path / "nope.sh"), "--launch-command", "torchrun x.py"])
    assert rc == 2 and "cannot be combined" in err


@pytest.mark.parametrize("reps", ["[1, 2]", "abc", "{Master: {replicas: 100000000}}",
                                  "{Master: {template: {spec: {containers: [5, {name: pytorch, command: 5, env: [1], "
                                  "resources: {limits: 3}}]}}}}"])
def test_malformed_manifest_fields_are_no_internal_error(tmp_path, reps):
    p = tmp_path / "m.yaml"
    p.write_text(f"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: 5\nspec:\n  elasticPolicy: 3\n"
                 f"  pytorchReplicaSpecs: {reps}\n")
    rc, out, err = run(["--job-spec", str(p)])
    assert "internal error" not in err and rc in (0, 1), out + err
    p.write_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: 5\nspec:\n"
                 "  trainer: {numNodes: -4, command: 7, env: 3, resourcesPerNode: 2}\n")
    rc, out, err = run(["--job-spec", str(p)])
    assert "internal error" not in err and rc in (0, 1), out + err


def test_many_commands_are_bounded(tmp_path):
    p = tmp_path / "many.sh"
    p.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gres=gpu:2\n" + "srun bash -c 'torchrun --nnodes 2 "
                 "--nproc-per-node 2 --node-rank $SLURM_NODEID --master-addr node0 train.py'\n" * 2000)
    rc, out, err = run(["--job-spec", str(p)])
    assert rc == 0 and "more than 32" in out, out + err


def test_deep_nesting_and_long_lines_do_not_crash(tmp_path):
    p = tmp_path / "deep.sh"
    p.write_text("#!/bin/bash\n" + "srun bash -c '" * 1 + "bash -c \"" * 30 + "torchrun train.py" + "\"" * 30 + "'\n"
                 + "X=" + "a" * 200000 + "\n")
    rc, out, err = run(["--job-spec", str(p)])
    assert rc in (0, 1, 2) and "Traceback" not in err
