"""The planner writes its Accelerate YAML without importing PyYAML (a third of a plan's time);
whatever it writes must read back through yaml.safe_load (what accelerate uses) as the same values."""
from __future__ import annotations

import json

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from _planner_helpers import run_planner

TRICKY = ["", "yes", "No", "on", "OFF", "null", "~", "1.5", "0x10", "1e3", "-x", "a: b", "a #b", "#x", "'q'",
          '"d"', "[1]", "{a}", "*alias", "&anchor", "!tag", "%x", "@x", "`x`", "x\ny", "tab\tx", "ünï", "😀",
          "/abs/path/ds_config.json", "C:\\dir", " lead", "trail ", "---", "...", "?x", "|x", ">x", "2026-12-01",
          "12:30", "0o17", ".inf", ".nan", "+1", "_", "\x00", "\u2028", "\ufeffbom"]


def test_tricky_scalars_round_trip(planner):
    for v in TRICKY + [True, False, 0, 1, 29500, 10 ** 12]:
        assert yaml.safe_load(f"k: {planner.emit.yaml_scalar(v)}\n") == {"k": v}, repr(v)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_string_round_trips(planner, s):
    assert yaml.safe_load(f"k: {planner.emit.yaml_scalar(s)}\n") == {"k": s}


def test_nested_dump_round_trips(planner):
    d = {"a": 1, "b": {"c": "x y", "d": {"e": True}}, "f": "LlamaDecoderLayer"}
    assert yaml.safe_load(planner.emit.yaml_dump(d)) == d


def test_emit_into_a_folder_with_odd_characters(tmp_path):
    out = tmp_path / "my plan #1: ünï"
    r = run_planner("--params", "7e9", "--emit", out, "--emit-candidate", "zero3")
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load((out / "accelerate.yaml").read_text())
    assert cfg["deepspeed_config"]["deepspeed_config_file"] == str(out / "ds_config.json")
    assert json.loads((out / "ds_config.json").read_text())["zero_optimization"]["stage"] == 3
