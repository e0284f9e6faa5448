"""ZeroRedundancyOptimizer checkpoints and gloo isend lifetime (torch 2.13.0 CPU, 2 gloo ranks).

The job is _zero_isend_job.py (mp.spawn, FileStore). Field threads (writers' side): pytorch/pytorch#60284,
#54736, #50956 (ZeroRedundancyOptimizer state_dict / consolidation), #75512 (gloo isend, "Connection closed
by peer"). References: sub-skills/torch-distributed/references/checkpoints.md#zeroredundancyoptimizer-consolidate-on-every-rank-save-on-one
and process-groups.md#isend-and-irecv-wait-before-the-process-ends.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - the shared 2-rank runner

NOT_CONSOLIDATED = ("Optimizer state has not been consolidated on this rank. Please call "
                    "`consolidate_state_dict(to={rank})` on all ranks beforehand if you meant to save the global state.")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_zero_isend_job.py", tmp_path_factory.mktemp("zero_isend"))


def test_torch_version(job):
    assert all(r["torch"].startswith("2.13.0") for r in job)


def test_each_rank_holds_the_state_of_its_own_parameters(job):
    for r in job:
        assert r["zero"]["params"] == 4 and r["zero"]["local_states"] == 2     # 4 tensors split 2 + 2


@pytest.mark.reproduces("torch-zero-optimizer-not-consolidated")
def test_state_dict_needs_consolidate_and_exists_only_on_the_to_rank(job):
    r0, r1 = job
    # before consolidate_state_dict: every rank raises; the message names the rank it runs on as `to`
    assert r0["zero"]["before_consolidate"]["error"]["msg"] == NOT_CONSOLIDATED.format(rank=0)
    assert r1["zero"]["before_consolidate"]["error"]["msg"] == NOT_CONSOLIDATED.format(rank=1)
    # after consolidate_state_dict(to=0) on both ranks: rank 0 has the full dict, rank 1 still raises
    assert r0["zero"]["after_consolidate"]["ok"] == {"states": 4, "group_params": [4]}
    assert r1["zero"]["after_consolidate"]["error"]["msg"] == NOT_CONSOLIDATED.format(rank=1)


def test_the_consolidated_dict_is_a_plain_optimizer_state_dict(job):
    for r in job:
        assert r["zero"]["plain_load"] == {"states": 4, "lr": 0.1}      # torch.optim.AdamW loads it as is


def test_zero_load_state_dict_keeps_this_ranks_share_and_blanks_the_rest_of_the_dict(job):
    for r in job:
        assert r["zero"]["zero_load"] == {"local_states": 2, "lr": 0.1, "local_lr": 0.1}
        # load_state_dict(full) writes None over the other rank's entries of the dict it was given
        assert r["zero"]["dict_after_zero_load"] == {"none_states": 2, "states": 4}
        assert r["zero"]["plain_load_of_that_dict"]["error"] == {"type": "TypeError",
                                                                  "msg": "object of type 'NoneType' has no len()"}


@pytest.mark.reproduces("torch-gloo-timeout")
def test_consolidate_on_rank_0_only_times_out_both_ranks(job):
    """Both ranks fail within the 2-s group timeout. The rank whose timeout fires first closes the pair, so
    the other may report the closed connection instead of its own timeout (a CI rehearsal saw both orders)."""
    timeout = "Timed out waiting 2000ms for recv operation to complete"
    msgs = []
    for r in job:
        got = r["zero"]["rank0_only_consolidate"]
        msgs.append(got["result"]["error"]["msg"])
        assert got["seconds"] < 10
    assert any(timeout in m for m in msgs), msgs
    assert all(timeout in m or "Connection closed by peer" in m for m in msgs), msgs


def test_gloo_isend_completes_only_when_the_receiver_posts_its_recv(job):
    r0, r1 = job
    assert r0["isend_returned_s"] < 0.5               # isend itself returns at once
    assert r0["isend_wait_s"] >= 0.8                  # wait() returned after rank 1's recv, posted 1 s late
    assert r1["first_recv"] == [13.0, 14.0, 15.0]


@pytest.mark.reproduces("torch-gloo-peer-connection-lost")
def test_a_process_that_ends_with_an_isend_pending_breaks_the_receivers_recv(job):
    err = job[1]["second_recv"]["error"]
    assert err["type"] == "RuntimeError"
    assert "Connection closed by peer [127.0.0.1]:" in err["msg"]
    assert "This is typically caused by a remote worker crashing" in err["msg"]
