"""Differential test: 600 generated Accelerate configs (fixed seed; 400 built from every block with
valid and invalid values mixed, 200 hand-written YAML texts full of YAML 1.1 traps) - the validator
reports an error exactly when accelerate 1.15.0 (the oracle) rejects the config for a reason the
file decides, plus 21 syntax edge cases (BOM, CRLF, tabs, merge keys, tags, NaN, JSON comments,
several documents). The duplicate-key rules are left out: errors by definition that accelerate
accepts (the later value wins)."""
from __future__ import annotations

from collections import Counter


def test_generated_configs_agree_with_accelerate(generated, oracle, run_validator, workspace, capsys, bv):
    counts = Counter()
    bad = []
    for i, (text, name) in enumerate(generated):
        res = oracle[f"gen:{i}"]
        try:
            v = run_validator(text, name, workspace)
            errors = sorted({f.rule for f in v.findings if f.severity == "error"
                             and f.rule not in ("yaml-duplicate-key", "json-duplicate-key")})
        except bv.core.InputError as e:  # exit 2: unreadable for accelerate too
            errors = [f"input: {e}"]
        if res["env_dependent"]:
            counts["launch-dir"] += 1
        elif res["verdict"] == "reject":
            counts["agree-reject" if errors else "missed"] += 1
            if not errors:
                bad.append(f"MISSED ({res['stage']}: {res['error']}: {res['message']})\n{text}")
        else:
            counts["false-positive" if errors else "agree-accept"] += 1
            if errors:
                bad.append(f"FALSE POSITIVE {errors}\n{text}")
    with capsys.disabled():
        print(f"\ngenerated configs vs accelerate 1.15.0: {dict(sorted(counts.items()))}")
    assert not bad, "\n".join(bad[:5])
    assert counts["agree-reject"] >= 200 and counts["agree-accept"] >= 100, counts
