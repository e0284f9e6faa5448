"""DDP when one rank has no loss, the default unused-parameter error, and when forwards sync buffers
(torch 2.13.0 CPU, 2 gloo ranks).

The job is _ddp_rank_skips_backward_job.py (mp.spawn, FileStore, one 4 s group per scenario). In the
gradient scenarios DDP wraps Linear(1, 1, bias=False) with weight 1 and loss = output.sum(): rank 0
feeds 1, 2, 3 and rank 1 feeds 100, 200, 300, so correct averaged gradients are 50.5, 101, 151.5.
Rank 1 has no loss at iteration 0. Set-18 misses s18-J2-01, s18-J1-01, s18-J2-07.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - the shared 2-rank job runner

CORRECT = [50.5, 101.0, 151.5]
TIMEOUT = re.compile(r"timed out|timeout", re.I)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_ddp_rank_skips_backward_job.py", tmp_path_factory.mktemp("ddp_rank_skips_backward"))


def oks(steps):
    return [s.get("ok") for s in steps]


@pytest.mark.parametrize("scenario", ["detached_default", "detached_find_unused", "skip_backward_default"])
def test_rank_whose_loss_has_no_graph_shifts_allreduce_pairing_then_times_out(job, scenario):
    """A hand-made zero loss (torch.zeros((), requires_grad=True)) on rank 1: its backward fires no DDP
    hook, so no all-reduce; rank 0's iteration-0 all-reduce pairs with rank 1's iteration-1 one. No
    error while it runs: rank 0 gets (1 + 200) / 2 and (2 + 300) / 2, then its last backward has no
    partner and times out. find_unused_parameters=True changes nothing; rank 1 skipping backward
    alone does the same."""
    r0, r1 = job[0][scenario], job[1][scenario]
    assert oks(r0[:2]) == [100.5, 151.0]                     # wrong, and not equal to CORRECT[:2]
    assert TIMEOUT.search(r0[2]["error"]["msg"]) or "pair closure" in r0[2]["error"]["msg"]
    assert oks(r1) == [None, 100.5, 151.0]                   # iteration 0: no gradient at all on rank 1


def test_zero_loss_built_from_the_output_keeps_ranks_in_step(job):
    for r in job:
        assert oks(r["zero_from_output"]) == [0.5, 101.0, 151.5]   # (1 + 0) / 2, then correct


def test_skipping_the_step_on_every_rank_after_a_flag_all_reduce_works(job):
    for r in job:
        assert oks(r["skip_flag"]) == ["skipped on every rank", 101.0, 151.5]


def test_one_output_left_out_of_the_loss_default_errors_on_that_rank(job):
    """Rank 1 backpropagates loss_b only; head A's output is returned by forward but not in the loss."""
    r0, r1 = job[0]["head_ignored_default"], job[1]["head_ignored_default"]
    assert r1[0]["ok"] == {"trunk.weight": 100.0, "head_a.weight": None, "head_b.weight": 100.0}  # local, never averaged
    assert "Expected to have finished reduction in the prior iteration" in r1[1]["error"]["msg"]
    assert TIMEOUT.search(r0[0]["error"]["msg"])             # rank 0 waits in its first backward


@pytest.mark.parametrize("scenario", ["head_ignored_find_unused", "head_skipped_find_unused"])
def test_find_unused_parameters_handles_an_output_left_out_of_the_loss(job, scenario):
    """With find_unused_parameters=True the outputs pass through _DDPSink, so head A's hook fires (with
    an undefined gradient) and rank 1 contributes zero: head A gets (1 + 0) / 2 on both ranks. Same
    when head A is not run in rank 1's forward at all."""
    for r in job:
        steps = oks(r[scenario])
        assert steps[0] == {"trunk.weight": 51.0, "head_a.weight": 0.5, "head_b.weight": 50.5}
        assert steps[1] == {"trunk.weight": 202.0, "head_a.weight": 101.0, "head_b.weight": 101.0}
        assert len(steps) == 3


def test_default_unused_error_lists_parameter_indices_per_rank(job):
    """No TORCH_DISTRIBUTED_DEBUG: the error already gives indices into DDP's trainable-parameter list
    (named_parameters order, requires_grad only) and points to the variable for names."""
    for rank, r in enumerate(job):
        names, first, second = r["unused_message"]
        assert "ok" in first
        msg = second["error"]["msg"]
        assert "Expected to have finished reduction in the prior iteration" in msg
        assert f"Parameter indices which did not receive grad for rank {rank}: 2 3" in msg
        assert "set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL" in msg
        assert "Parameters which did not receive grad" not in msg          # names only with the variable
        assert [names["trainable_names"][i] for i in (2, 3)] == ["seq.1.weight", "seq.1.bias"]


def test_buffers_sync_only_on_a_forward_after_a_grad_enabled_forward(job):
    """Rank 1's view (rank 0 is the source). A forward broadcasts rank 0's buffers when the previous
    forward through the wrapper ran with grad enabled outside no_sync(), or it is the first one."""
    assert job[1]["buffer_sync_pattern"]["ok"] == {
        "train_1": "synced",      # first forward after construction
        "val_1": "synced",        # first no_grad forward after a training step
        "val_2": "local", "val_3": "local",
        "train_2": "local",       # first training forward after validation
        "train_3": "synced",
        "accum_1": "synced",      # no_sync forward after a synced-mode training forward
        "accum_2": "local",       # after a no_sync forward
        "train_4": "local",       # the step that closes the accumulation
    }


def test_uneven_no_grad_validation_on_all_ranks_does_not_hang(job):
    for r in job:
        assert r["uneven_no_grad_validation"]["ok"] == {"trained": 2, "after": 2.0}
