"""Rooted collectives on 3 gloo ranks (torch 2.13.0 CPU): reduce, gather, scatter and their object forms
-- what each rank passes, what raises and where, what each rank holds afterwards -- and the autograd
alternatives (custom torch.autograd.Function, DTensor) of process-groups.md.

The job is _rooted_collectives_job.py (mp.spawn, FileStore). Rank r holds 10**r, so a partial sum is
recognisable by its digits (110 = ranks 1 and 2, 111 = all three).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _rank_job import ok, run_rank_job  # noqa: E402

WORLD = 3


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_rank_job(HERE / "_rooted_collectives_job.py", tmp_path_factory.mktemp("rooted_collectives"), WORLD, timeout=240)


def test_gloo_reduce_defines_only_dst_and_leaves_partial_sums_elsewhere(job):
    inputs = [[10.0 ** r] * 6 for r in range(WORLD)]
    for key, dst in (("reduce_dst0", 0), ("reduce_dst2", 2)):
        got = [ok(r[key]) for r in job]
        assert got[dst] == [111.0] * 6
        others = [got[r] for r in range(WORLD) if r != dst]
        # non-dst buffers were used as scratch: neither the input nor the result
        assert all(o != inputs[r] and o != [111.0] * 6 for r, o in zip([r for r in range(WORLD) if r != dst], others))
    assert [ok(r["reduce_dst0"]) for r in job][1] == [110.0, 110.0, 111.0, 111.0, 10.0, 10.0]
    assert [ok(r["reduce_dst0_n1"]) for r in job] == [[111.0], [110.0], [100.0]]   # even one element


def test_issue_76527_reproduces_on_a_two_rank_group(job):
    assert ok(job[0]["issue_76527"]) == [[5, 7], [9, 11]]
    assert ok(job[1]["issue_76527"]) == [[4, 5], [9, 11]]       # rank 1 keeps row 0, gets the sum in row 1


def test_reduce_a_clone_or_all_reduce(job):
    for rank, r in enumerate(job):
        c = ok(r["reduce_clone"])
        assert c["t"] == [10.0 ** rank] * 6                       # the original survives
        assert ok(r["all_reduce"]) == [111.0] * 6                 # every rank holds the result


def test_gather_and_scatter_lists_only_on_the_root(job):
    assert ok(job[0]["gather"]) == {"ret": None, "list": [[1.0], [10.0], [100.0]]}
    assert ok(job[0]["gather_empty_list_off_dst"])["list"] == [[1.0], [10.0], [100.0]]
    for r in job[1:]:
        assert ok(r["gather"]) == {"ret": None, "list": None}
        assert ok(r["gather_empty_list_off_dst"])["list"] == []  # an empty list is accepted, stays empty
    for r in job:
        assert ok(r["all_gather"]) == [[1.0], [10.0], [100.0]]
    assert [ok(r["scatter"]) for r in job] == [[1.0], [2.0], [3.0]]
    assert ok(job[0]["gather_object"]) == [{"rank": 0}, {"rank": 1}, {"rank": 2}]
    assert [ok(r["gather_object"]) for r in job[1:]] == [None, None]
    assert [ok(r["scatter_object_list"]) for r in job] == [[{"to": 0}], [{"to": 1}], [{"to": 2}]]


def test_dst_is_global_group_dst_is_group_local(job):
    for rank in (1, 2):                                           # subgroup [1, 2]
        assert ok(job[rank]["sub_reduce_group_dst1"])[0] in (110.0, 10.0)
        assert ok(job[rank]["sub_reduce_dst2"])[0] in (110.0, 10.0)
    assert ok(job[2]["sub_reduce_group_dst1"]) == [110.0]          # group rank 1 is global rank 2
    assert ok(job[2]["sub_reduce_dst2"]) == [110.0]
    assert ok(job[0]["sub_reduce_non_member"]) == [1.0]             # non-member: warns, returns, unchanged
    a = job[1]["alone"]
    assert a["sub_reduce_dst_not_in_group"]["error"]["msg"].startswith("Global rank 0 is not part of group")
    assert a["sub_reduce_group_dst_as_global"]["error"] == {
        "type": "RuntimeError", "msg": "ProcessGroupGloo::reduce: invalid root rank: 2"}


ARG_ERRORS = {
    (0, "gather_no_list_on_dst"): "Argument ``gather_list`` must be specified on destination rank.",
    (0, "scatter_no_list_on_src"): "Argument ``scatter_list`` must be specified on source rank.",
    (0, "gather_object_no_list_on_dst"): "Argument ``gather_list`` must be specified on destination rank.",
    (0, "scatter_object_no_list_on_src"): "source rank must provide non-None scatter_object_input_list",
    (0, "reduce_no_dst"): "Must specify global_rank or group_rank",
    (0, "reduce_dst_and_group_dst"): "Can't specify both group_rank and global_rank",
    (1, "gather_list_off_dst"): "Argument ``gather_list`` must NOT be specified on non-destination ranks.",
    (1, "scatter_list_off_src"): "Argument ``scatter_list`` must NOT be specified on non-source ranks.",
    (1, "gather_object_list_off_dst"): "Argument ``gather_list`` must NOT be specified on non-destination ranks.",
    (1, "gather_dtype_mismatch"): "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.int64",
}


def test_argument_errors_raise_on_the_calling_rank_before_any_communication(job):
    for (rank, key), msg in ARG_ERRORS.items():
        res = job[rank]["alone"][key]
        assert res["error"] == {"type": "ValueError", "msg": msg}, key
        assert res["seconds"] < 1.0      # called by this rank alone: a call that communicated would block


def test_a_rank_that_raises_leaves_the_root_waiting_for_the_group_timeout(job):
    assert job[1]["mismatch"]["error"]["type"] == "ValueError"
    assert job[2]["mismatch"] == {"ok": None, "seconds": job[2]["mismatch"]["seconds"]}   # its send completed
    e = job[0]["mismatch"]["error"]
    assert e["type"] == "RuntimeError" and "Timed out waiting 3000ms for recv operation to complete" in e["msg"]
    assert job[0]["mismatch"]["seconds"] >= 2.9


def test_autograd_alternatives_custom_function_and_dtensor(job):
    for rank, r in enumerate(job):
        a = ok(r["autograd"])
        assert a["custom_function"] == {"y": [6.0], "grad": [6.0]}        # sum over ranks of (r + 1)
        assert a["dtensor_per_rank_loss"]["y"] == [6.0]
        assert a["dtensor_per_rank_loss"]["grad"] == [rank + 1.0]           # local: DTensor assumes one loss
        assert a["dtensor_per_rank_loss"]["warnings"] == []
        assert a["dtensor_same_loss"] == {"y": [6.0], "grad": [2.0]}        # d(2 y)/dx_r for the one global loss
