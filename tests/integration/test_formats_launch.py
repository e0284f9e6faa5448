"""--launch-command / --node-set results through --output sarif / github (backend_validator/formats.py).

A finding on the command itself points at the flag's line and column inside that command: in SARIF a
physical location in the artifact ``launch-command-N`` (the command text embedded in
``runs[0].artifacts``), because GitHub code scanning shows only results with a physical location;
in GitHub annotations the message says which command, line and column. A finding on a config file
keeps the file line. Every position is compared with the text output of the same check.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from integ_common import DATA, VALIDATOR

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is pinned in requirements-test.txt")
SARIF_SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
TEXT_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info) (?P<rule>[a-z0-9-]+): ")
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
MULTI = "distributed_type: MULTI_GPU\nnum_processes: 16\nnum_machines: 2\nmachine_rank: 0\n" \
        "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n"
# one command with an error on a flag (column 40, on line 2 after a continuation), one whose error is a file line
BAD_FLAG = "accelerate launch --config_file c.yaml \\\n  --num_processes 0 train.py"
BAD_FILE = "accelerate launch --config_file bad.yaml train.py"


def run(*args, cwd):
    return subprocess.run([sys.executable, str(VALIDATOR), *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


@pytest.fixture()
def work(tmp_path):
    (tmp_path / "c.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    (tmp_path / "bad.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 0\n")
    (tmp_path / "n.yaml").write_text(MULTI)
    (tmp_path / "m.yaml").write_text(MULTI.replace("machine_rank: 0", "machine_rank: 1")
                                     .replace("num_processes: 16", "num_processes: 8"))
    return tmp_path


def text_positions(cmd, cwd):
    """(file, line, col, level, rule) of each finding when the command is checked alone in text mode."""
    r = run("--launch-command", cmd, cwd=cwd)
    return [(m["file"], int(m["line"]), int(m["col"]), LEVEL[m["sev"]], m["rule"])
            for m in map(TEXT_LINE.match, r.stdout.splitlines()) if m]


def sarif(*args, cwd):
    r = run("--output", "sarif", *args, cwd=cwd)
    doc = json.loads(r.stdout)  # before formats.py took launch results this was text
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}"
              for e in jsonschema.Draft4Validator(SARIF_SCHEMA).iter_errors(doc)]
    assert errors == []
    return r.returncode, doc["runs"][0]


def test_sarif_points_at_the_flag_in_its_command_and_at_the_file_line(work):
    rc, run0 = sarif("--launch-command", BAD_FLAG, "--launch-command", BAD_FILE, cwd=work)
    assert rc == 1
    arts = run0["artifacts"]
    assert [a["location"]["uri"] for a in arts] == ["launch-command-1", "launch-command-2"]
    assert [a["contents"]["text"] for a in arts] == [BAD_FLAG, BAD_FILE]
    got = []
    for res in run0["results"]:
        phys = res["locations"][0]["physicalLocation"]  # GitHub needs a physical location with a uri
        art, reg = phys["artifactLocation"], phys["region"]
        assert art["uri"]
        got.append((art["uri"], reg["startLine"], reg.get("startColumn"), res["level"], res["ruleId"]))
        if art["uri"].startswith("launch-command-"):
            assert arts[art["index"]]["location"]["uri"] == art["uri"]
            assert reg["snippet"]["text"].startswith("--"), reg  # the flag itself
        else:
            assert art.get("uriBaseId") == "%SRCROOT%"
    want = []
    for n, cmd in enumerate((BAD_FLAG, BAD_FILE), 1):
        for file, line, col, level, rule in text_positions(cmd, work):
            want.append((f"launch-command-{n}" if file == "<launch-command>" else file, line, col, level, rule))
    assert sorted(got) == sorted(want)
    assert ("launch-command-1", 2, 3, "error", "acc-no-worker-processes") in got, got
    assert any(g[0] == "bad.yaml" and g[1] == 2 for g in got), got


def test_sarif_node_set_of_files_and_of_commands(work):
    rc, run0 = sarif("--node-set", "n.yaml", "m.yaml", cwd=work)
    assert rc == 1 and "artifacts" not in run0
    locs = {(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
             r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in run0["results"]}
    assert ("nodeset-mismatch", "m.yaml", 2) in locs, locs
    same = "accelerate launch --config_file n.yaml train.py"
    rc, run0 = sarif("--node-set", "--launch-command", same, "--launch-command", same, cwd=work)
    assert rc == 1
    assert [a["contents"]["text"] for a in run0["artifacts"]] == [same, same]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in run0["results"] if r["ruleId"] == "nodeset-machine-rank"}
    assert uris and uris <= {"launch-command-1", "launch-command-2"}, uris


def test_github_annotations_for_commands_and_files(work):
    r = run("--output", "github", "--launch-command", BAD_FLAG, "--launch-command", BAD_FILE, cwd=work)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    want = [(n, *t) for n, cmd in enumerate((BAD_FLAG, BAD_FILE), 1) for t in text_positions(cmd, work)]
    assert len(lines) == len(want) >= 2
    kind = {"error": "error", "warning": "warning", "note": "notice"}
    for n, file, line, col, level, rule in want:
        if file == "<launch-command>":
            head = f"::{kind[level]} title={rule}::launch command {n}, line {line}, column {col}: "
        else:
            head = f"::{kind[level]} file={file},line={line},col={col},title={rule}::"
        assert any(ln.startswith(head) for ln in lines), (head, lines)
    assert not any("<launch-command>" in ln for ln in lines)


def test_launch_input_errors_are_sarif_notifications(work):
    rc, run0 = sarif("--node-set", "missing.yaml", "n.yaml", cwd=work)
    inv = run0["invocations"][0]
    assert rc == 2 and inv["executionSuccessful"] is False
    assert any("missing.yaml" in n["message"]["text"] for n in inv["toolExecutionNotifications"])


def test_every_sarif_result_has_a_location_even_from_stdin(work):
    # code scanning rejects the whole upload when one result has no location
    # ("locationFromSarifResult: expected at least one location", github/codeql-action#1738)
    r = subprocess.run([sys.executable, str(VALIDATOR), "--output", "sarif", "-"], capture_output=True, text=True,
                       timeout=120, cwd=work, input="distributed_type: MULTI_GPU\nnum_processes: 0\n")
    assert r.returncode == 1
    results = json.loads(r.stdout)["runs"][0]["results"]
    assert results and all(res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "stdin"
                           for res in results), results
    assert all(res["locations"][0]["physicalLocation"]["region"]["startLine"] == 2 for res in results)
