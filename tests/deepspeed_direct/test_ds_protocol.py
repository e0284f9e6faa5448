"""deepspeed-backward-protocol.md, deepspeed-moe-groups.md and deepspeed-op-loading.md are what deepspeed
0.19.8 really does: _ds_protocol.py ran every row on the CPU accelerator (2 gloo ranks for the backward
grid) and committed the raw results (ds_protocol_capture.json); the pages' generated blocks must equal the
rendering of that capture word for word, and the MoE group grid is rerun live in one child process (~3 s).
A full rerun is `_ds_protocol.py --check`."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_protocol as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_pages_are_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.PAGES, gen.render(data))


def test_live_group_grid_matches_the_capture(data, tmp_path):
    assert gen.run_one("groups", tmp_path, ext=tmp_path / "ext", timeout=300) == data["groups"]


def test_backward_rows(data):
    """s9-ds-d09: direct backward works at ZeRO 1-3 (GA scaling and reduction kept), raises at stage 0."""
    bw = data["backward"]
    for s in (0, 1, 2, 3):
        for p in ("fp32", "bf16"):
            ref = bw[f"z{s}|{p}|engine.backward(loss)"]
            assert ref["ok"] and ref["moved"] and ref["ranks_equal"] and ref["global_steps"] == 1
            assert ref["torch_style"] is (s > 0)
            assert bw[f"z{s}|{p}|engine.backward(out)"]["error"] == "AssertionError"
            for how in ("loss.backward()", "out.backward(out_grad)", "engine.scale(loss).backward()"):
                r = bw[f"z{s}|{p}|{how}"]
                if s == 0:
                    assert r["error"] == "RuntimeError"
                    assert r["message"].startswith("Direct calls to tensor.backward() are not supported")
                else:
                    assert r["ok"] and r["same_as_engine_backward"] and r["ranks_equal"], (s, p, how)
                    assert r["global_steps"] == 1
            if s > 0:   # a second model in the loss: divided by GA only through engine.backward
                assert (ref["other_grad_ratio"], bw[f"z{s}|{p}|loss.backward()"]["other_grad_ratio"]) == (0.5, 1.0)
    assert bw["moe"] == {"1": {"expert_parallel": [0], "expert_data_parallel": [0, 1]},
                         "2": {"expert_parallel": [0, 1], "expert_data_parallel": [0]}}


def test_moe_rows(data):
    """s9-ds-d07: groups sized by ep_size; inference refuses ep_size > world size; the recorder's world-2 rows
    equal the groups a real 2-rank initialize made (rank 0's view)."""
    g = data["groups"]
    for ep in ("1", "2"):
        rec = g["train"][f"2|{ep}|False"]
        real = data["backward"]["moe"][ep]
        assert real["expert_parallel"] in rec["expert_parallel"]
        assert real["expert_data_parallel"] in rec["expert_data_parallel"]
    assert g["infer"]["4|2"] == {"ep": [[0, 1], [2, 3]], "expert_mp": [[0, 2], [1, 3]]}
    assert g["infer"]["4|8"]["message"] == "Invalid ep_size=8 for world_size=4"
    assert g["infer"]["4|3"]["ep"] == [[0, 1, 2]]   # a non-divisor leaves rank 3 outside
    assert g["train"]["4|2|False"] == {"expert_parallel": [[0, 1], [2, 3]], "expert_data_parallel": [[0, 2], [1, 3]]}
    assert g["train"]["4|3|False"]["message"] == "4 is not divisible by 3"
    assert g["layer"]["8|3"]["error"] == "AssertionError"
    assert g["config"]["ep_size"] == 2 and g["config"]["moe_experts"] == [8]


def test_load_rows(data):
    """s9-fd-e02: import loads no op and no Triton; ops load per feature at initialize."""
    ld = data["loads"]
    assert ld["import"]["atexit"] == [] and not ld["import"]["matmul_ext"] and not ld["import"]["triton"]
    assert ld["init_distributed"] == {"builders": ["deepspeed_shm_comm"], "build_shm_op_called": True}
    assert ld["stage 2, client SGD"]["builders"] == [] and ld["stage 2, config Adam"]["builders"] == ["fused_adam"]
    assert ld["stage 2, config Adam + offload_optimizer cpu"]["builders"] == ["cpu_adam"]
    assert not ld["end"]["matmul_ext"] and all(not v.get("atexit") for v in ld.values() if isinstance(v, dict))


def test_captured_messages_are_classified_by_the_triage_catalog(data):
    """The failure-triage catalog maps the messages these runs raised to its new entries."""
    import importlib.util
    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("triage_log_protocol", repo / "sub-skills" / "failure-triage" /
                                                  "scripts" / "triage_log.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    cat = mod.load_catalog(repo / "sub-skills" / "failure-triage" / "catalog")
    bw, g = data["backward"], data["groups"]
    want = {"deepspeed-direct-backward-unsupported": bw["z0|fp32|loss.backward()"],
            "deepspeed-backward-loss-not-scalar": bw["z1|fp32|engine.backward(out)"],
            "deepspeed-moe-invalid-ep-size": g["infer"]["4|8"],
            "deepspeed-moe-experts-not-divisible": g["layer"]["8|3"]}
    for eid, r in want.items():
        line = f"{r['error']}: {r['message']}"
        got = cat.match(mod.clean(line)[0].strip())
        assert got is not None and got.id == eid, (eid, line, got and got.id)


def test_accelerate_rows(data):
    """A bare loss.backward() in an Accelerate loop under DeepSpeed: no update at ZeRO 1-3, RuntimeError at 0."""
    ac = data["accelerate"]
    for s in (0, 1, 2, 3):
        assert ac[f"z{s}|accelerator.backward(loss)"] == {"ok": True, "weights_changed": True, "global_steps": 2}
        r = ac[f"z{s}|loss.backward()"]
        assert (r["error"] == "RuntimeError") if s == 0 else (r == {"ok": True, "weights_changed": False,
                                                                     "global_steps": 0})
