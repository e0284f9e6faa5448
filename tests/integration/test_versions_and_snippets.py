"""The bundle version (one VERSION file) as every helper, SKILL.md, the CHANGELOG and the README
show it; and the README's GitHub Actions and editor snippets, run as written (with the
placeholders replaced)."""
from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from integ_common import (AVAILABILITY, DATA, EXAMPLES, PLANNER, REPO, SCHEMAS, TRIAGE, VALIDATOR, VERSION,
                          ci_blocks, workflow_snippet)

VERSIONS_MD = (REPO / "references" / "versions.md").read_text(encoding="utf-8")


def pinned(name: str) -> str:
    return re.search(rf"^\| {re.escape(name)} \| ([0-9.]+) \|", VERSIONS_MD, re.M).group(1)


def test_version_is_in_one_file_and_everything_agrees():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    front = (REPO / "SKILL.md").read_text().split("---\n")[1]
    assert yaml.safe_load(front)["metadata"] == {"version": VERSION}
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.findall(r"^## (\d+\.\d+\.\d+)", changelog, re.M)[0] == VERSION
    assert 'version = {file = "VERSION"}' in (REPO / "pyproject.toml").read_text()


@pytest.mark.parametrize("script,prog", [(VALIDATOR, "validate_backend_config.py"),
                                         (AVAILABILITY, "check_backend_availability.py"),
                                         (PLANNER, "plan_backend.py"),
                                         (TRIAGE, "triage_log.py")])
def test_helpers_print_the_bundle_version_and_the_pins(script, prog):
    r = subprocess.run([sys.executable, str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{prog} {VERSION} (pytorch-distributed-training bundle; "), r.stdout
    for lib in ("accelerate", "deepspeed", "torch"):
        assert f"{lib} {pinned(lib)}" in r.stdout, (lib, r.stdout)


def test_availability_json_reports_the_bundle_version():
    r = subprocess.run([sys.executable, str(AVAILABILITY), "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["checker"]["version"] == VERSION


def test_planner_json_reports_the_bundle_version():
    r = subprocess.run([sys.executable, str(PLANNER), "--params", "7e9", "--output", "json"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["planner_version"] == VERSION


@pytest.mark.parametrize("script", [VALIDATOR, PLANNER, TRIAGE], ids=lambda p: p.name)
def test_a_helper_copied_out_of_the_bundle_says_unknown(tmp_path, script):
    dst = tmp_path / "scripts"
    # a local `pip install .` leaves an *.egg-info beside the scripts: not part of a copied helper
    shutil.copytree(script.parent, dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    r = subprocess.run([sys.executable, str(dst / script.name), "--version"], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith(f"{script.name} unknown ("), r.stdout + r.stderr


def _user_repo(tmp: Path) -> Path:
    (tmp / "accelerate_configs").mkdir()
    shutil.copy(EXAMPLES / "fsdp2.yaml", tmp / "accelerate_configs" / "fsdp2.yaml")
    shutil.copy(EXAMPLES / "bad-fsdp2-local-state-dict.yaml", tmp / "accelerate_configs" / "bad.yaml")
    shutil.copy(EXAMPLES / "ds-zero3.json", tmp / "ds_config.json")
    return tmp


def test_github_actions_snippet_runs(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is pinned in requirements-test.txt")
    wf = yaml.safe_load(workflow_snippet())
    steps = wf["jobs"]["validate"]["steps"]
    assert wf["permissions"]["security-events"] == "write"  # upload-sarif needs it
    install = [s["run"] for s in steps if "pip install" in s.get("run", "")]
    assert install == [f'pip install "git+REPOSITORY-URL@v{VERSION}"']
    upload = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    assert len(upload) == 1 and upload[0]["if"] == "always()"
    sarif_file = upload[0]["with"]["sarif_file"]
    user = _user_repo(tmp_path)
    runs = [s["run"] for s in steps if "validate-backend-config" in s.get("run", "")]
    assert len(runs) == 2
    outputs = {}
    for cmd in runs:
        # the installed console script is the same CLI as the standalone script
        cmd = cmd.replace("validate-backend-config", f"{shlex.quote(sys.executable)} {shlex.quote(str(VALIDATOR))}")
        r = subprocess.run(["bash", "-c", cmd], cwd=user, capture_output=True, text=True, timeout=120)
        outputs[cmd] = r
    annotate, sarif = outputs.values()
    assert annotate.returncode == 1  # the step fails the job on an error finding ...
    assert annotate.stdout.startswith("::error file=accelerate_configs/bad.yaml,line=14,col=3,"
                                      "title=acc-fsdp2-local-state-dict::")
    assert sarif.returncode == 0  # ... while the SARIF step never stops the upload
    doc = json.loads((user / sarif_file).read_text())
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    assert list(jsonschema.Draft4Validator(schema).iter_errors(doc)) == []
    (res,) = doc["runs"][0]["results"]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "accelerate_configs/bad.yaml"


def test_editor_snippets_name_the_schemas_and_they_apply(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is pinned in requirements-test.txt")
    (modeline,) = [b for b in ci_blocks("yaml") if "yaml-language-server" in b]
    m = re.fullmatch(r"# yaml-language-server: \$schema=PATH-TO-BUNDLE/(\S+)\n", modeline)
    assert m and (REPO / m.group(1)) == SCHEMAS / "accelerate-config.schema.json"
    (settings_text,) = ci_blocks("json")
    settings = json.loads(settings_text.replace("PATH-TO-BUNDLE", str(REPO)))
    user = _user_repo(tmp_path)
    files = [p.relative_to(user).as_posix() for p in user.rglob("*") if p.is_file()]
    checked = 0
    for schema_path, globs in settings["yaml.schemas"].items():
        schema = json.loads(Path(schema_path).read_text())
        for f in files:
            if any(fnmatch.fnmatch(f, g) for g in globs):
                errors = list(jsonschema.Draft7Validator(schema).iter_errors(yaml.safe_load((user / f).read_text())))
                assert errors == [], f  # both configs are valid field by field (bad.yaml is a cross-key error)
                checked += 1
    for entry in settings["json.schemas"]:
        schema = json.loads(Path(entry["url"]).read_text())
        for f in files:
            if any(fnmatch.fnmatch(f, g) for g in entry["fileMatch"]):
                assert list(jsonschema.Draft7Validator(schema).iter_errors(json.loads((user / f).read_text()))) == []
                checked += 1
    assert checked == 3
    # a typo in a key the editor should flag
    acc = json.loads((SCHEMAS / "accelerate-config.schema.json").read_text())
    assert list(jsonschema.Draft7Validator(acc).iter_errors({"distributed_type": "FSDP", "num_process": 2}))
