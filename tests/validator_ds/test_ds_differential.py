"""Differential test: validator error <=> the real consumer rejects.

* hand-written edge cases (ds_edge_cases.EDGE / HJSON_EDGE): must agree, both ways;
* 150 seeded mutations of corpus configs, rotating the three consumers: a validator error on a
  mutant the consumer fully ran (engine "ran", or rejected) must agree; where the oracle could
  not run the engine (offload needs a JIT-built CPU Adam, CPU-only limits) the validator is
  allowed to be stricter, and misses are counted. The table is printed.
"""
from __future__ import annotations

import json

import ds_edge_cases
from ds_support import mutation_jobs, validate_json


def _verdict(job):
    from backend_validator.core import InputError
    try:
        fs, _ = validate_json(job["text"], consumer=job["consumer"], world_size=job["world_size"])
    except InputError:
        return True, ["input-error"]
    errs = sorted({f.rule for f in fs if f.severity == "error"})
    return bool(errs), errs


def test_edge_cases_agree(ds_oracle):
    bad = []
    for job in ds_edge_cases.edge_jobs():
        o = ds_oracle[job["id"]]
        v_err, rules = _verdict(job)
        if v_err != (o["verdict"] == "reject"):
            bad.append((job["id"], o["verdict"], o.get("message", "")[:120], rules))
    assert len(ds_edge_cases.EDGE) + len(ds_edge_cases.HJSON_EDGE) >= 80
    assert not bad, bad


def test_mutations(ds_corpus_oracle, corpus_dir, capsys):
    jobs = mutation_jobs(corpus_dir)
    counts = {"agree": 0, "stricter-engine-not-run": 0, "missed": 0}
    false_errors, missed = [], []
    for job in jobs:
        o = ds_corpus_oracle[job["id"]]
        v_err, rules = _verdict(job)
        o_rej = o["verdict"] == "reject"
        if v_err == o_rej:
            counts["agree"] += 1
        elif v_err:
            if o.get("engine") == "ran":
                false_errors.append((job["id"], job["consumer"], rules, job["text"][:200]))
            else:
                counts["stricter-engine-not-run"] += 1
        else:
            counts["missed"] += 1
            missed.append((job["id"], job["consumer"], o.get("stage"), o.get("message", "")[:100]))
    with capsys.disabled():
        print(f"\nDeepSpeed mutation differential ({len(jobs)} mutants): {json.dumps(counts)}")
        for m in missed:
            print("  missed", *m)
    assert not false_errors, false_errors
    assert counts["agree"] >= 0.9 * len(jobs)
