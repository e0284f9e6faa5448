"""Gradient bytes per rank between accumulation boundaries (issue 21): a real 2-process CPU job
(gloo) trains a tiny model with gradient accumulation 1 and 2 under DDP (with and without
no_sync), DeepSpeed ZeRO-1/2/3 (deepspeed 0.19.8, DS_ACCELERATOR=cpu, bf16, default
overlap_comm and with overlap_comm true), FSDP1 FULL_SHARD and SHARD_GRAD_OP under no_sync and
FSDP2 under set_requires_gradient_sync(False) (torch 2.13.0), and records after each micro-step's
backward the bytes of every gradient tensor each rank holds, per dtype
(tests/planner/_ga_worker.py). The planner's `--gradient-accumulation` must predict them.

Machine independence: the job trains in bf16, which every x86 CPU runs (DeepSpeed's CPU
accelerator reports bf16 as supported unconditionally, accelerator/cpu_accelerator.py
is_bf16_supported; torch has portable bf16 kernels). The job runs with ATEN_CPU_CAPABILITY=default
and ONEDNN_MAX_CPU_ISA=SSE41, the code path of a CPU without AVX512-BF16 or AMX, whatever this
machine has; test_model_states.py runs the same strategies with the machine's own kernels. The
counts are element counts times dtype sizes, so they cannot depend on the kernels.

Model: 3 Linear layers without bias, 8192 + 16384 + 8192 = 32768 parameters (P), world size 2
(N), bf16 (w = 2 bytes). With N = 2, w*P equals 4*P/N, so every assertion names the dtype.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from _planner_helpers import candidate, plan_json, run_ranks

WORKER = Path(__file__).with_name("_ga_worker.py")
N, W = 2, 2
SIZES = [64 * 128, 128 * 128, 128 * 64]
P = sum(SIZES)
BF16, FP32 = "bfloat16", "float32"


def only(dtype, n):
    return {"total": n, dtype: n}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    ranks = run_ranks(WORKER, tmp_path_factory.mktemp("ga"), world=N, timeout=600,
                      env={"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"})
    for r in ranks:
        assert r["total_params"] == P and r["world_size"] == N
        for name, case in r["cases"].items():
            assert "error" not in case, (name, case.get("where", case["error"]))
    return ranks


def steps(measured, case):
    """(rank, micro-step record) for every rank and micro-step of a case: two optimizer steps each."""
    out = []
    for r in measured:
        recs = r["cases"][case]["micro_steps"]
        out += [(r["rank"], rec) for rec in recs]
    return out


def test_the_job_ran_the_portable_kernels(measured):
    assert {r["cpu_capability"] for r in measured} == {"DEFAULT"}


def test_micro_step_bookkeeping(measured):
    """GA 2 alternates non-boundary and boundary micro-steps over 2 optimizer steps; DeepSpeed's own
    engine agrees which micro-step is the boundary (asserted in the worker)."""
    for case in measured[0]["cases"]:
        flags = [rec["boundary"] for _, rec in steps(measured, case)][:4 if "ga2" in case else 2]
        assert flags == ([False, True, False, True] if "ga2" in case else [True, True]), case


@pytest.mark.parametrize("case", ["ddp-ga1", "ddp-ga2", "ddp-ga2-no_sync"])
def test_ddp_keeps_the_fp32_gradient_on_every_micro_step(measured, case):
    for rank, rec in steps(measured, case):
        assert rec["grads"] == only(FP32, 4 * P), (case, rank, rec)


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_at_ga1_both_stages_end_backward_with_a_partition(measured, stage):
    for rank, rec in steps(measured, f"zero{stage}-ga1"):
        assert rec["grads"] == only(BF16, W * P // N), (stage, rank, rec)
        assert rec["grads_in_step"] == only(FP32, 4 * P // N), (stage, rank, rec)


def test_zero1_at_ga1_holds_the_whole_gradient_until_the_engine_reduces(measured):
    """With overlap_comm false (DeepSpeed's default below stage 3), stage 1 reduces after autograd
    finishes (DeepSpeedEngine.allreduce_gradients -> reduce_gradients): the whole 16-bit gradient
    exists then even at GA 1. Stage 2 reduces from the gradient hooks during backward."""
    for rank, rec in steps(measured, "zero1-ga1"):
        assert rec["grads_before_reduction"] == only(BF16, W * P), (rank, rec)
    for rank, rec in steps(measured, "zero2-ga1"):
        assert rec["grads_before_reduction"] == {"total": 0}, (rank, rec)


@pytest.mark.parametrize("case", ["zero1-ga2", "zero1-ga2-overlap"])
def test_zero1_holds_the_whole_16bit_gradient_between_boundaries(measured, case):
    for rank, rec in steps(measured, case):
        if rec["boundary"]:
            assert rec["grads"] == only(BF16, W * P // N), (case, rank, rec)
            assert rec["grads_in_step"] == only(FP32, 4 * P // N), (case, rank, rec)
        else:
            assert rec["full_grad_params"] == P, (case, rank, rec)      # .grad set on every parameter
            assert rec["grads"] == only(BF16, W * P), (case, rank, rec)


def overlapping(rank):
    """Elements of the parameters whose flat range overlaps this rank's partition (DeepSpeed lays
    the parameters out in order and cuts the flat buffer into N equal partitions)."""
    lo, hi = rank * P // N, (rank + 1) * P // N
    total, start = 0, 0
    for n in SIZES:
        if start < hi and start + n > lo:
            total += n
        start += n
    return total


@pytest.mark.parametrize("case", ["zero2-ga2", "zero2-ga2-overlap"])
def test_zero2_holds_the_parameters_that_touch_its_partition(measured, case):
    """Between boundaries stage 2 keeps the whole gradient of each parameter overlapping its
    partition (all_grad_tensors in independent_gradient_partition_epilogue): here 24,576 of
    32,768 elements on either rank, more than the 16,384-element partition, less than all."""
    for rank, rec in steps(measured, case):
        if rec["boundary"]:
            assert rec["grads"] == only(BF16, W * P // N), (case, rank, rec)
        else:
            assert overlapping(rank) == 24576
            assert rec["grads"] == only(BF16, W * overlapping(rank)), (case, rank, rec)
            assert rec["full_grad_params"] == 0, (case, rank, rec)


def test_zero3_holds_its_partition_on_every_micro_step(measured):
    for rank, rec in steps(measured, "zero3-ga2"):
        assert rec["grads"] == only(BF16, W * P // N), (rank, rec)
        if rec["boundary"]:
            assert rec["grads_in_step"] == {"total": W * P // N + 4 * P // N, BF16: W * P // N, FP32: 4 * P // N}


@pytest.mark.parametrize("case", ["fsdp1-ga2-no_sync", "fsdp1-shard-grad-op-ga2-no_sync", "fsdp2-ga2-no_sync"])
def test_fsdp_no_sync_accumulates_unsharded_gradients(measured, case):
    """Accelerate's FSDP mixed precision (reduce dtype = parameter dtype = bf16): between boundaries
    the unsharded bf16 gradient (w*P), at the boundary the fp32 shard (4*P/N). The gathered
    parameters are freed after backward, except SHARD_GRAD_OP's between boundaries (w*P, within
    the plan's gathered_params for fsdp-shard-grad-op, w*P + w*U)."""
    kept = W * P if "shard-grad-op" in case else 0
    for rank, rec in steps(measured, case):
        want = only(FP32, 4 * P // N) if rec["boundary"] else only(BF16, W * P)
        assert rec["grads"] == want, (case, rank, rec)
        assert rec["unsharded_params"] == (0 if rec["boundary"] else kept), (case, rank, rec)
    if kept:
        assert candidate(tiny_plan("--gradient-accumulation", 2), "fsdp-shard-grad-op")[
            "per_gpu_bytes"]["gathered_params"] >= kept


@pytest.mark.parametrize("case", ["fsdp1-ga1", "fsdp2-ga1"])
def test_fsdp_at_ga1_holds_the_fp32_shard(measured, case):
    for rank, rec in steps(measured, case):
        assert rec["grads"] == only(FP32, 4 * P // N), (case, rank, rec)


def test_fsdp2_with_an_fp32_reduce_dtype_accumulates_fp32(measured):
    """MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) (not Accelerate's default):
    unsharded_accumulated_grad is fp32, 4*P between boundaries."""
    for rank, rec in steps(measured, "fsdp2-ga2-no_sync-fp32-reduce"):
        want = only(FP32, 4 * P // N) if rec["boundary"] else only(FP32, 4 * P)
        assert rec["grads"] == want, (rank, rec)


# ----------------------------------------------------------------------------- communication

def per_step(measured, case):
    """Collective payload bytes per optimizer step, per kind, in the second (steady) step of rank 0;
    collectives under 1 KiB (overflow flags, scalars: `<kind>_small`) left out."""
    recs = measured[0]["cases"][case]["micro_steps"]
    second = recs[len(recs) // 2:]
    out = {}
    for rec in second:
        for op, n in rec["comm"].items():
            if not op.endswith("_small"):
                out[op] = out.get(op, 0) + n
    return out


# (GA 1 case, GA 2 case, factor on the gradient reduction, factor on the parameter gathers)
COMM = [("ddp-ga1", "ddp-ga2-no_sync", 1, None), ("ddp-ga1", "ddp-ga2", 2, None),
        ("zero1-ga1", "zero1-ga2", 1, 1), ("zero2-ga1", "zero2-ga2", 2, 1), ("zero3-ga1", "zero3-ga2", 2, 2),
        ("fsdp1-ga1", "fsdp1-ga2-no_sync", 1, 2), ("fsdp1-shard-grad-op-ga1", "fsdp1-shard-grad-op-ga2-no_sync", 1, 1),
        ("fsdp2-ga1", "fsdp2-ga2-no_sync", 1, 2)]


@pytest.mark.parametrize("ga1,ga2,reduce_factor,gather_factor", COMM, ids=[c[1] for c in COMM])
def test_which_collectives_repeat_every_micro_step(measured, ga1, ga2, reduce_factor, gather_factor):
    """ZeRO-1, DDP under no_sync and FSDP under no_sync reduce gradients once per optimizer step;
    ZeRO-2/3 reduce every micro-step (DeepSpeedEngine.allreduce_gradients); ZeRO-3 and FSDP
    FULL_SHARD/FSDP2 gather parameters every micro-step; SHARD_GRAD_OP keeps them gathered
    between micro-steps under no_sync, so it gathers once per step."""
    one, two = per_step(measured, ga1), per_step(measured, ga2)
    assert one["all_reduce"] > 0 and two["all_reduce"] == reduce_factor * one["all_reduce"], (one, two)
    if gather_factor is None:
        assert "all_gather" not in one and "all_gather" not in two
    else:
        assert one["all_gather"] > 0 and two["all_gather"] == gather_factor * one["all_gather"], (one, two)


# ----------------------------------------------------------------------------- the planner

def tiny_plan(*extra):
    return plan_json("--params", P, "--largest-layer-params", 128 * 128, "--hidden-size", 64, "--num-layers", 3,
                     "--gpus-per-node", N, "--precision", "bf16", "--optimizer", "adamw", "--seq-len", 8, *extra)


CASE_OF = {"ddp": "ddp-ga2-no_sync", "zero1": "zero1-ga2", "zero3": "zero3-ga2", "fsdp2": "fsdp2-ga2-no_sync",
           "fsdp-full-shard": "fsdp1-ga2-no_sync", "fsdp-shard-grad-op": "fsdp1-shard-grad-op-ga2-no_sync"}


@pytest.mark.parametrize("strategy", sorted(CASE_OF))
def test_planner_matches_what_each_rank_holds_between_boundaries(measured, strategy):
    c = candidate(tiny_plan("--gradient-accumulation", 2), strategy)
    got = {rec["grads"]["total"] for _, rec in steps(measured, CASE_OF[strategy]) if not rec["boundary"]}
    assert got == {c["gradients_between_boundaries"]}, (strategy, got, c["gradients_between_boundaries"])


def test_planner_bounds_zero2_between_boundaries(measured):
    """The planner cannot see the parameter layout: it plans the partition plus two largest
    modules (at most the whole gradient), an upper bound of what the ranks hold."""
    c = candidate(tiny_plan("--gradient-accumulation", 2), "zero2")
    got = max(rec["grads"]["total"] for _, rec in steps(measured, "zero2-ga2") if not rec["boundary"])
    assert W * P // N < got <= c["gradients_between_boundaries"] == W * min(P, P // N + 2 * 128 * 128)


def test_planned_gradients_are_the_peak_over_micro_steps():
    one, two = tiny_plan(), tiny_plan("--gradient-accumulation", 2)
    assert one["inputs"]["gradient_accumulation"] == 1 and two["inputs"]["gradient_accumulation"] == 2
    for c1 in one["candidates"]:
        assert c1["gradients_between_boundaries"] is None
        c2 = candidate(two, c1["strategy"], c1["offload"], c1["offload_device"])
        assert c2["per_gpu_bytes"]["gradients"] == max(c1["per_gpu_bytes"]["gradients"],
                                                       c2["gradients_between_boundaries"])


def test_accumulation_moves_the_recommendation_from_zero1_to_zero2():
    """7e9 parameters on 8 x 50 GiB: ZeRO-1 fits at GA 1 (its 16-bit gradient is a partition after
    backward) but not at GA 4 (2 bytes x 7e9 between boundaries), so ZeRO-2 is recommended."""
    base = ("--params", "7e9", "--gpus-per-node", "8", "--gpu-memory", "50GiB")
    one, four = plan_json(*base), plan_json(*base, "--gradient-accumulation", "4")
    assert one["recommended"]["strategy"] == "zero1"
    z1 = candidate(four, "zero1")
    assert not z1["fits"] and z1["per_gpu_bytes"]["gradients"] == 2 * 7 * 10 ** 9
    assert "between boundaries" in z1["why"]
    assert four["recommended"]["strategy"] == "zero2" and four["recommended"]["fits"]
    assert candidate(four, "zero2")["per_gpu_bytes"] == candidate(one, "zero2")["per_gpu_bytes"]


def test_planned_communication_scales_like_the_measured_collectives():
    """comm_bytes_per_gpu is per optimizer step: with GA g, ZeRO-2 adds (g - 1) gradient
    reductions, ZeRO-3 repeats everything, FSDP FULL_SHARD/FSDP2 add (g - 1) parameter gathers
    (forward and backward); DDP, ZeRO-1 and SHARD_GRAD_OP are unchanged."""
    one, three = tiny_plan(), tiny_plan("--gradient-accumulation", 3)
    r = 1 / 2                                        # ring factor (N - 1) / N for N = 2
    extra = {"ddp": 0, "zero1": 0, "zero2": 2 * r * W * P, "zero3": 2 * (2 * r * W * P + r * W * P),
             "fsdp-shard-grad-op": 0, "fsdp-full-shard": 2 * 2 * r * W * P, "fsdp2": 2 * 2 * r * W * P,
             "hsdp": 2 * 2 * r * W * P}
    for strategy, add in extra.items():
        c1, c3 = candidate(one, strategy), candidate(three, strategy)
        assert c3["comm_bytes_per_gpu"] - c1["comm_bytes_per_gpu"] == int(add), strategy
