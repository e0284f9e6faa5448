"""deepspeed-checkpoint-tools.md and deepspeed-zero-to-fp32.md are what deepspeed 0.19.8 really does: _ds_tools_matrix.py ran ds_to_universal,
universal loads, zero_to_fp32 and save_16bit_model on the CPU accelerator (2 gloo ranks) and committed the raw
results (ds_tools_capture.json); the pages' generated blocks must equal the rendering of that capture word for
word. A full rerun is `_ds_tools_matrix.py --check` (about 2 minutes), so this test stays cheap: the capture,
the rows the page's rules rest on, and the installed source lines behind the mechanism."""
from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _ds_tools_matrix as gen  # noqa: E402

SITE = Path(sysconfig.get_paths()["purelib"]) / "deepspeed"


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_page_is_the_rendered_capture(data):
    rendered = gen.render(data)
    gb.assert_page_is_rendered(gen.PAGE, rendered)


def test_capture_covers_every_case(data):
    assert set(data["save"]) == {i for i, _, _ in gen.SAVES}
    assert set(data["convert"]) == {f"{n} inject={b}" for n in gen.CONVERT for b in (False, True)}
    assert set(data["load"]) == ({c["id"] for cs in gen.load_cases().values() for c in cs}
                                 | {i for i, _, _ in gen.TAG_CASES})
    assert set(data["fp32"]) == set(gen.FP32_SOURCES) and set(data["cli"]) == {label for label, _ in gen.CLI}


def test_key_rows(data):
    cv, ld, fp, cli, s16 = data["convert"], data["load"], data["fp32"], data["cli"], data["save"]
    # ds_to_universal: stages 1/2 need --inject_missing_state, stage 3 does not, stage 0 has nothing to convert
    for st in ("z1", "z2"):
        assert cv[f"{st} inject=False"]["rc"] and "universal_checkpoint_info state is missing" in cv[f"{st} inject=False"]["error"]
        assert cv[f"{st} inject=True"]["rc"] == 0 and cv[f"{st} inject=True"]["latest_universal"] == "global_step2_universal"
    assert cv["z3 inject=False"]["rc"] == 0 and "FileNotFoundError" in cv["z0 inject=True"]["error"]
    # universal loads: any DP size within the stage family; the other family asserts with no message
    for ws in (1, 2):
        for src, st in (("z1", 2), ("z2", 1), ("z2", 2), ("z3", 3)):
            r = ld[f"{src} -> z{st} ws{ws} defaults"]
            assert r["ok"] and r["weights_restored"] and r["opt_step"] == 2 and r["step_after"] == "ok"
        for src, st in (("z1", 3), ("z2", 3), ("z3", 1), ("z3", 2)):
            for kw in ("defaults", "load_optimizer_states=False"):
                r = ld[f"{src} -> z{st} ws{ws} {kw}"]
                assert r["error"] == "AssertionError" and "check_ckpt_list" in r["message"], (src, st, ws, kw)
        assert ld[f"z2 -> z2 ws{ws} load_optimizer_states=False"]["opt_step"] == 2
        assert ld[f"z3 -> z3 ws{ws} load_optimizer_states=False"]["opt_step"] is None
    # an explicit tag must name a converted folder; Accelerate's fixed tag works when the folder carries it
    assert ld["tag universal"]["ok"] and ld["tag accelerate"]["ok"] and ld["tag accelerate"]["weights_restored"]
    assert "optimizer_state.pt" in ld["tag unconverted"]["message"]
    assert ld["bf16 z2"]["weights_restored"] and ld["bf16 z3"]["weights_restored"] and ld["bf16 z3"]["opt_step"] == 2
    assert cv["z2b inject=False"]["rc"] and cv["z3gb inject=False"]["rc"] == 0
    # zero_to_fp32: mmap for every stage, the Adam moments dropped only at stage 3
    for n in gen.FP32_SOURCES:
        assert fp[n]["load_kwargs"] == ["mmap=True", "weights_only=False"] and fp[n]["files_mapped"] == 2
        assert fp[n]["eager"]["equal"] and fp[n]["lazy"]["to_torch_tensor_equal"]
    assert fp["z3"]["kept_adam"] == [] and fp["z3"]["file_adam"]
    assert fp["z2"]["kept_adam"] == fp["z2"]["file_adam"] != []
    assert fp["z3"]["lazy"]["types"] == ["GatheredTensor"] and fp["z2"]["lazy"]["types"] == ["Tensor"]
    assert cli["--max_shard_size 0.0001MB"]["files"][-1] == "pytorch_model.bin.index.json"
    assert cli["(none)"]["files"] == ["pytorch_model.bin"] and cli["--safe_serialization"]["files"] == ["model.safetensors"]
    assert "not supported" in cli["--max_shard_size 100B"]["error"]
    # save_16bit_model: stage 3 needs the gather flag; the file holds the engine's dtype
    assert s16["z3"]["save16"]["returned"] is False and s16["z3"]["save16"]["files"] == []
    assert s16["z3 gather bf16"]["save16"]["dtype"] == ["bfloat16"] and s16["z3 gather"]["save16"]["dtype"] == ["float32"]


@pytest.mark.parametrize("path, text", [
    ("utils/zero_to_fp32.py", 'state_dict = torch.load(f, map_location=device, mmap=True, weights_only=False)'),
    ("utils/zero_to_fp32.py", 'state_dict["optimizer_state_dict"].pop("optimizer_state_dict", None)'),
    ("utils/zero_to_fp32.py", "lazy_mode=True)"),
    ("utils/zero_to_fp32.py", "gc.collect()"),
    ("runtime/engine.py", 'pp_placeholder="0" if self.load_universal_checkpoint() else None)'),
    ("runtime/engine.py", "because stage3_gather_16bit_weights_on_model_save is False"),
    ("runtime/state_dict_factory.py", "assert len(self.ckpt_list) > 0"),
    ("checkpoint/ds_to_universal.py", "if args.inject_missing_state:"),
    ("../accelerate/accelerator.py", "model.load_checkpoint(input_dir, ckpt_id, **load_model_func_kwargs)"),
    ("../transformers/integrations/deepspeed.py", 'glob.glob(f"{checkpoint_path}/global_step*")'),
])
def test_mechanism_source_lines(path, text):
    assert text in (SITE / path).read_text(encoding="utf-8"), (path, text)
