"""accelerate-handoff.md and accelerate-prepare-model.md are what accelerate 1.15.0 / deepspeed 0.19.8 / transformers 5.25.0 really do:
_handoff_matrix.py ran every case in child processes (CPU, gloo, DS_ACCELERATOR=cpu) and committed the raw
results (handoff_capture.json); the pages' generated blocks must equal the rendering of that capture word
for word, and the mechanism behind the set-8 case (a process group made before PartialState with the
DeepSpeed variable, which TrainingArguments(deepspeed=...) sets) is rerun live here (two child processes,
~2 s) to show the capture still matches the installed packages.
A full rerun is `_handoff_matrix.py capture` (~1 min)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _handoff_matrix as gen  # noqa: E402

BATCH_FAIL = ("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
              "gradient_acc_step * world_size 16 != 8 * 1 * 1")


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_page_is_the_rendered_capture(data):
    gb.assert_page_is_rendered(gen.PAGE, gen.render(data))


def test_capture_covers_every_case(data):
    assert set(data["init"]) == set(gen.INIT)
    for setup, (world, _) in gen.PREPARE.items():
        for r in range(world):
            assert set(data["prepare"][setup][f"rank{r}"]) == set(gen.STATE_LABELS) | {"_setup"}, setup


def test_live_user_process_group_then_deepspeed_partial_state(data, tmp_path):
    """s8-tr-b06: the user's process group exists; PartialState under ACCELERATE_USE_DEEPSPEED (what
    TrainingArguments(deepspeed=...) sets around it, row "tr pg targs") still initialises deepspeed.comm
    over it: it checks deepspeed.comm, not torch.distributed."""
    got = gen.run_init("tr pg ds-env", tmp_path, ext=tmp_path / "ext")
    assert got == data["init"]["tr pg ds-env"]
    r = got["rank1"]
    assert r["calls"] == ["deepspeed.comm.init_distributed(dist_backend=gloo)"]
    assert r["ds_initialized"] and r["ds_config_world_size"] == 2 and r["ds_config_check"] == "ok"


def test_key_rows(data):
    """The captured runs the page's rules (and the ledger claims) rest on."""
    i = {k: v["rank0"] for k, v in data["init"].items()}
    for cid in ("tr pg", "tr", "tr cpu ds-env", "tr plugin cpu"):   # no DeepSpeed branch: comm left alone
        assert not i[cid]["ds_initialized"] and i[cid]["ds_config_world_size"] == 1, cid
        assert i[cid]["ds_config_check"] == BATCH_FAIL, cid
    assert i["tr pg"]["calls"] == []
    for cid in ("tr pg ds-env", "tr pg plugin", "tr pg targs"):      # wraps the existing group
        assert i[cid]["calls"] == ["deepspeed.comm.init_distributed(dist_backend=gloo)"], cid
        assert i[cid]["distributed_type"] == "DEEPSPEED" and i[cid]["ds_config_world_size"] == 2, cid
    for cid in ("tr ds-env", "tr plugin", "tr targs"):
        assert i[cid]["calls"] == ["deepspeed.comm.init_distributed(dist_backend=gloo)",
                                   "torch.distributed.init_process_group(backend=gloo)"], cid
    for cid in ("tr ds", "tr ds ds-env"):
        assert i[cid]["calls"] == [] and i[cid]["ds_config_world_size"] == 2, cid
    for cid in ("py", "py ds-env", "py targs"):
        assert i[cid]["calls"] == [] and not i[cid]["torch_initialized"], cid
    assert i["tr cpu ds-env"]["distributed_type"] == "MULTI_CPU"
    assert i["tr plugin cpu"]["distributed_type"] == "MULTI_CPU"
    assert i["tr targs"]["ds_config_batch"] == "16 = 8 x 1 x 2"   # TrainingArguments fills "auto" with the real world size
    one, multi = data["prepare"]["single"]["rank0"], data["prepare"]["multi_cpu"]["rank0"]
    assert one["dtensor"] == {"to_called": False, "type": "FSDPSequential", "param": "DTensor on cpu"}
    assert one["dtensor dp=True"]["to_called"] and one["plain"]["to_called"] and not one["plain dp=False"]["to_called"]
    assert multi["dtensor dp=False eval"]["type"] == "FSDPSequential" and not multi["dtensor dp=False eval"]["to_called"]
    assert multi["plain"]["type"] == "DistributedDataParallel" and multi["plain eval"]["type"] == "Sequential"
    assert multi["dtensor"]["error"] == "NotImplementedError"
    assert one["meta"]["message"].startswith("Cannot copy out of meta tensor") and one["meta"]["to_called"]
    assert multi["device_map2"]["message"].startswith("You can't train a model that has been loaded with `device_map='auto'`")
    f1 = data["fsdp1"]["rank1"]
    assert f1["sync_module_states=False"] == {"rank_param_before": "meta", "param_after": "cpu",
                                              "full_weights_are_rank0s": False}
    assert "requires them to be on GPU" in f1["sync_module_states=True"]["message"]
