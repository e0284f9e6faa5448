"""The failure-triage catalog's transformers entries say which versions print their message.

Each entry's message is looked up in the installed transformers 5.25.0 sources (the pinned test
environment, requirements-test.txt): an entry whose message is gone must carry an upper bound in
``versions`` ("gone by 5.25.0" or a ``<`` bound), and an entry whose message is still there must
not claim it is gone. Entries whose text does not come from transformers' own sources are listed
with the reason. Presence in 4.57.1 is cited (the wheel's sources), not run here.

The one message that moved is also raised for real: with a ZeRO-3 ``HfDeepSpeedConfig`` alive,
``check_and_set_device_map`` raises the 5.x wording, and the catalog entry's pattern matches it.
"""
from __future__ import annotations

import gc
import importlib.util
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "sub-skills/failure-triage/catalog/transformers.yaml"

# text produced outside transformers' Python sources, with why
NOT_FROM_TRANSFORMERS = {
    "transformers-accelerate-too-new-dispatch-batches": "a Python TypeError raised by accelerate 1.x's Accelerator.__init__",
    "tokenizers-fork-parallelism-warning": "printed by the tokenizers package (Rust)",
    "safetensors-shared-tensors-refused": "raised by the safetensors package (safetensors/torch.py save_file)",
}


def _entries() -> list[dict]:
    return yaml.safe_load(CATALOG.read_text(encoding="utf-8"))


def _installed_sources() -> str:
    spec = importlib.util.find_spec("transformers")
    assert spec is not None and spec.submodule_search_locations, "transformers is in requirements-test.txt"
    root = Path(list(spec.submodule_search_locations)[0])
    return "\n".join(p.read_text(encoding="utf-8", errors="ignore") for p in root.rglob("*.py"))


def _longest_literal(pattern: str) -> str:
    """The longest run of the pattern that is plain text (regex syntax splits runs)."""
    runs, cur, i = [], "", 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt.isalnum():  # \S, \d, \b ...: syntax, ends the run
                runs.append(cur)
                cur = ""
            else:
                cur += nxt
            i += 2
            continue
        if ch in "()[]{}?*+|^$.":
            runs.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    runs.append(cur)
    return max(runs, key=len)


def test_longest_literal_splits_on_regex_syntax():
    assert _longest_literal(r"Some weights of \S+ were not initialized from") == " were not initialized from"
    assert _longest_literal(r"a \(b\) (?:x|yy)z") == "a (b) "


def test_versions_bound_matches_the_installed_sources():
    src = _installed_sources()
    checked = 0
    for e in _entries():
        if e["id"] in NOT_FROM_TRANSFORMERS:
            continue
        texts = [w["text"] for w in e.get("wordings", [])] or [_longest_literal(e["pattern"])]
        present = any(t.rstrip(".") in src for t in texts)
        bounded = "gone by 5.25.0" in e["versions"] or "<" in e["versions"]
        if not present:
            assert bounded, f"{e['id']}: message absent from transformers 5.25.0 but versions={e['versions']!r}"
        else:
            assert "gone by" not in e["versions"], f"{e['id']}: message still in 5.25.0 but versions={e['versions']!r}"
        checked += 1
    assert checked >= 14


def test_zero3_device_map_refusal_matches_the_catalog(monkeypatch):
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    from transformers.integrations.accelerate import check_and_set_device_map
    from transformers.integrations.deepspeed import HfDeepSpeedConfig, is_deepspeed_zero3_enabled

    entry = next(e for e in _entries() if e["id"] == "transformers-zero3-low-cpu-mem-usage")
    cfg = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    try:
        assert is_deepspeed_zero3_enabled()
        try:
            check_and_set_device_map("cpu")
        except ValueError as exc:
            msg = str(exc)
        else:
            raise AssertionError("a device_map under ZeRO-3 was accepted")
    finally:
        del cfg
        gc.collect()
    assert re.search(entry["pattern"], msg), msg
    assert not is_deepspeed_zero3_enabled()  # the weak reference died with the config
    # without ZeRO-3 the same device map is accepted
    assert check_and_set_device_map("cpu") == {"": __import__("torch").device("cpu")}
