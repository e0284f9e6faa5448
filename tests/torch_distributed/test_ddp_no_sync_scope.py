"""DDP `no_sync()` is read by the forward, not the backward; a reassigned buffer is still synced
(torch 2.13.0 CPU, 2 gloo ranks; ddp.md "no_sync: which call reads it").

The job is _ddp_no_sync_scope_job.py (mp.spawn, FileStore, one group per scenario, about 4 s).
Linear(1, 1, bias=False) with weight 1, loss = output.sum(): rank 0 feeds 1, rank 1 feeds 3, so the
local gradient is 1 or 3 and the averaged one 2. A comm hook counts the bucket all-reduces.
Threads: facebookresearch/ClassyVision#706, huggingface/accelerate#1726, pytorch/pytorch#21736 (no_sync);
pytorch/pytorch#63916 and #64472 (reassigned buffers).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - the shared 2-rank job runner

LOCAL = {0: 1.0, 1: 3.0}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_ddp_no_sync_scope_job.py", tmp_path_factory.mktemp("ddp_no_sync_scope"))


def ok(job, rank, scenario):
    r = job[rank][scenario]
    assert "ok" in r, r
    return r["ok"]


@pytest.mark.parametrize("scenario", ["both_inside", "forward_only_inside"])
def test_forward_inside_no_sync_keeps_the_gradient_local(job, scenario):
    """The forward under no_sync() skips prepare_for_backward, so the following backward launches no
    all-reduce even when it runs after the context has exited."""
    for rank in (0, 1):
        r = ok(job, rank, scenario)
        assert (r["grad"], r["allreduces"]) == (LOCAL[rank], 0)
        assert r["after"] == 2.0                                # ranks still in step


def test_backward_alone_inside_no_sync_still_all_reduces(job):
    """A forward outside the context armed the reducer; no_sync() around backward alone changes nothing."""
    for rank in (0, 1):
        r = ok(job, rank, "backward_only_inside")
        assert (r["grad"], r["allreduces"]) == (2.0, 1)


def test_accumulation_same_numbers_either_way_but_one_all_reduce_only_with_forward_inside(job):
    """Two micro-batches: the accumulated gradient is (1+1+3+3)/2 = 4 both ways (an all-reduce is
    linear), so the misplaced context costs an all-reduce per micro-batch, not correctness."""
    for rank in (0, 1):
        good = ok(job, rank, "accumulate_forward_only_inside")
        bad = ok(job, rank, "accumulate_backward_only_inside")
        assert good["grad"] == bad["grad"] == 4.0
        assert (good["allreduces"], bad["allreduces"]) == (1, 2)


def test_a_buffer_replaced_by_assignment_is_still_broadcast_from_rank_0(job):
    """forward does self.buf = self.buf + 1 (a new tensor); rank 1 also reassigns it to 100 and 200
    before its forwards. Each forward still saw rank 0's value: _sync_buffers re-reads named_buffers()
    (_assign_modules_buffers) before broadcasting."""
    for rank in (0, 1):
        r = ok(job, rank, "reassigned_buffer")
        assert r["seen"] == [0.0, 1.0] and r["final"] == 2.0


def test_installed_ddp_reads_the_flag_in_forward_and_reassigns_buffers():
    """Source of the two behaviours in the installed torch."""
    import inspect

    from torch.nn.parallel import DistributedDataParallel as DDP
    pre = inspect.getsource(DDP._pre_forward)
    post = inspect.getsource(DDP._post_forward)
    assert "torch.is_grad_enabled() and self.require_backward_grad_sync" in pre
    assert "self.reducer.prepare_for_backward" in post
    assert "self.require_backward_grad_sync = False" in inspect.getsource(DDP.no_sync)
    assert "self._assign_modules_buffers()" in inspect.getsource(DDP._sync_buffers)
