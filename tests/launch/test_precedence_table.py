"""The precedence table in configuration-and-cli/references/config-file-and-precedence.md: every row is
run through accelerate's own merge (ONE oracle process) and through the validator's --explain view,
and both must give the stated value and origin."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest
import yaml

from backend_validator.launch.check import check_command

REF = ("sub-skills", "configuration-and-cli", "references", "config-file-and-precedence.md")


def rows(repo_root):
    text = repo_root.joinpath(*REF).read_text(encoding="utf-8")
    part = text.split("<!-- precedence-table:", 1)[1].split("\n\n", 1)[0]
    out = []
    for line in part.splitlines()[3:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        cfg, flags, setting, value, origin = cells
        unq = lambda c: c[1:-1] if c.startswith("`") else c  # noqa: E731
        out.append({"config": yaml.safe_load(unq(cfg)), "flags": [] if flags == "none" else shlex.split(unq(flags)),
                    "setting": unq(setting), "value": unq(value), "origin": origin})
    return out


def test_table_rows_hold(repo_root, python_exe, tmp_path):
    table = rows(repo_root)
    assert len(table) >= 20
    items = []
    for i, r in enumerate(table):
        items.append({"id": str(i), "argv": ["--config_file", "{config}"] + r["flags"] + ["train.py"],
                      "text": yaml.safe_dump(r["config"]), "name": "config.yaml", "cwd": str(tmp_path)})
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run([python_exe, str(repo_root / "tests" / "oracle" / "accelerate_oracle.py")],
                          input=json.dumps({"configs": items}), capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    bad = []
    for i, r in enumerate(table):
        o = got[str(i)]
        if r["setting"] == "launcher":
            ov = o.get("launcher")
        else:
            ov = o["args"].get(r["setting"], o.get("args_all", {}).get(r["setting"]))
        if str(ov) != r["value"]:
            bad.append(("accelerate", i, r, ov, o["stage"], o["message"]))
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(r["config"]))
        cmd = "accelerate launch --config_file config.yaml " + " ".join(map(shlex.quote, r["flags"])) + " train.py"
        res = check_command(cmd, env={"HF_HOME": str(tmp_path / "hf")}, cwd=str(tmp_path))
        L = res.accelerate
        vv = L.launcher if r["setting"] == "launcher" else L.args.get(r["setting"])
        if str(vv) != r["value"]:
            bad.append(("validator value", i, vv))
        if r["setting"] != "launcher":
            kind = L.origin[r["setting"]].kind
        else:
            kind = "flag" if L.paradigm_from == "flags" or L.parsed.last("cpu") else "file"
        if kind != r["origin"]:
            bad.append(("validator origin", i, kind, r["origin"]))
    assert not bad, bad
