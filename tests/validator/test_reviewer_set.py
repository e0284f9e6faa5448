"""Reviewer set: hand-written realistic Accelerate configs (tests/validator/reviewer_configs.py),
valid ones of every kind and defective ones of every kind, each run through accelerate 1.15.0
(the oracle) and the validator.

* verdict: a validator error exactly when accelerate rejects the file (a reject that depends on
  the launch directory is skipped from the count; duplicate keys are errors by definition);
* "err:<rule>" entries: that rule is among the errors (the right rule names the mistake);
* "warn:<rule>" entries: accelerate accepts, and the validator warns with that rule;
* "ok" entries: accelerate accepts and the validator reports no error and no warning other than
  the ones listed in OK_WARNINGS (real silent drops, each proven elsewhere by a probe).
"""
from __future__ import annotations

from collections import Counter

DUP = ("yaml-duplicate-key", "json-duplicate-key")


def kind_of(expect):
    return expect.partition(":")[0]
# warnings an otherwise valid config may carry, with why they are real
OK_WARNINGS = {
    "acc-launch-ignored-key",  # rdzv_backend c10d from the file never reaches torchrun (flag default wins)
    "acc-mpirun-unknown-key",  # mpirun_ccl is written by old `accelerate config`, never read
    "acc-distributed-type-not-string",  # unquoted NO -> False
    "xf-precision-auto-off",  # the shared ds_config.json has bf16 "auto" and the YAML no precision
}

# errors for what fails after accelerate accepted the file, in deepspeed.initialize or at the first
# optimizer step (not reached by this oracle); each is run in the test named
ENGINE_TIME = {
    # offload_optimizer at ZeRO stage 0: tests/validator_ds/test_offload_stage0.py
    "acc-ds-offload-ignored-by-stage",
}


def test_reviewer_set(reviewer, bv, oracle, run_validator, workspace, capsys):
    counts = Counter()
    bad = []
    for cid, text, expect, name in reviewer:
        res = oracle[f"rev:{cid}"]
        try:
            fs = run_validator(text, name, workspace).findings
        except bv.core.InputError as e:  # exit 2: unreadable for accelerate too
            fs = [bv.core.Finding(rule="input", severity="error", message=str(e))]
        errors = {f.rule for f in fs if f.severity == "error"}
        warns = {f.rule for f in fs if f.severity == "warning"}
        verdict_errors = errors - set(DUP)
        if res["env_dependent"]:
            counts["launch-dir"] += 1
        elif res["verdict"] == "reject":
            counts["agree-reject" if verdict_errors else "missed"] += 1
            if not verdict_errors:
                bad.append(f"{cid}: MISSED {res['stage']}: {res['message']}")
        elif verdict_errors and verdict_errors <= ENGINE_TIME and kind_of(expect) == "err":
            counts["engine-time"] += 1
        else:
            counts["false-positive" if verdict_errors else "agree-accept"] += 1
            if verdict_errors:
                bad.append(f"{cid}: FALSE POSITIVE {sorted(verdict_errors)}")
        kind, _, rid = expect.partition(":")
        if kind == "err" and rid and rid not in errors:
            bad.append(f"{cid}: expected error {rid}, got {sorted(errors)}")
        if kind == "warn" and (rid not in warns or res["verdict"] != "accept"):
            bad.append(f"{cid}: expected accepted + warning {rid}, got {res['verdict']} {sorted(warns)}")
        if kind == "ok":
            if res["verdict"] != "accept":
                bad.append(f"{cid}: expected valid, accelerate says {res['stage']}: {res['message']}")
            extra = warns - OK_WARNINGS
            if extra:
                bad.append(f"{cid}: warnings on a valid config {sorted(extra)}")
    with capsys.disabled():
        print(f"\nreviewer set ({sum(counts.values())} configs) vs accelerate 1.15.0: {dict(sorted(counts.items()))}")
    assert not bad, "\n".join(bad)
    assert counts["agree-reject"] >= 40 and counts["agree-accept"] >= 40, counts


# (text, file name, rule, line, col, text the hint must contain): the finding points at the key the
# user must edit and the hint names the fix
POINTERS = [
    ("distributed_type: MULTI_GPU\nnum_process: 4\n", "config.yaml", "acc-unknown-top-level-key", 2, 1,
     "did you mean 'num_processes'"),
    ("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n  fsdp_offload_param: true\n",
     "config.yaml", "acc-fsdp-unknown-key", 5, 3, "did you mean 'fsdp_offload_params'"),
    ("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_cpu_ram_efficiency_effort: 1\n",
     "config.yaml", "acc-fsdp-unknown-key", 4, 3, "fsdp_cpu_ram_efficient_loading"),
    ("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config: {zero_stage: 2, offload_optimizer: cpu}\n",
     "config.yaml", "acc-ds-unknown-key", 3, 35, "offload_optimizer_device"),
    ("distributed_type: MULTI_GPU\nnum_processes: 2\ndeepspeed: ds_config.json\n", "config.yaml",
     "acc-unknown-top-level-key", 3, 1, "deepspeed_config_file"),
    ("distributed_type: MULTI_GPU\nnum_processes: 2\nnproc_per_node: 8\n", "config.yaml",
     "acc-unknown-top-level-key", 3, 1, "num_processes"),
    ("distributed_type: MULTI_GPU\nnum_processes: 2\nmain_process_address: 10.0.0.1\n", "config.yaml",
     "acc-unknown-top-level-key", 3, 1, "main_process_ip"),
    ("distributed_type: DEEPSPEED\nnum_processes: 2\nzero_stage: 2\n", "config.yaml",
     "acc-unknown-top-level-key", 3, 1, "deepspeed_config"),
    ("'distributed_type': multi_gpu\nnum_processes: 2\n", "config.yaml", "acc-invalid-distributed-type", 1, 1,
     "MULTI_GPU"),
    ('{\n  "distributed_type": "FSDP",\n  "num_processes": 2,\n  "fsdp_config": {"fsdp_verison": 2}\n}\n',
     "config.json", "acc-fsdp-unknown-key", 4, 19, "fsdp_version"),
    ("base: &b\n  fsdp_version: 2\ndistributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  <<: *b\n",
     "config.yaml", "acc-unknown-top-level-key", 1, 1, "base"),
    ("distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 16\nmain_process_ip: 10.0.0.1\n"
     "main_process_port: 029500\n", "config.yaml", "yaml-number-as-string", 5, 1, "29500"),
    ("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config: ds_config.json\n", "config.yaml",
     "acc-ds-config-not-mapping", 3, 1, "deepspeed_config_file: ds_config.json"),
    ("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
     "  fsdp_transformer_layer_cls_to_wrap: A, B\n", "config.yaml", "acc-fsdp-cls-to-wrap-spaces", 5, 3, "A,B"),
    ("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\nparallelism_config:\n"
     "  parallelism_config_ps_size: 2\n", "config.yaml", "acc-parallelism-unknown-key", 6, 3,
     "parallelism_config_sp_size"),
    ("distributed_type: MULTI_GPU\nnum_processes: 2\ndnamo_backend: INDUCTOR\n", "config.yaml",
     "acc-unknown-top-level-key", 3, 1, "dynamo_backend"),
    ("distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 16\nmachine_rank: 2\n"
     "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n", "config.yaml", "acc-machine-rank-out-of-range", 4, 1,
     "1 on the other"),
]


def test_findings_point_at_the_key_and_hint_the_fix(run_validator, workspace):
    bad = []
    for text, name, rid, line, col, hint in POINTERS:
        fs = [f for f in run_validator(text, name, workspace).findings if f.rule == rid]
        if not fs:
            bad.append(f"{rid}: not reported for {text!r}")
            continue
        f = fs[0]
        if (f.line, f.col) != (line, col) or hint not in (f.hint + " " + f.message):
            bad.append(f"{rid}: at {f.line}:{f.col} (want {line}:{col}); hint {f.hint!r} lacks {hint!r}")
    assert not bad, "\n".join(bad)


def test_misspelled_num_processes_is_one_error(run_validator, workspace):
    fs = run_validator("distributed_type: MULTI_GPU\nnum_proceses: 4\n", "config.yaml", workspace).findings
    assert sorted(f.rule for f in fs if f.severity == "error") == ["acc-unknown-top-level-key"]


HOSTILE = ([], {}, None, [1, "a"], {"a": 1}, [[]], 1.5, float("nan"), True, "", "x", -7)


def test_every_slot_of_the_valid_configs_survives_hostile_values(reviewer, bv, workspace):
    """Each key of each valid reviewer config (top level and nested), replaced in turn by a list,
    a mapping, null, NaN, a bool, ... : the validator never raises (a non-text fp8 backend once
    crashed a rule with 'unhashable type')."""
    import copy
    import json

    import yaml
    checked = 0
    for cid, text, expect, name in reviewer:
        if expect != "ok":
            continue
        try:
            base = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if not isinstance(base, dict):
            continue
        paths = [(k,) for k in base] + [(k, k2) for k, v in base.items() if isinstance(v, dict) for k2 in v]
        for path in paths:
            for bad in HOSTILE:
                d = copy.deepcopy(base)
                tgt = d if len(path) == 1 else d[path[0]]
                tgt[path[-1]] = bad
                doc = json.dumps(d, default=str) if name.endswith(".json") else \
                    yaml.dump(d, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
                try:
                    res = bv.cli.validate_text(doc, name, "auto", bv.core.Options(cwd=str(workspace)))
                except bv.core.InputError:
                    continue
                except Exception as e:  # noqa: BLE001
                    raise AssertionError(f"{cid} {path} = {bad!r}: {e!r}") from e
                assert all(f.message for f in res.findings)
                checked += 1
    assert checked >= 5000, checked


def test_hostile_variants_agree_with_accelerate(hostile, oracle, run_validator, workspace, bv, capsys):
    """500 reviewer configs with one slot made hostile (list, mapping, null, bool, '', 0, ...):
    a validator error exactly when accelerate rejects (launch-dir dependent rejects left out)."""
    counts = Counter()
    bad = []
    for i, text in enumerate(hostile):
        res = oracle[f"hos:{i}"]
        try:
            fs = run_validator(text, "config.yaml", workspace).findings
            errors = {f.rule for f in fs if f.severity == "error"} - set(DUP)
        except bv.core.InputError:
            errors = {"input"}
        if res["env_dependent"]:
            counts["launch-dir"] += 1
        elif (res["verdict"] == "reject") != bool(errors):
            counts["disagree"] += 1
            bad.append(f"{res['verdict']} {res['stage']}: {res['message']} | validator {sorted(errors)}\n{text}")
        else:
            counts["agree"] += 1
    with capsys.disabled():
        print(f"\nhostile variants vs accelerate 1.15.0: {dict(sorted(counts.items()))}")
    assert not bad, "\n".join(bad[:5])
    assert counts["agree"] >= 480, counts
