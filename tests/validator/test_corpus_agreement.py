"""Corpus agreement: the validator's error verdict vs accelerate 1.15.0's verdict (the oracle) for
every config in the corpus's accelerate/ folder and every accelerate YAML in its broken/ folder
(opt-in corpus layer: PDT_CORPUS).

Categories:
  agree-accept      no validator error, accelerate accepts
  agree-reject      validator error, accelerate rejects for a reason the file decides
  launch-dir        accelerate rejects only because deepspeed_config_file does not exist in the
                    directory the oracle launched from (depends on where `accelerate launch` runs)
  false-positive    validator error, accelerate accepts          (must be 0)
  missed            accelerate rejects, no validator error         (must be 0)
"""
from __future__ import annotations

from collections import Counter


def _classify(has_error, res):
    if res["verdict"] == "reject" and res["env_dependent"]:
        return "launch-dir"
    if res["verdict"] == "reject":
        return "agree-reject" if has_error else "missed"
    return "false-positive" if has_error else "agree-accept"


def test_corpus_agreement(corpus_oracle, corpus_dir, run_validator, helpers, capsys):
    rows = []
    for p in helpers.corpus_files(corpus_dir):
        res = corpus_oracle[f"corpus:{p.parent.name}/{p.name}"]
        try:
            text = p.read_text(encoding="utf-8")
            vres = run_validator(text, p.name, p.parent)
            errors = sorted({f.rule for f in vres.findings if f.severity == "error"})
            warnings = sorted({f.rule for f in vres.findings if f.severity == "warning"})
        except Exception as e:  # InputError: unparseable -> counts as an error verdict
            errors, warnings = [f"input-error: {e}"], []
        cat = _classify(bool(errors), res)
        rows.append((cat, f"{p.parent.name}/{p.name}", res, errors, warnings))

    counts = Counter(r[0] for r in rows)
    lines = ["", "Validator vs accelerate 1.15.0 on the shared corpus "
             f"({len(rows)} configs: accelerate/ + broken/*.yaml)",
             f"{'category':<16} {'count':>5}"]
    for cat in ("agree-accept", "agree-reject", "launch-dir", "false-positive", "missed"):
        lines.append(f"{cat:<16} {counts.get(cat, 0):>5}")
    lines.append("rejections (file, accelerate stage: error, validator error rules):")
    for cat, name, res, errors, _w in rows:
        if res["verdict"] == "reject" or errors:
            msg = (res["message"] or "")[:70]
            lines.append(f"  [{cat}] {name[:80]}\n      accelerate: {res['stage']}: {res['error']}: {msg}\n"
                         f"      validator: {', '.join(errors) or '-'}")
    warned = Counter(w for *_x, ws in rows for w in ws)
    lines.append("warnings on accepted configs (rule: files): " +
                 ", ".join(f"{k}: {v}" for k, v in sorted(warned.items())))
    with capsys.disabled():
        print("\n".join(lines))

    bad = [(c, n, r["stage"], r["message"], e) for c, n, r, e, _w in rows if c in ("false-positive", "missed")]
    assert not bad, "\n".join(map(str, bad))
    assert counts["agree-reject"] >= 5 and counts["agree-accept"] >= 60, counts
