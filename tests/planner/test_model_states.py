"""Model-state bytes per rank: a real 2-process CPU job (gloo) trains a tiny model under DDP,
DeepSpeed ZeRO-1/2/3 (DS_ACCELERATOR=cpu), FSDP2 (fully_shard) and FSDP1 (FULL_SHARD,
SHARD_GRAD_OP), counts every parameter,
gradient, fp32 master-weight and optimizer-state tensor each rank holds
(tests/planner/_state_worker.py), and the planner must predict each count exactly.

One job runs all seven strategies (one launch for world size 2). Allowances: none for the counted
categories. Not counted: the optimizer's scalar `step` tensors (4 bytes per parameter tensor or
flat group), DDP's gradient buckets and DeepSpeed's bucket buffers (the planner's separate
`communication_buffers`), and DeepSpeed alignment padding, which is zero here because the
32768 parameters divide evenly (DeepSpeed pads each flat group to a multiple of its alignment
times the world size, so a real model may hold up to that many extra elements per rank)."""
from __future__ import annotations

from pathlib import Path

import pytest

from _planner_helpers import candidate, plan_json, run_ranks

WORKER = Path(__file__).with_name("_state_worker.py")
WORLD = 2
P = 64 * 128 + 128 * 128 + 128 * 64


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    return run_ranks(WORKER, tmp_path_factory.mktemp("states"), world=WORLD)


@pytest.fixture(scope="module")
def planned():
    return plan_json("--params", P, "--largest-layer-params", 128 * 128, "--hidden-size", 64, "--num-layers", 3,
                     "--gpus-per-node", WORLD, "--precision", "bf16", "--optimizer", "adamw", "--seq-len", 8)


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "zero2", "zero3", "fsdp2", "fsdp-full-shard",
                                      "fsdp-shard-grad-op"])
def test_planner_matches_bytes_each_rank_holds(measured, planned, strategy):
    want = candidate(planned, strategy)["per_gpu_bytes"]
    for rank in measured:
        assert rank["total_params"] == P
        got = rank["strategies"][strategy]
        assert "error" not in got, got["error"]
        for key in ("parameters", "gradients", "master_weights", "optimizer_states"):
            assert got[key] == want[key], (strategy, rank["rank"], key, got[key], want[key])


def test_the_job_ran_the_intended_deepspeed_optimizers(measured):
    s = measured[0]["strategies"]
    assert s["zero1"]["optimizer"] == s["zero2"]["optimizer"] == "DeepSpeedZeroOptimizer"
    assert s["zero3"]["optimizer"] == "DeepSpeedZeroOptimizer_Stage3"


def test_deepspeed_zero1_also_partitions_16bit_gradients(measured):
    """deepspeed 0.19.8 reduce-scatters gradients at stage 1 as at stage 2 (the reference says so)."""
    for rank in measured:
        s = rank["strategies"]
        assert s["zero1"]["gradients_16bit"] == s["zero2"]["gradients_16bit"] == 2 * P // WORLD
        assert s["zero1"]["gradients_fp32"] == 4 * P // WORLD


def test_sharding_really_divides_by_world_size(measured):
    """Guard against a job that silently ran with one rank: sharded states are half of DDP's."""
    s = measured[0]["strategies"]
    assert s["fsdp2"]["optimizer_states"] * WORLD == s["ddp"]["optimizer_states"]
    assert s["fsdp-full-shard"]["parameters"] * WORLD == s["ddp"]["parameters"]
    assert s["zero3"]["parameters"] * WORLD == 2 * P


def test_when_optimizer_states_appear(measured):
    """The reference's startup-OOM table: optimizer states appear at the first step, also under
    DeepSpeed ZeRO (deepspeed.initialize creates none for a torch AdamW)."""
    for rank in measured:
        s = rank["strategies"]
        for z in ("zero1", "zero2", "zero3"):
            assert s[z]["optimizer_states_at_initialize"] == 0 < s[z]["optimizer_states"]
        assert s["fsdp2"]["optimizer_states_before_first_step"] == 0
