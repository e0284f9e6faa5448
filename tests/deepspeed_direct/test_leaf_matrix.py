"""zero3-leaf-modules.md and zero3-leaf-module-config.md are what deepspeed 0.19.8 with transformers 5.25.0
really do: _leaf_matrix.py ran every leaf_module variant on the CPU accelerator and committed the raw results (leaf_matrix_capture.json);
the pages' generated blocks must equal the rendering of that capture word for word, the source facts are
re-read from the installed packages, and the default case is rerun live (one child process, a few seconds).
set 8 s8-ds-f01: MoE blocks are ZeRO-3 leaf modules by default since deepspeed 0.18.0."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _leaf_matrix as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_page_is_the_rendered_capture(data):
    rendered = gen.render(data)
    gb.assert_page_is_rendered({n: gen.page_of(n) for n in rendered}, rendered)


def test_lookup_history_file_is_the_rendered_capture(data):
    assert gen.HISTORY_JSON.read_text(encoding="utf-8") == gen.history_json(data)


def test_capture_covers_every_case(data):
    assert {c["id"] for c in gen.cases()} == set(data["runs"])


def test_source_facts_are_the_installed_packages(data):
    got = gen.source_facts()
    assert got == data["source"]
    assert got["defaults"]["DEFAULT_LEAF_MODULE_CLASSES"] == [
        "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
        "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
        "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"]
    assert "mixtral" in got["fused"] and got["per_expert"] == []


def test_mismatched_expert_gathers_fail_and_the_leaf_fixes_them(data):
    """Captured 2-rank runs: per-expert submodules entered differently per rank break ZeRO-3 (the
    module-order check at the next forward, or gloo's size check); the leaf block finishes both steps."""
    h = data["hang"]
    assert {k for k in h} == {f"{leaf}|{routing}" for leaf, routing, _ in gen.HANG_CASES}
    assert [r["steps"] for r in h["0|one"]] == [1, 1]
    assert h["0|one"][1]["error"].startswith("RuntimeError: Detected a disagreement on list contents")
    assert [r["steps"] for r in h["0|uneven"]] == [0, 0] and "size" in h["0|uneven"][1]["error"]
    assert all(r["finished"] and r["steps"] == 2 and not r["error"]
               for k in ("1|one", "1|uneven", "0|mixtral") for r in h[k])   # fused Mixtral needs no leaf


def test_history_current_column_is_names_json(data):
    names = json.loads(gen.NAMES.read_text(encoding="utf-8"))
    d = {e["n"]: e["d"] for e in names["entries"] if e["s"] == "deepspeed-config"}
    rows = data["history"]["rows"]
    assert rows and all(d[r["key"]] == r["names_d"] for r in rows)
    # the default that changed (not just appeared): pinned host memory for offload, since v0.19.5
    by = {r["key"]: r for r in rows}
    pin = by["zero_optimization.offload_optimizer.pin_memory"]
    assert (pin["names_d"], pin["before"], pin["since"]) == ("True", "False", "v0.19.5")
    igu = by["bf16.immediate_grad_update"]   # flipped twice: the legacy constants fallback is read
    assert (igu["since"], igu["before"], igu["earlier"]) == ("v0.17.1", "True", ["v0.16.5: False -> True"])
    clip = by["gradient_clipping"]
    assert (clip["names_d"], clip["before"], clip["since"]) == ("1.0", "0.0", "v0.19.3")


def test_live_cases_match_the_capture(data, tmp_path):
    got = gen.run_cases([c for c in gen.cases() if c["id"] in gen.LIVE], ext=tmp_path / "ext")
    for cid in gen.LIVE:
        assert got[cid] == data["runs"][cid], cid
    default = got["mixtral default"]
    empty = data["runs"]["classes empty"]
    # no leaf_module key: both Mixtral blocks are leaves and all experts are gathered on entry
    assert default["leaves"] == ["MixtralSparseMoeBlock"] and default["n_leaves"] == 2 and default["gathered"]
    # (capture) classes: [] removes the default, with the "did not match" warning
    assert empty["n_leaves"] == 0 and empty["gathered"] is False and "did not match any modules" in empty["warnings"][0]
    # (capture) names alone keeps the default classes (union); unset before initialize is undone by the
    # default config; a subclass is matched by the class object (isinstance), not by the default strings
    runs = data["runs"]
    assert runs["names"]["n_leaves"] == 2 and runs["unset then default"]["n_leaves"] == 2
    assert runs["subclass default"]["n_leaves"] == 0 and runs["subclass set type"]["n_leaves"] == 2
    assert runs["set then classes empty"]["n_leaves"] == 2 and runs["stage 2 default"]["n_leaves"] == 2


def test_lookup_shows_the_change_and_survives_a_bad_history_file(tmp_path, monkeypatch):
    sys.path.insert(0, str(gen.ROOT / "scripts"))
    import lookup
    clip = [e for e in lookup.load(lookup.DATA)["entries"] if e["s"] == "deepspeed-config" and e["n"] == "gradient_clipping"]
    assert clip[0]["changed"].startswith("0.0 before v0.19.3")
    for text in (None, "{not json", "[1, 2]", '{"changed": {"gradient_clipping": 5}}',
                 '{"changed": ["gradient_clipping"]}'):
        bad = tmp_path / "h.json"
        if text is None:
            bad = tmp_path / "absent.json"
        else:
            bad.write_text(text, encoding="utf-8")
        monkeypatch.setattr(lookup, "HISTORY", bad)
        entries = lookup.load(lookup.DATA)["entries"]
        assert not any("changed" in e for e in entries), text
