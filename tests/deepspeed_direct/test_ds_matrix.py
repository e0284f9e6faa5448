"""deepspeed-initialize-matrix.md and deepspeed-checkpoint-matrix.md are what deepspeed 0.19.8 really does:
_ds_matrix.py ran every case on the CPU accelerator and committed the raw results
(ds_matrix_capture.json); the pages' generated blocks must equal the rendering of that capture word for
word, and three cheap initialize cells are rerun live here (one child process, a few seconds) to show the
capture still matches the installed packages. A full rerun is `_ds_matrix.py --check`."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _ds_matrix as gen  # noqa: E402

INIT = gen.REFS / "deepspeed-initialize-matrix.md"
CKPT = gen.REFS / "deepspeed-checkpoint-matrix.md"

LIVE = [gen._cid(2, "client AdamW", "none", "bf16"), gen._cid(1, "none", "none", "fp32"),
        gen._cid(3, "client AdamW", "cpu", "fp32"), "sgd z2 allow", "auto rbs z2"]


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


block = gb.block  # the shared reader of generated blocks (tests/_generated_blocks.py)


def test_pages_are_the_rendered_capture(data):
    out = gen.render(data)
    init, ckpt = INIT.read_text(encoding="utf-8"), CKPT.read_text(encoding="utf-8")
    for name, text in out.items():
        assert block(init if name.startswith("initialize") else ckpt, name) == text, name


def test_capture_covers_every_case(data):
    assert {c["id"] for c in gen.init_cases()} == set(data["init"])
    assert {c["id"] for _, cases in gen.ckpt_cases() for c in cases} == set(data["ckpt"])


def test_live_cells_match_the_capture(data, tmp_path):
    cases = [c for c in gen.init_cases() if c["id"] in LIVE]
    got = gen.run_init(cases, tmp_path, ext=tmp_path / "ext")
    for cid in LIVE:
        assert got[cid] == data["init"][cid], cid
    # the rows the pages' rules rest on
    assert got[LIVE[0]]["engine_optimizer"] == "DeepSpeedZeroOptimizer" and got[LIVE[0]]["step"] == "ok"
    assert got[LIVE[1]] == {"ok": False, "error": "AssertionError", "message": "zero stage 1 requires an optimizer",
                            "warnings": []}
    assert got[LIVE[2]]["error"] == "ZeRORuntimeException"
    assert got["sgd z2 allow"]["basic"] == "SGD" and "untested optimizer" in got["sgd z2 allow"]["warnings"][0]
    assert got["auto rbs z2"]["shown"] == {"engine._config.zero_config.reduce_bucket_size": "500000000"}


def test_key_rows(data):
    """The captured runs the pages' rules (and the ledger claims) rest on."""
    i, c = data["init"], data["ckpt"]
    for s in (0, 1, 2, 3):
        for p in gen.PRECS:
            r = i[gen._cid(s, "client AdamW", "cpu", p)]
            assert r["error"] == "ZeRORuntimeException" and "ZeRO-Offload with a client provided optimizer" in r["message"]
            assert i[gen._cid(s, "Adam", "cpu", p)]["basic"] == "DeepSpeedCPUAdam"
            assert i[gen._cid(s, "Adam", "none", p)]["basic"] == "FusedAdam"
    for s in (1, 2):
        assert i[gen._cid(s, "none", "none", "fp32")]["message"] == f"zero stage {s} requires an optimizer"
    assert i[gen._cid(3, "none", "none", "bf16")]["engine_optimizer"] == "DeepSpeedZeRoOffload"
    assert i["force-false z3"]["engine_optimizer"] == "DeepSpeedZeroOptimizer_Stage3" and i["force-false z3"]["basic"] == "AdamW"
    assert i["sgd z0"]["ok"] and i["sgd z2"]["error"] == "AssertionError" and i["subclass z2"]["error"] == "AssertionError"
    assert i["subclass z3 allow"]["basic"] == "MyAdamW"
    assert i["real cpu_adam z2"]["step"] == "ok" and i["real cpu_adam z2"]["basic"] == "DeepSpeedCPUAdam"
    assert i["auto s3 keys"]["shown"] == {"engine._config.zero_config.param_persistence_threshold": "100000",
                                          "engine._config.zero_config.prefetch_bucket_size": "50000000",
                                          "engine._config.zero_config.reduce_bucket_size": "500000000"}
    assert i["auto tbs"]["error"] == "TypeError" and i["auto lr"]["error"] == "TypeError"
    # checkpoints
    assert c["z3 save"]["files"][:2] == ["global_step2/zero_pp_rank_0_mp_rank_00_model_states.pt",
                                         "global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt"]
    assert c["z0 save"]["fp32"]["ok"] is False and c["z3 save"]["fp32"]["equal"] is True
    assert c["z3-offload save"]["shown"] == {"engine.zero_nvme_offload_optimizer()": "False"}
    assert c["z3-offload load default"]["load"]["weights_restored"] is True
    for st in ("z0", "z1", "z2", "z3"):
        assert c[f"{st} load default"]["load"]["weights_restored"] and c[f"{st} load default"]["load"]["opt_step"] == 2
        assert c[f"{st} load load_optimizer_states=False"]["load"]["opt_step"] is None
        assert c[f"{st} load load_module_only=True"]["load"]["global_steps"] == 0
    assert c["z3 load load_module_only=True"]["load"]["weights_restored"] is False
    assert c["z2 load load_module_only=True"]["load"]["weights_restored"] is True
    assert c["z3 load, no optimizer"]["load"]["error"] == "AttributeError"
    assert "_restore_from_bit16_weights" in c["z3 load, no optimizer, load_optimizer_states=False"]["load"]["message"]
    for ws in ("ws2 z2 -> ws1", "ws2 z3 -> ws1", "ws1 z2 -> ws2"):
        assert c[ws]["load"]["error"] == "ZeRORuntimeException" and "DP world size" in c[ws]["load"]["message"]
        assert c[ws + ", load_optimizer_states=False"]["load"]["ok"] or ws == "ws1 z3 -> ws2"
    assert c["z2 tag"]["latest"] == "mytag"
