"""backend-checkpoints.md is what accelerate 1.15.0 / torch 2.13.0 / deepspeed 0.19.8 really do per backend:
_backend_ckpt_matrix.py ran save_state / load_state / save_model for DDP, one process, ZeRO-2, ZeRO-3,
FSDP1 (full and sharded) and FSDP2 in child processes (CPU, gloo, DS_ACCELERATOR=cpu) and committed the raw
results (backend_ckpt_capture.json). The page's generated blocks must equal the rendering of that capture
word for word; the rows the page's rules rest on are asserted on the capture; the one-process backend is
rerun live (two child processes, ~6 s) to show the capture still matches the installed packages.
A full rerun is `_backend_ckpt_matrix.py --check` (~5 min)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _backend_ckpt_matrix as gen  # noqa: E402
import _generated_blocks as gb  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_page_is_the_rendered_capture(data):
    gb.assert_page_is_rendered(gen.PAGE, gen.render(data))


def test_capture_covers_every_backend_and_rank(data):
    for b, (world, _) in gen.BACKENDS.items():
        assert set(data["save"][b]) == {f"rank{r}" for r in range(world)}, b
        assert set(data["load"][b]) == {f"rank{r}" for r in range(world)}, b
    assert set(data["load1"]) == set(gen.BACKENDS) - {"single"}
    assert set(data["load1_noopt"]) == {"zero2", "zero3"} and set(data["optfirst"]) == {"fsdp1_sharded"}
    for b in gen.BACKENDS:   # every other backend's folder was tried by every loader
        assert set(data["load"][b]["rank0"]["cross"]) == (set(gen.BACKENDS) | {"parent"}) - {b}, b


def _cont(data, mode, b):
    return data[mode][b]["rank0"]["continuation"]


def test_key_rows(data):
    """The captured runs the page's rules (and the ledger claims) rest on."""
    saved = {b: _cont(data, "save", b) for b in gen.BACKENDS}
    for b in ("ddp", "single", "zero2", "zero3", "fsdp1_full", "fsdp2"):   # full restore at the same world size
        got = _cont(data, "load", b)
        assert got["weights_after_fixed_step"] == saved[b]["weights_after_fixed_step"], b
        assert got["rand"] == saved[b]["rand"] and got["lr"] == saved[b]["lr"], b
        assert (got["next_batch_skip3"] == saved[b]["next_batch"]) == (b != "single"), b
        assert data["load"][b]["rank0"]["counter"] == 3, b
    # FSDP1 sharded: weights yes, optimizer empty; restored once the state exists before load_state
    f1 = _cont(data, "load", "fsdp1_sharded")
    assert f1["weights"] == saved["fsdp1_sharded"]["weights"]
    assert f1["opt_local"] == {"exp_avg": 0.0, "exp_avg_sq": 0.0, "step": 0.0}
    assert f1["weights_after_fixed_step"] != saved["fsdp1_sharded"]["weights_after_fixed_step"]
    fixed = _cont(data, "load_init", "fsdp1_sharded")
    assert fixed["opt_local"] == saved["fsdp1_sharded"]["opt_local"]
    assert fixed["weights_after_fixed_step"] == saved["fsdp1_sharded"]["weights_after_fixed_step"]
    # 2 -> 1 ranks
    for b in ("ddp", "fsdp1_full", "fsdp2"):
        assert _cont(data, "load1", b)["weights_after_fixed_step"] == saved[b]["weights_after_fixed_step"], b
    # FSDP1 with the optimizer built before one prepare call: no training, save_state raises
    of = data["optfirst"]["fsdp1_sharded"]["rank0"]
    assert of["weights_after_1_step"] == of["weights_initial"] and of["fatal"].startswith("KeyError")
    for b in ("zero2", "zero3"):
        assert data["load1"][b]["rank0"]["load"].startswith("ZeRORuntimeException: The checkpoint being loaded used a "
                                                            "DP world size of 2 but the current world size is 1"), b
    for b in ("zero2", "zero3"):   # weights alone at another world size
        got = _cont(data, "load1_noopt", b)
        assert data["load1_noopt"][b]["rank0"]["load"] == "ok" and got["weights"] == saved[b]["weights"], b
        assert got["weights_after_fixed_step"] != saved[b]["weights_after_fixed_step"], b
    # who writes: ZeRO-2 module states on rank 0 only, each rank its optimizer partition
    w0, w1 = (set(data["save"]["zero2"][r]["writes"][-1]) for r in ("rank0", "rank1"))
    pre = "checkpoints/checkpoint_2/pytorch_model/"
    assert pre + "mp_rank_00_model_states.pt" in w0 and pre + "mp_rank_00_model_states.pt" not in w1
    assert pre + "zero_pp_rank_1_mp_rank_00_optim_states.pt" in w1 - w0
    # a folder from another backend
    cross = data["load"]["ddp"]["rank0"]["cross"]
    assert cross["single"] == "no exception" and cross["zero2"].startswith("FileNotFoundError")
    assert cross["zero2"].endswith("pytorch_model.bin'")
    # automatic naming: output_dir ignored, iteration not restored
    for b in ("ddp", "zero2", "fsdp2"):
        s, l = data["save"][b]["rank0"], data["load"][b]["rank0"]
        assert s["checkpoints_after_each_save"][-1] == ["checkpoint_1", "checkpoint_2"] and not s["my_dir_created"]
        assert (s["save_iteration"], l["save_iteration"]) == (3, 0)
        assert l["checkpoints_after_save"] == ["checkpoint_0", "checkpoint_2"]
    assert {data["save"][b]["rank0"]["step_attr"] for b in gen.BACKENDS} == {0}   # no accumulate(): no step
    # exports: which rank holds the full dict
    assert data["save"]["zero3"]["rank1"]["get_state_dict"] == "None"
    assert data["save"]["fsdp2"]["rank1"]["get_state_dict"] == "{}"
    assert "head.weight" not in data["save"]["ddp"]["rank0"]["export_keys"]
    assert "head.weight" in data["save"]["zero2"]["rank0"]["export_keys"]


def test_live_one_process_save_then_resume(data, tmp_path):
    """The one-process backend rerun now: files, restore and the iteration reset match the capture."""
    s = gen.run("save", "single", tmp_path)["rank0"]
    l = gen.run("load", "single", tmp_path)["rank0"]
    kept_s, kept_l = data["save"]["single"]["rank0"], data["load"]["single"]["rank0"]
    assert s["files"] == kept_s["files"] and s["writes"] == kept_s["writes"]
    # restored = what the uninterrupted run saw (compared within this run: float sums may differ per CPU)
    sc, lc = s["continuation"], l["continuation"]
    for k in ("weights", "weights_after_fixed_step", "lr", "rand", "opt_local"):
        assert lc[k] == sc[k], k
    assert (lc["next_batch_skip3"] == sc["next_batch"]) == (kept_l["continuation"]["next_batch_skip3"]
                                                          == kept_s["continuation"]["next_batch"])
    assert l["counter"] == kept_l["counter"] == 3
    assert (l["save_iteration"], l["checkpoints_after_save"]) == (0, ["checkpoint_0", "checkpoint_2"])
