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
# warnings an otherwise valid config may carry, with why they are real
OK_WARNINGS = {
    "acc-launch-ignored-key",  # rdzv_backend c10d from the file never reaches torchrun (flag default wins)
    "acc-mpirun-unknown-key",  # mpirun_ccl is written by old `accelerate config`, never read
    "acc-distributed-type-not-string",  # unquoted NO -> False
    "xf-precision-auto-off",  # the shared ds_config.json has bf16 "auto" and the YAML no precision
}


def test_reviewer_set(reviewer, bv, oracle, run_validator, workspace, capsys):
    counts = Counter()
    bad = []
    for cid, text, expect in reviewer:
        res = oracle[f"rev:{cid}"]
        try:
            fs = run_validator(text, "config.yaml", workspace).findings
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
