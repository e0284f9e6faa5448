"""FSDP1 at world size 1 switches to NO_SHARD (and the writeback shape error of torch <= 2.8), and a
LOCAL_STATE_DICT load after a forward is ignored by the unit that kept its unsharded parameter
(torch 2.13.0, gloo on CPU, 1 and 2 ranks, tests/torch_distributed/_fsdp1_noshard_local_load_job.py).

Backs sub-skills/torch-distributed/references/fsdp1-to-fsdp2.md ("World size 1: NO_SHARD and the
writeback shape error" and "Loading after a forward: LOCAL_STATE_DICT keeps the stale unsharded copy").
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rank_jobs_runner import run_rank_job  # noqa: E402

JOB = Path(__file__).with_name("_fsdp1_noshard_local_load_job.py")


def _run(job, world, outdir):
    return run_rank_job(JOB, job, world, outdir)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("fsdp1_noshard")


@pytest.fixture(scope="module")
def wb1(out):
    return _run("writeback", 1, out)[0]


@pytest.fixture(scope="module")
def wb2(out):
    return _run("writeback", 2, out)


@pytest.fixture(scope="module")
def load1(out):
    return _run("load", 1, out)[0]


@pytest.fixture(scope="module")
def load2(out):
    return _run("load", 2, out)


WRITEBACK_ERROR = ("Cannot writeback when the parameter shape changes "
                   "Expects torch.Size([20]) but got torch.Size([5, 4])")


def test_world_size_1_switches_to_no_shard_and_keeps_nd_views(wb1, wb2):
    assert wb1["now"]["strategy"] == "NO_SHARD" and wb1["now"]["switch_warning"]
    assert wb1["now"]["orig_param_shape_before"] == [5, 4]       # NO_SHARD: views keep the module's shape
    for r in wb2:
        assert r["now"]["strategy"] == "FULL_SHARD" and not r["now"]["switch_warning"]
        assert r["now"]["orig_param_shape_before"] == [10]       # sharded: a 1-D view of this rank's 10 of 20


def test_upcast_after_wrapping_writes_back_on_2_13(wb1, wb2):
    assert wb1["now"]["result"] == "ok"
    assert wb1["now"]["orig_param_dtype_after"] == "torch.float32"
    assert wb1["now"]["values_kept"] is True
    for r in wb2:
        assert r["now"]["result"] == "ok"


def test_writeback_without_pr_154369_raises_only_at_world_size_1(wb1, wb2):
    assert wb1["old"]["result"] == WRITEBACK_ERROR
    for r in wb2:
        assert r["old"]["result"] == "ok"


def test_local_state_dict_load_after_forward_keeps_root_stale(load2):
    for r in load2:
        for before in ("forward", "forward_no_grad"):
            # FULL_SHARD: the non-root unit resharded after forward and picks the load up; the root did not
            assert r[f"FULL_SHARD/LOCAL_STATE_DICT/{before}"] == {"output": "mixed", "root_unit": "stale"}
            # SHARD_GRAD_OP: no unit frees after forward, the whole model stays stale
            assert r[f"SHARD_GRAD_OP/LOCAL_STATE_DICT/{before}"] == {"output": "stale", "root_unit": "stale"}
        for s in ("FULL_SHARD", "SHARD_GRAD_OP"):
            for before in ("none", "forward_backward"):
                assert r[f"{s}/LOCAL_STATE_DICT/{before}"] == {"output": "loaded", "root_unit": "loaded"}


def test_full_and_sharded_loads_after_forward_take_effect(load2):
    for r in load2:
        for s in ("FULL_SHARD", "SHARD_GRAD_OP"):
            for t in ("SHARDED_STATE_DICT", "FULL_STATE_DICT"):
                for before in ("none", "forward", "forward_no_grad", "forward_backward"):
                    assert r[f"{s}/{t}/{before}"] == {"output": "loaded", "root_unit": "loaded"}, (s, t, before)


def test_local_load_at_world_size_1_takes_effect(load1):
    # NO_SHARD keeps no separate unsharded copy: the loaded flat parameter is the one used
    for key, v in load1.items():
        assert v == {"output": "loaded", "root_unit": "loaded"}, key


def test_local_state_dict_with_use_orig_params_needs_strict_false(load2):
    for r in load2:
        for before in ("none", "forward"):
            err = r[f"FULL_SHARD/LOCAL_STATE_DICT/{before}/use_orig_params/strict=True"]
            assert err.startswith("RuntimeError: Error(s) in loading state_dict") and '"_flat_param"' in err
        assert r["FULL_SHARD/LOCAL_STATE_DICT/none/use_orig_params/strict=False"] == {
            "output": "loaded", "root_unit": "loaded"}
        assert r["FULL_SHARD/LOCAL_STATE_DICT/forward/use_orig_params/strict=False"] == {
            "output": "mixed", "root_unit": "stale"}
