"""DDP "Grad strides do not match bucket view strides": when the reducer warns and what it costs
(torch 2.13.0 CPU, 2 gloo ranks; ddp.md "Grad strides do not match bucket view strides").

The job is _ddp_grad_strides_job.py: one process pair, every case with a fresh model and wrapper,
torch.set_warn_always(True) so the warn-once warning fires per case. Each rank runs two steps and compares .grad with
the average of the ranks' local gradients computed without DDP. Set-20 miss s20-K13-01.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
JOB = HERE / "_ddp_grad_strides_job.py"
CASES = ["cin3_permuted", "cin3_channels_last_after", "cin3_channels_last_after_gabv", "cin1_permuted",
         "cin1_permuted_contig", "cin1_channels_last_before", "linear_transposed"]
WARNING = "Grad strides do not match bucket view strides"


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp_grad_strides")
    p = subprocess.run([sys.executable, str(JOB), str(root)], capture_output=True, timeout=180)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    ranks = [json.loads((root / f"rank{r}.json").read_text()) for r in range(2)]
    assert sorted(ranks[0]) == sorted(CASES)
    return {c: [ranks[0][c], ranks[1][c]] for c in CASES}


def warned(r):
    return any(WARNING in w for w in r["warnings"])


@pytest.mark.parametrize("case", ["cin3_permuted", "linear_transposed"])
def test_permuted_or_transposed_activations_alone_do_not_warn(res, case):
    """A permuted NHWC input gives a conv weight grad in channels-last strides, but AccumulateGrad
    re-lays it to the parameter's strides (the gradient layout contract) before the reducer sees it."""
    for r in res[case]:
        assert not warned(r)
        assert r["grad_matches_average"] == [True, True]
    r = res["cin3_permuted"][0]
    assert r["incoming_grad_stride"] == [27, 1, 9, 3]
    assert r["stored_grad_stride"] == r["param_stride"] == [27, 9, 3, 1]


def test_layout_changed_after_wrapping_warns_and_scrambles_the_first_step(res):
    """model.to(channels_last) after DDP(...): the bucket view kept the row-major strides of
    construction time. The first step's .grad holds the averaged values in row-major order written
    into channels-last memory (elements misplaced); the second step is right (buckets rebuilt)."""
    for r in res["cin3_channels_last_after"]:
        assert warned(r)
        assert r["param_stride"] == [27, 1, 9, 3]
        assert r["grad_matches_average"] == [False, True]
        assert r["grad_memory_holds_row_major_average"]
    for r in res["cin3_channels_last_after_gabv"]:          # gradient_as_bucket_view=True
        assert warned(r)
        assert r["grad_matches_average"] == [True, True]
        assert r["stored_grad_stride"] == [27, 9, 3, 1]     # .grad is the bucket view itself


@pytest.mark.parametrize("case", ["cin1_permuted", "cin1_permuted_contig"])
def test_size_one_dim_strides_warn_even_after_contiguous(res, case):
    """Conv2d(1, 8, 3): the grad differs from the parameter only in the stride of the size-1 dim,
    which the layout contract ignores and the reducer compares. The NHWC-permuted [N,1,H,W] input
    already counts as contiguous, so .contiguous() returns it unchanged and the warning stays.
    Values are right: both layouts address the same memory."""
    for r in res[case]:
        assert warned(r)
        assert r["input_is_contiguous"] is True and r["input_stride"] == [64, 1, 8, 1]
        assert (r["param_stride"], r["stored_grad_stride"]) == ([9, 9, 3, 1], [9, 1, 3, 1])
        assert r["grad_matches_average"] == [True, True]
        assert "bucket_view.sizes() = [8, 1, 3, 3], strides() = [9, 9, 3, 1]" in r["warnings"][0]


def test_channels_last_before_wrapping_removes_the_warning(res):
    for r in res["cin1_channels_last_before"]:
        assert not warned(r)
        assert r["param_stride"] == r["stored_grad_stride"] == [9, 1, 3, 1]
        assert r["grad_matches_average"] == [True, True]
