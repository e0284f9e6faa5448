"""Every DeepSpeed / cross-file rule's examples, through the validator and the real consumer.

* the validator reports the rule on its Fails example and reports no error at all on its
  Passes example (with the consumer / world size the docstring names);
* the real consumer (tests/oracle/deepspeed_oracle.py, or accelerate_oracle.py for cross
  rules) rejects the Fails example of an error rule and accepts its Passes example; for a
  warning it accepts the Fails example and the docstring's ``Effect:`` holds (the value was
  silently dropped or changed).
"""
from __future__ import annotations

import re

import pytest

from ds_support import ds_rules, validate_json, xf_rules
import ds_examples

DS = ds_rules()
XF = xf_rules()


def test_rule_sets_are_substantial():
    assert len(DS) >= 30 and len(XF) >= 5
    for rid, r in {**DS, **XF}.items():
        assert re.fullmatch(r"(ds|xf)-[a-z0-9]+(-[a-z0-9]+)*", rid), rid
        assert r.summary and "\n" not in r.summary
        assert r.source.startswith(("deepspeed/", "accelerate/", "transformers/")), r.source
        ex = ds_examples.parse(r.doc)
        if r.severity == "warning":
            assert ex["effect"], f"{rid}: a warning needs an Effect: line the oracle can check"


@pytest.mark.parametrize("rid", sorted(DS))
def test_validator_on_ds_examples(rid):
    r = DS[rid]
    ex = ds_examples.parse(r.doc)
    fails, cons = validate_json(ex["fails"]["json"], consumer=ex["consumer"], world_size=ex["world_size"])
    hit = [f for f in fails if f.rule == rid]
    assert hit, f"{rid} not reported on its Fails example: {[f.rule for f in fails]}"
    for f in hit:
        assert f.line and f.col and f.message and "\n" not in f.message
    passes, _ = validate_json(ex["passes"]["json"], consumer=ex["consumer"], world_size=ex["world_size"])
    errors = [(f.rule, f.message) for f in passes if f.severity == "error"]
    assert not errors and not [f for f in passes if f.rule == rid], errors


@pytest.mark.parametrize("rid", sorted(DS))
def test_real_consumer_on_ds_examples(rid, ds_oracle):
    r = DS[rid]
    fails, passes = ds_oracle[f"{rid}|fails"], ds_oracle[f"{rid}|passes"]
    assert passes["verdict"] == "accept", f"{rid} Passes example rejected: {passes}"
    if r.severity == "error":
        assert fails["verdict"] == "reject", f"{rid} Fails example accepted by the consumer: {fails}"
    else:
        assert fails["verdict"] == "accept", fails
        assert fails["effect"] is True, f"{rid}: the value was not dropped/changed: {fails}"


def _xf_validate(bv_case):
    from backend_validator import cli, core
    d, y, ex = bv_case
    res = cli.validate_text(y.read_text(encoding="utf-8"), str(y), options=core.Options(cwd=str(d)),
                            source_path=str(y))
    return res.findings


@pytest.mark.parametrize("rid", sorted(XF))
def test_validator_on_xf_examples(rid, xf_cases):
    fails = _xf_validate(xf_cases[(rid, "fails")])
    hit = [f for f in fails if f.rule == rid]
    assert hit, [f.rule for f in fails]
    for f in hit:
        assert f.line and f.col
    passes = _xf_validate(xf_cases[(rid, "passes")])
    assert not [f for f in passes if f.severity == "error" or f.rule == rid], [(f.rule, f.message) for f in passes]


@pytest.mark.parametrize("rid", sorted(XF))
def test_accelerate_on_xf_examples(rid, acc_oracle, xf_cases):
    r = XF[rid]
    fails, passes = acc_oracle[f"{rid}|fails"], acc_oracle[f"{rid}|passes"]
    assert passes["verdict"] == "accept", passes
    if xf_cases[(rid, "fails")][2].get("deepspeed-world"):
        # accelerate's own stages accept it; deepspeed rejects it later (test_xf_world_examples_...)
        assert fails["verdict"] == "accept", fails
    elif r.severity == "error":
        assert fails["verdict"] == "reject", fails
    else:
        assert fails["verdict"] == "accept", fails
        effect = xf_cases[(rid, "fails")][2]["effect"]
        assert eval(effect, {}, {"res": fails}) is True, fails  # noqa: S307 - our own docstring


def test_xf_world_examples_through_deepspeed(ds_oracle):
    """Cross rules about the launched world size: deepspeed (as Accelerate feeds it, with the
    YAML's num_processes x num_machines) rejects the Fails JSON and accepts the Passes JSON."""
    ids = [k for k in ds_oracle if k.startswith("xfworld|")]
    assert ids
    for k in ids:
        want = "reject" if k.endswith("|fails") else "accept"
        assert ds_oracle[k]["verdict"] == want, (k, ds_oracle[k])


def test_cross_file_json_findings_have_json_positions(xf_cases):
    """A finding inside the JSON reached through the YAML names the JSON file and its line."""
    d, y, ex = xf_cases[("xf-precision-auto-off", "fails")]
    (d / "ds_config.json").write_text('{\n  "train_micro_batch_size_per_gpu": 2,\n  "bf16": {\n'
                                      '    "enabled": "auto"\n  },\n  "zero_optimization": {"stage": 2}\n}\n',
                                      encoding="utf-8")
    try:
        f = next(f for f in _xf_validate((d, y, ex)) if f.rule == "xf-precision-auto-off")
        assert f.file.endswith("ds_config.json") and (f.line, f.col) == (4, 5)
    finally:
        (d / "ds_config.json").write_text(ex["fails"]["json"], encoding="utf-8")


def test_config_file_beside_yaml_is_a_warning(tmp_path):
    from backend_validator import cli, core
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}')
    y = conf / "acc.yaml"
    y.write_text("distributed_type: DEEPSPEED\nnum_processes: 1\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n")
    res = cli.validate_text(y.read_text(), str(y), options=core.Options(cwd=str(tmp_path)), source_path=str(y))
    f = [f for f in res.findings if f.rule == "xf-config-file-missing"]
    assert len(f) == 1 and f[0].severity == "warning" and "only relative to the config file" in f[0].message
    res = cli.validate_text(y.read_text(), str(y), options=core.Options(cwd=str(conf)), source_path=str(y))
    assert not [f for f in res.findings if f.rule == "xf-config-file-missing"]
