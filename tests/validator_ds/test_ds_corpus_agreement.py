"""Agreement table: validator vs the real consumer on every DeepSpeed JSON of the shared corpus
(corpus/deepspeed and the .json/.conf files of corpus/broken), world size 1.

Rows: the consumer the validator assumes by itself ("auto") and each consumer forced. A
validator error where the consumer accepts is a false error and fails the test; a rejection
the validator misses is counted in the table and also fails (the corpus is part of the proof).
"""
from __future__ import annotations

from ds_support import corpus_ds_files, validate_json


def _row(fs, oracle):
    v_err = fs is None or any(f.severity == "error" for f in fs)
    o_acc = oracle["verdict"] == "accept"
    if v_err and not o_acc:
        return "both-reject"
    if not v_err and o_acc:
        return "both-accept"
    return "false-error" if v_err else "missed"


def test_ds_corpus_agreement(corpus_dir, ds_corpus_oracle, capsys):
    from backend_validator.core import InputError
    files = corpus_ds_files(corpus_dir)
    assert len(files) >= 100
    table = {}
    bad = []
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        for forced in (None, "deepspeed", "accelerate", "transformers"):
            try:
                fs, cons = validate_json(text, consumer=forced, world_size=1, name=p.name)
            except InputError:
                fs, cons = None, forced or "deepspeed"
            o = ds_corpus_oracle[f"corpus|{p.name}|{cons}"]
            cell = _row(fs, o)
            table.setdefault(forced or "auto", {}).setdefault(cons, {}).setdefault(cell, 0)
            table[forced or "auto"][cons][cell] += 1
            if cell in ("false-error", "missed"):
                bad.append((forced or "auto", cons, p.name, cell, sorted({f.rule for f in fs or []
                                                                          if f.severity == "error"}),
                            o.get("message", "")[:120]))
    lines = ["", "DeepSpeed corpus agreement (validator vs real consumer, world size 1)",
             f"{'consumer':<26}{'files':>6}{'both-accept':>13}{'both-reject':>13}{'false-error':>13}{'missed':>8}"]
    for mode, per in table.items():
        for cons, cells in sorted(per.items()):
            label = f"{mode} -> {cons}" if mode == "auto" else mode
            lines.append(f"{label:<26}{sum(cells.values()):>6}{cells.get('both-accept', 0):>13}"
                         f"{cells.get('both-reject', 0):>13}{cells.get('false-error', 0):>13}"
                         f"{cells.get('missed', 0):>8}")
    with capsys.disabled():
        print("\n".join(lines))
        for b in bad:
            print("  DISAGREE", *b)
    assert not bad, bad


def test_auto_consumer_choice_is_stated(corpus_dir):
    """Standalone files: "auto" values -> transformers, none -> deepspeed, and the reason says so."""
    from backend_validator import deepspeed, loader_json
    seen = set()
    for p in corpus_ds_files(corpus_dir):
        try:
            doc = loader_json.load_path(str(p))
        except Exception:  # noqa: BLE001 - unparseable broken files are covered elsewhere
            continue
        cons, why = deepspeed.resolve_consumer(doc)
        assert cons == ("transformers" if deepspeed.has_auto(doc.data) and any(
            d not in deepspeed.DEEPSPEED_NATIVE_AUTO for _, d in deepspeed.iter_auto(doc.data)) else "deepspeed")
        assert why and ("auto" in why)
        seen.add(cons)
        assert deepspeed.resolve_consumer(doc, via_accelerate=True)[0] == "accelerate"
        assert deepspeed.resolve_consumer(doc, "deepspeed", True) == ("deepspeed", "given with --consumer")
    assert seen == {"deepspeed", "transformers"}
