"""Every Accelerate / parse-level rule's docstring examples, checked twice:

* by the validator: the Fails example triggers the rule, the Passes example does not and has no error
  (or only errors that accelerate also rejects for, listed in PASSES_ALSO_FAIL);
* by accelerate 1.15.0 itself (the oracle): an error rule's Fails example is rejected and its Passes
  example accepted; a warning rule's Fails example is accepted but the value is lost or changed
  (PROBES says what was lost, read from the oracle's loaded config / launch args / env / plugins).
"""
from __future__ import annotations

import re

import pytest

KEBAB = re.compile(r"^(acc|yaml|input)-[a-z0-9]+(-[a-z0-9]+)*$")


def _env(r):
    return r.get("env") or {}


def _pl(r, name):
    return (r.get("plugins") or {}).get(name) or {}


# rule -> predicate on the oracle result of its Fails example: "the value was lost or changed"
PROBES = {
    "acc-distributed-type-not-string": lambda r: not isinstance(r["loaded"]["distributed_type"], str),
    "acc-multinode-ip-unset": lambda r: str(r["args"].get("rdzv_endpoint", "")).startswith("None:"),
    "acc-dynamo-ignored-under-deepspeed": lambda r: "ACCELERATE_DYNAMO_BACKEND" not in _env(r)
    and _pl(r, "dynamo")["backend"] == "NO",
    "acc-dynamo-unknown-key": lambda r: _pl(r, "dynamo")["fullgraph"] is False,
    "acc-launch-ignored-key": lambda r: r["args"]["rdzv_backend"] == "static",
    "acc-block-not-mapping": lambda r: _pl(r, "fsdp")["fsdp_version"] == 1,
    "acc-fsdp-cls-to-wrap-spaces": lambda r: " LlamaMLP" in _pl(r, "fsdp")["transformer_cls_names_to_wrap"],
    "acc-machine-rank-out-of-range": lambda r: int(r["args"]["node_rank"]) >= int(r["args"]["nnodes"]),
    "acc-num-processes-ignored": lambda r: r.get("launcher") == "simple" and "torchrun" not in str(r.get("cmd"))
    and len(r.get("cmd") or []) == 2,
    "acc-fp8-key-other-backend": lambda r: _pl(r, "fp8")["backend"] == "AO" and "fp8_format" not in _pl(r, "fp8")
    and _env(r).get("ACCELERATE_FP8_FORMAT") == "E4M3",
    "acc-fsdp-wrap-key-ignored": lambda r: _pl(r, "fsdp")["auto_wrap_policy"] is None
    and _pl(r, "fsdp")["transformer_cls_names_to_wrap"] is None,
    "acc-dynamo-settings-without-backend": lambda r: _pl(r, "dynamo")["backend"] == "NO"
    and _pl(r, "dynamo")["mode"] == "max-autotune",
    "acc-block-ignored": lambda r: "ACCELERATE_USE_FSDP" not in _env(r) and not _pl(r, "fsdp"),
    "acc-use-cpu-ignored": lambda r: _env(r).get("ACCELERATE_USE_CPU") != "True",
    "acc-multi-cpu-single-process": lambda r: "mpirun" not in (r.get("cmd") or []),
    "acc-mpirun-unknown-key": lambda r: "mpirun" not in (r.get("cmd") or []),
    "acc-megatron-unknown-key": lambda r: _pl(r, "megatron")["tp_degree"] == 1,
    "acc-fsdp-unknown-key": lambda r: _pl(r, "fsdp")["backward_prefetch"] is None,
    "acc-fsdp1-reshard-after-forward-ignored": lambda r: _pl(r, "fsdp")["sharding_strategy"] == "FULL_SHARD",
    "acc-fsdp2-key-ignored": lambda r: _env(r).get("FSDP_SHARDING_STRATEGY") == "SHARD_GRAD_OP"
    and _pl(r, "fsdp")["sharding_strategy"] is None,
    "acc-ds-unknown-key": lambda r: _pl(r, "deepspeed")["zero_stage"] == 2,
    "acc-ds-zero3-save-not-true": lambda r: _pl(r, "deepspeed")["zero3_save_16bit_model"] is False,
    "acc-ds-zero3-init-not-stage3": lambda r: _pl(r, "deepspeed")["zero3_init_flag"] is False,
    "acc-ds-nvme-path-dropped": lambda r: _pl(r, "deepspeed")["offload_param_nvme_path"] == "none",
    "acc-ds-offload-ignored-by-stage": lambda r: _pl(r, "deepspeed")["zero_model"]["offload_param"] == "cpu"
    and _pl(r, "deepspeed")["zero_model"]["stage"] == 2,
    "acc-ds-hostfile-missing": lambda r: "None" in (r.get("cmd") or [])[
        (r.get("cmd") or []).index("--hostfile") + 1:][:1],
    "acc-parallelism-unknown-key": lambda r: _pl(r, "parallelism")["dp_shard_size"] == 1,
    "acc-parallelism-ignored": lambda r: "ACCELERATE_USE_PARALLELISM_CONFIG" not in _env(r),
    "acc-fp8-unknown-key": lambda r: _pl(r, "fp8")["amax_history_len"] == 1024,
    "acc-fp8-config-ignored": lambda r: not any(k.startswith("ACCELERATE_FP8_") for k in _env(r)),
    "acc-gpu-ids-fewer-than-processes": lambda r: len(_env(r)["CUDA_VISIBLE_DEVICES"].split(","))
    < int(r["args"]["nproc_per_node"]),
    "acc-num-processes-not-divisible": lambda r: int(r["args"]["nproc_per_node"]) * int(r["args"]["nnodes"])
    != r["loaded"]["num_processes"],
    "acc-false-string-is-truthy": lambda r: _env(r).get("ACCELERATE_DEBUG_MODE") == "true",
    "acc-fsdp-cls-to-wrap-list": lambda r: _pl(r, "fsdp")["transformer_cls_names_to_wrap"]
    == ["['LlamaDecoderLayer']"],
    "acc-dynamo-config-replaced": lambda r: _pl(r, "dynamo")["mode"] == "default",
    "yaml-bool-word": lambda r: r["raw"]["main_process_ip"] is True,
    "yaml-number-as-string": lambda r: r["raw"]["fsdp_config"]["fsdp_min_num_params"] == "1e8",
    "yaml-1-1-integer": lambda r: r["raw"]["main_process_port"] == 8,
    # an error by the definition; accelerate (safe_load) accepts and keeps the later value
    "yaml-duplicate-key": lambda r: r["raw"]["num_processes"] == 8,
}
# error rules whose Fails example accelerate accepts (the finding is about silently lost data)
ERROR_ACCEPTED_BY_ACCELERATE = {"yaml-duplicate-key"}
# rules without a reachable example (reported instead of a crash)
NO_ORACLE = {"input-too-complex"}
# Passes examples that still hit another error rule, which accelerate also rejects
PASSES_ALSO_FAIL = {
    "acc-sagemaker-distributed-type-no": {"acc-sagemaker-launch-broken"},
    "acc-sagemaker-missing-required": {"acc-sagemaker-launch-broken"},
}
# warning rules whose Fails example accelerate rejects later for another reason the file decides
WARNING_ALSO_REJECTED = {"yaml-number-as-string"}


def _ids(rule_examples):
    return sorted({r.id for r, *_ in rule_examples})


def test_every_own_rule_has_metadata_and_both_examples(bv, rule_examples, helpers):
    own = [r for r in bv.core.REGISTRY.values() if helpers.own_rule(r.id)]
    assert len(own) >= 60, len(own)
    labels = {}
    for r, label, _lang, _text in rule_examples:
        labels.setdefault(r.id, set()).add(label)
    for r in own:
        assert KEBAB.match(r.id), r.id
        assert r.summary and "\n" not in r.summary, r.id
        assert r.source and ("accelerate/" in r.source or "yaml/" in r.source or "deepspeed/" in r.source
                             or "torch/" in r.source or r.id in NO_ORACLE), r.id
        assert labels.get(r.id) == {"Fails", "Passes"}, f"{r.id}: docstring needs Fails: and Passes: blocks"
    assert set(PROBES) <= {r.id for r in own}


def _findings(res):
    return [(f.rule, f.severity) for f in res.findings]


def test_examples_against_validator(rule_examples, run_validator, workspace, helpers):
    problems = []
    for r, label, lang, text in rule_examples:
        res = run_validator(text, helpers.example_name(lang), workspace,
                            check_imports=(r.id == "acc-missing-package"))
        fired = [f for f in res.findings if f.rule == r.id]
        errors = {f.rule for f in res.findings if f.severity == "error"}
        if label == "Fails" and r.id not in NO_ORACLE and not fired:
            problems.append(f"{r.id}: Fails example not reported ({_findings(res)})")
        if label == "Passes":
            if fired:
                problems.append(f"{r.id}: Passes example reported: {fired[0].message}")
            extra = errors - PASSES_ALSO_FAIL.get(r.id, set())
            if extra:
                problems.append(f"{r.id}: Passes example has other errors {sorted(extra)}")
    assert not problems, "\n".join(problems)


def test_examples_against_accelerate(rule_examples, oracle):
    problems = []
    checked = 0
    for r, label, _lang, _text in rule_examples:
        if r.id in NO_ORACLE or r.severity == "info":
            continue
        res = oracle[f"{r.id}:{label}"]
        verdict = f"{res['verdict']} ({res['stage']}: {res['error']}: {res['message']})"
        if label == "Passes":
            expect_reject = bool(PASSES_ALSO_FAIL.get(r.id))
            if (res["verdict"] == "reject") != expect_reject:
                problems.append(f"{r.id}: Passes example -> accelerate {verdict}")
        elif r.severity == "error" and r.id not in ERROR_ACCEPTED_BY_ACCELERATE:
            if res["verdict"] != "reject" or res["env_dependent"]:
                problems.append(f"{r.id}: Fails example accepted by accelerate")
        else:  # warnings (and errors about silently lost data): value lost or changed
            if res["verdict"] == "reject" and r.id not in WARNING_ALSO_REJECTED:
                problems.append(f"{r.id}: Fails example rejected ({verdict}); a warning expects acceptance")
                continue
            probe = PROBES.get(r.id)
            if probe is None:
                problems.append(f"{r.id}: no probe says which value is lost")
            else:
                try:
                    ok = probe(res)
                except Exception as e:  # noqa: BLE001
                    ok = False
                    problems.append(f"{r.id}: probe failed on oracle result: {e!r} {verdict}")
                    continue
                if not ok:
                    problems.append(f"{r.id}: accelerate kept the value (probe false): {verdict}")
        checked += 1
    assert checked >= 100
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rid", ["acc-num-processes-required", "acc-invalid-mixed-precision",
                                 "acc-fsdp-ram-efficient-needs-sync", "acc-ds-config-file-conflict"])
def test_oracle_reject_stage_matches_rule_source(rid, oracle, bv):
    """Spot-check that accelerate rejects the Fails example where the rule's source says."""
    stage = oracle[f"{rid}:Fails"]["stage"]
    src = bv.core.REGISTRY[rid].source
    expect = {"commands/launch.py": "launch", "utils/launch.py": "env", "dataclasses.py": "plugins"}
    want = next(v for k, v in expect.items() if k in src)
    assert stage == want, (rid, stage, src)
