"""deepspeed-engine-methods.md is what deepspeed 0.19.8 really does: _ds_methods.py ran every row on the CPU
accelerator and committed the raw results (ds_methods_capture.json); the page's generated blocks must equal
the rendering of that capture word for word, and two rows (ZeRO-2 bf16, BF16_Optimizer) are rerun live in
one child process (~5 s). A full rerun is `_ds_methods.py --check`."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_methods as gen  # noqa: E402

LIVE = ["z2|bf16|client AdamW", "bf16 z1 grad_accum fp32"]


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_page_is_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.PAGE, gen.render(data))


def test_capture_covers_every_case(data):
    assert {c["id"] for c in gen.cases()} == set(data)


def test_live_rows_match_the_capture(data, tmp_path):
    got = gen.run([c for c in gen.cases() if c["id"] in LIVE], tmp_path, ext=tmp_path / "ext")
    for cid in LIVE:
        assert got[cid] == data[cid], cid


def test_key_rows(data):
    """The captured runs the page's rules (and the ledger claims) rest on."""
    full = ["hp_params", "lp_grads", "lp_params", "optim_states"]
    for s in (1, 2):
        for p in ("fp32", "bf16"):
            for o in ("client AdamW", "Adam"):
                r = data[f"z{s}|{p}|{o}"]
                assert r["init"]["optimizer"] == "DeepSpeedZeroOptimizer"
                assert r["offload_states()"]["value"] == full
                assert r["offload_states(include=[optim_states])"]["value"] == ["optim_states"]
                assert r["reload_states()"]["value"] == {"left": [], "weights_same": True}
                assert r["step after reload"]["ok"]
            assert data[f"z{s}|{p}|Adam cpu"]["offload_states()"]["value"] == ["lp_grads", "lp_params"]
    for p in ("fp32", "bf16"):
        assert data[f"z0|{p}|client AdamW"]["offload_states()"]["error"] == "AttributeError"
        assert data[f"z3|{p}|Adam"]["offload_states()"]["value"] == ["contiguous_grad_buffer"] + full
        assert data[f"z3|{p}|Adam cpu"]["offload_states()"]["value"] == ["contiguous_grad_buffer", "lp_params"]
        assert data[f"z3|{p}|client AdamW"]["offload_states()"]["message"] == \
            "Offloading is supported only for DeepSpeed FusedAdam."
        for s in (0, 1, 2, 3):
            r = data[f"z{s}|{p}|Adam"]
            assert r["offload_states(device=nvme)"]["error"] == "ValueError"
            assert r["offload_states(device=none)"]["value"]["warns"] == ["No device specified for offloading states."]
            assert r["no_sync"]["ok"] is (s < 2)
            assert r["set_gradient_accumulation_boundary(False)"]["value"] is False
            assert (r["safe_get_full_fp32_param"]["value"] is None) is (s == 0)
            assert r["save_16bit_model"]["value"]["returned"] is (s < 3)
    bf = data["bf16 z1 grad_accum fp32"]
    assert bf["init"]["optimizer"] == "BF16_Optimizer" and bf["offload_states()"]["error"] == "AttributeError"
    assert data["bf16 z1 grad_accum fp32 offload"]["init"]["optimizer"] == "DeepSpeedZeroOptimizer"
    assert data["bf16 z2 grad_accum fp32"]["offload_states()"]["value"] == full
    assert data["z3 offload_param"]["offload_states()"]["message"] == \
        "Moving states across devices is not supported for offloaded parameters."
    assert data["z3 no optimizer"]["offload_states()"]["message"] == \
        "Moving states across devices is not supported without an optimizer."
    assert data["z3 gather16"]["save_16bit_model"]["value"]["files"] == ["pytorch_model.bin"]
    assert data["z0|fp32|Adam"]["get_global_grad_norm"]["value"] == "NoneType"
