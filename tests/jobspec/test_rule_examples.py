"""Every jobspec rule's failing example fires that rule and its passing example fires no error
(and not that rule)."""
from __future__ import annotations

import pytest

from backend_validator import core, docs
from backend_validator.jobspec.check import check_job_spec
from backend_validator.rules import load_family

load_family("jobspec")
RULES = sorted((r for r in core.REGISTRY.values() if r.family == "jobspec"), key=lambda r: r.id)


def examples():
    out = []
    for r in RULES:
        _, ex = docs.parse_doc(r.doc)
        assert "Fails" in ex and "Passes" in ex, r.id
        for label in ("Fails", "Passes"):
            out.append((r.id, label, ex[label][0], ex[label][1]))
    return out


def test_every_rule_has_examples():
    assert len(RULES) >= 14
    assert len(examples()) == 2 * len(RULES)


@pytest.mark.parametrize("rid,label,lang,text", examples(), ids=lambda x: x if isinstance(x, str) and len(x) < 50 else "")
def test_example(rid, label, lang, text, tmp_path):
    p = tmp_path / ("job.yaml" if lang == "yaml" else "job.sbatch")
    p.write_text(text)
    res = check_job_spec(str(p), "job", cwd=str(tmp_path))
    fired = {f.rule for f in res.findings}
    if label == "Fails":
        assert rid in fired, (rid, [(f.rule, f.message) for f in res.findings])
        f = next(f for f in res.findings if f.rule == rid)
        assert f.file == "job" and f.line is not None and f.col is not None, f
    else:
        assert rid not in fired, (rid, [(f.rule, f.message) for f in res.findings])
        assert not [f for f in res.findings if f.severity == "error"], res.findings
