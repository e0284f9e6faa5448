"""Differentiable all-gather on 2 gloo ranks (torch 2.13.0 CPU): torch.distributed.nn.functional.all_gather
with a non-contiguous input, its gradient, and its _functional_collectives replacements.

The job is _all_gather_autograd_job.py (mp.spawn, FileStore). Rank r gathers the transpose of
arange(6).reshape(2, 3) + 10 r; the loss weights slot k by (r + 1)(k + 1), so the summed-over-ranks
gradient is 3 (r + 1) and a local-only one would be (r + 1)^2.
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - shared with the sibling job's test


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_all_gather_autograd_job.py", tmp_path_factory.mktemp("all_gather_autograd"))


def slots():
    base = torch.arange(6.0).reshape(2, 3)
    return [(base + 10 * r).t().tolist() for r in (0, 1)]


def test_nn_all_gather_takes_a_transposed_input_and_sums_gradients_over_ranks(job):
    for rank, r in enumerate(job):
        a = r["nn"]["ok"]
        assert a["input_contiguous"] is False
        assert (a["type"], a["len"]) == ("tuple", 2)            # one tensor per rank, rank order
        assert a["slots"] == slots()
        assert a["slot_contiguous"] == [True, True]             # forward made the input contiguous first
        assert a["grad"] == [3.0 * (rank + 1)]                  # sum over ranks, not local (rank + 1)^2
        assert a["warnings"] == ["FutureWarning: torch.distributed.nn.functional.all_gather is deprecated, "
                                 "use torch.distributed._functional_collectives.all_gather_single instead."]


def test_all_gather_single_is_the_differentiable_replacement(job):
    cat = [row for s in slots() for row in s]                   # one tensor, ranks along dim 0
    for rank, r in enumerate(job):
        for name in ("all_gather_single", "all_gather_single_autograd"):
            a = r[name]["ok"]
            assert a["shape"] == [6, 2] and a["value"] == cat
            assert a["grad"] == [3.0 * (rank + 1)]
            assert a["warnings"] == []


def test_all_gather_tensor_autograd_is_a_deprecated_alias(job):
    for rank, r in enumerate(job):
        a = r["all_gather_tensor_autograd"]["ok"]
        assert a["grad"] == [3.0 * (rank + 1)]
        assert a["warnings"] == [
            "FutureWarning: `torch.distributed._functional_collectives.all_gather_tensor_autograd` is deprecated. "
            "Please use `torch.distributed._functional_collectives.all_gather_single_autograd` instead."]


def test_plain_gloo_all_gather_accepts_non_contiguous_tensors(job):
    """The 'Tensors must be contiguous' error of the report is NCCL's check; gloo copes."""
    for r in job:
        p = r["plain"]["ok"]
        assert p["out_contiguous"] == [False, False]            # empty_like keeps the transpose's strides
        assert p["call"]["ok"] == slots()


def test_installed_sources_behind_the_claims():
    from torch.distributed import _functional_collectives as funcol
    from torch.distributed.nn import functional as F
    fwd = inspect.getsource(F._AllGather.forward)
    assert "tensor = tensor.contiguous()" in fwd
    bwd = inspect.getsource(F._AllGather.backward)
    assert "dist.Backend.NCCL, dist.Backend.XCCL" in bwd and "_Reduce_Scatter.apply(ReduceOp.SUM" in bwd
    assert "_AlltoAll.apply" in bwd and "torch.sum(torch.stack(gxs), dim=0)" in bwd
    assert "return all_gather_single(self, gather_dim, group, tag)" in inspect.getsource(funcol.all_gather_single_autograd)
    assert '"sum"' in inspect.getsource(funcol.all_gather_into_tensor_backward)
    assert "_not_supported_under_compile" in inspect.getsource(F.all_gather)


def test_each_dist_nn_collective_names_its_replacement(job):
    """all_gather and reduce_scatter name the *_single functions, not a same-named one."""
    expect = {"broadcast": "broadcast", "reduce_scatter": "reduce_scatter_single",
              "all_to_all_single": "all_to_all_single", "all_reduce": "all_reduce"}
    for r in job:
        for name, repl in expect.items():
            assert r["deprecations"][name] == [
                f"torch.distributed.nn.functional.{name} is deprecated, "
                f"use torch.distributed._functional_collectives.{repl} instead."], name


def test_ddp_mean_cancels_the_summed_gather_gradient(job):
    """Under DDP the parameters get exactly the single-process gradient of the global loss: the
    world-size factor of the gather's backward is undone by DDP's averaging, so no 1/world rescale."""
    for r in job:
        d = r["ddp"]["ok"]
        assert d["ddp_grad"] == pytest.approx(d["single_grad"], rel=1e-5, abs=1e-6)
        assert d["ddp_grad"] != pytest.approx([g / 2 for g in d["single_grad"]], rel=1e-3)


def test_local_loss_with_a_gradient_carrying_gather_equals_the_global_gradient(job):
    # each rank: mean cross-entropy of its own 4 rows against all 8 gathered rows, labels offset by 4 * rank;
    # DDP's mean over ranks of those gradients equals one process's mean over all 8 rows (factor 1)
    for r in job:
        ll = r["local_loss"]["ok"]
        assert ll["with_grad_gather_max_diff"] < 1e-6


def test_local_loss_without_the_gather_gradient_is_wrong_not_rescaled(job):
    # plain dist.all_gather, own slot put back with its gradient: the other ranks' loss terms are lost
    for r in job:
        ll = r["local_loss"]["ok"]
        assert ll["plain_gather_max_diff"] > 1e-2
        assert ll["plain_gather_ratio_spread"] > 0.5          # element-wise ratio not constant: no single factor fixes it
        assert ll["plain_gather_cosine"] < 0.999
