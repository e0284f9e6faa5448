"""validate_backend_config.py --output sarif / github: what GitHub code scanning and Actions read.

The SARIF is validated against the SARIF 2.1.0 JSON Schema (vendored in data/, see data/README.md);
locations, levels and rule ids are compared with the text output of the same run.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from integ_common import DATA, EXAMPLES, REPO, SKILL, VALIDATOR, VERSION

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is pinned in requirements-test.txt")

SARIF_SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
RULES_MD = (SKILL / "references" / "validator-rules.md").read_text(encoding="utf-8")
BAD = [EXAMPLES / n for n in ("bad-fsdp2-local-state-dict.yaml", "bad-deepspeed-file-conflict.yaml",
                              "bad-ram-efficient-no-sync.yaml")]
GOOD = [EXAMPLES / "fsdp2.yaml", EXAMPLES / "ds-zero3.json"]
TEXT_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info) (?P<rule>[a-z0-9-]+): ")


def run(*args, stdin=None, env=None, cwd=REPO):
    return subprocess.run([sys.executable, str(VALIDATOR), *map(str, args)], input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=dict(os.environ, **(env or {})))


def rel(paths):
    return [os.path.relpath(p, REPO) for p in paths]


def sarif_errors(doc):
    v = jsonschema.Draft4Validator(SARIF_SCHEMA)
    return [f"{list(e.absolute_path)}: {e.message[:200]}" for e in v.iter_errors(doc)]


def text_findings(*args):
    r = run(*args)
    return r.returncode, [m.groupdict() for m in map(TEXT_LINE.match, r.stdout.splitlines()) if m]


def test_vendored_schema_is_the_sarif_2_1_0_schema():
    jsonschema.Draft4Validator.check_schema(SARIF_SCHEMA)
    assert SARIF_SCHEMA["properties"]["version"]["enum"] == ["2.1.0"]
    assert "sarif-schema-2.1.0.json" in SARIF_SCHEMA["id"]
    assert (DATA / "sarif-schema-LICENSE.md").is_file()


def test_sarif_validates_and_matches_the_text_output():
    files = rel(BAD + GOOD)
    rc_text, text = text_findings(*files)
    r = run("--output", "sarif", *files)
    assert r.returncode == rc_text == 1, r.stderr
    doc = json.loads(r.stdout)
    assert sarif_errors(doc) == []
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1
    run0 = doc["runs"][0]
    driver = run0["tool"]["driver"]
    assert driver["name"] == "validate_backend_config" and driver["version"] == VERSION
    ids = [r["id"] for r in driver["rules"]]
    assert len(ids) == len(set(ids)) > 150
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
        # the help link points at the rule's own section of validator-rules.md
        assert rule["helpUri"].endswith(f"references/validator-rules.md#{rule['id']}")
        assert f"\n### {rule['id']}\n" in RULES_MD
    got = []
    for res in run0["results"]:
        assert ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        got.append((loc["artifactLocation"]["uri"], loc["region"]["startLine"], loc["region"]["startColumn"],
                    res["level"], res["ruleId"]))
    level = {"error": "error", "warning": "warning", "info": "note"}
    want = [(f["file"], int(f["line"]), int(f["col"]), level[f["sev"]], f["rule"]) for f in text]
    assert sorted(got) == sorted(want) and len(want) >= 4
    assert run0["invocations"][0]["executionSuccessful"] is True


def test_sarif_clean_run_and_input_errors():
    r = run("--output", "sarif", *rel(GOOD))
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert sarif_errors(doc) == [] and doc["runs"][0]["results"] == []
    r = run("--output", "sarif", "missing.yaml", "-", stdin="a: [1\n")
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert sarif_errors(doc) == []
    inv = doc["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    msgs = [n["message"]["text"] for n in inv["toolExecutionNotifications"]]
    assert any(m.startswith("missing.yaml: no such file") for m in msgs)
    assert any(m.startswith("<stdin>: ") for m in msgs)


def test_sarif_help_uri_base_from_the_environment():
    base = "https://github.com/OWNER/pytorch-distributed-training/blob/v" + VERSION
    doc = json.loads(run("--output", "sarif", *rel(GOOD), env={"BACKEND_VALIDATOR_DOCS_URL": base + "/"}).stdout)
    rule = doc["runs"][0]["tool"]["driver"]["rules"][0]
    assert rule["helpUri"] == (f"{base}/sub-skills/distributed-training-backends/references/validator-rules.md"
                               f"#{rule['id']}")
    assert sarif_errors(doc) == []


def test_sarif_absolute_and_odd_paths(tmp_path):
    odd = tmp_path / "odd dir #1" / "café,x.yaml"
    odd.parent.mkdir()
    odd.write_bytes((EXAMPLES / "bad-fsdp2-local-state-dict.yaml").read_bytes())
    doc = json.loads(run("--output", "sarif", str(odd)).stdout)
    assert sarif_errors(doc) == []
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and "odd%20dir%20%231/caf%C3%A9%2Cx.yaml" in uri


def test_github_annotations_one_per_finding():
    files = rel(BAD + GOOD)
    rc_text, text = text_findings(*files)
    r = run("--output", "github", *files)
    assert r.returncode == rc_text == 1
    lines = r.stdout.splitlines()
    assert len(lines) == len(text)
    cmd = re.compile(r"^::(error|warning|notice) file=([^,]+),line=(\d+),col=(\d+),title=([a-z0-9-]+)::(.+)$")
    kind = {"error": "error", "warning": "warning", "info": "notice"}
    got = sorted(cmd.match(ln).groups()[:5] for ln in lines)
    want = sorted((kind[f["sev"]], f["file"], f["line"], f["col"], f["rule"]) for f in text)
    assert got == want
    assert "::error file=sub-skills/distributed-training-backends/examples/bad-fsdp2-local-state-dict.yaml,line=14," \
           "col=3,title=acc-fsdp2-local-state-dict::FSDP2 does not support LOCAL_STATE_DICT" in r.stdout


def test_github_levels_escaping_and_input_errors(tmp_path):
    cfg = tmp_path / "a,b:c.yaml"
    # a warning (unknown FSDP key, silently ignored) next to no error
    cfg.write_text("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n  fsdp_bogus: 1\n")
    r = run("--output", "github", str(cfg), "missing.json")
    assert r.returncode == 2
    lines = r.stdout.splitlines()
    warn = [ln for ln in lines if ln.startswith("::warning ")]
    assert warn and all("file=" + str(cfg).replace(",", "%2C").replace(":", "%3A") + ",line=" in ln for ln in warn)
    assert any("%0Ahint: " in ln for ln in warn), "a hint goes on its own line (escaped newline)"
    assert "::error file=missing.json,title=input-error::missing.json: no such file" in r.stdout


def _formats():
    sys.path.insert(0, str(SKILL / "scripts"))
    from backend_validator import formats
    return formats


def test_github_line_escapes_like_actions_core():
    f = _formats()
    assert f.github_line("notice", "100% done\r\nnext", "x.yaml", 3, 0, "r") == \
        "::notice file=x.yaml,line=3,title=r::100%25 done%0D%0Anext"
    assert f.github_line("error", "m", "<stdin>", 1, 1, "r") == "::error title=r::m"
