"""FSDP2 on an (N, 1) HSDP mesh issues no all-gather / reduce-scatter; DDP's per-forward buffer sync
and two forwards before backward (torch 2.13.0, 2 gloo ranks on CPU, tests/torch_distributed/_fx15c_jobs.py).

Backs sub-skills/torch-distributed/references/fsdp2-and-dcp.md (HSDP with a size-1 shard dimension)
and sub-skills/torch-distributed/references/ddp.md (Buffers: two forwards before backward).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("_fx15c_jobs.py")


def _run(job, outdir):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, str(JOB), job, str(outdir)], env=env, capture_output=True,
                       text=True, timeout=180)
    ranks = [json.loads((outdir / f"{job}.rank{r}.json").read_text()) for r in (0, 1)
             if (outdir / f"{job}.rank{r}.json").exists()]
    assert len(ranks) == 2, p.stdout + p.stderr
    for r in ranks:
        assert "ok" in r, r
    return [r["ok"] for r in ranks]


@pytest.fixture(scope="module")
def hsdp(tmp_path_factory):
    return _run("hsdp", tmp_path_factory.mktemp("fx15c_hsdp"))


@pytest.fixture(scope="module")
def ddpbn(tmp_path_factory):
    return _run("ddpbn", tmp_path_factory.mktemp("fx15c_ddpbn"))


def test_hsdp_n_by_1_mesh_only_all_reduces_over_the_replicate_dim(hsdp):
    for r in hsdp:
        n1 = r["n_1"]
        # dim 0 replicate, dim 1 shard (size 1): the local shard is the whole parameter
        assert n1["placements"] == ["Replicate()", "Shard(dim=0)"]
        assert n1["local_shape"] == n1["full_shape"] == [4, 4]
        # no collective at all in forward, one all-reduce over the 2 replicas per fully_shard group
        assert n1["forward"] == []
        assert n1["backward"] == [["all_reduce", 2], ["all_reduce", 2]]
    # replicas end with the same (averaged) gradient, as DDP would
    assert hsdp[0]["n_1"]["grad0_local"] == hsdp[1]["n_1"]["grad0_local"]


def test_hsdp_1_by_n_mesh_all_gathers_and_reduce_scatters(hsdp):
    for r in hsdp:
        one_n = r["one_n"]
        assert one_n["local_shape"] == [2, 4]
        assert one_n["forward"] == [["all_gather_single", 2], ["all_gather_single", 2]]
        names = [c for c in one_n["backward"]]
        assert names.count(["all_gather_single", 2]) == 2          # re-gather for backward (resharded after forward)
        assert names.count(["reduce_scatter_single", 2]) == 2
        assert names.count(["all_reduce", 1]) == 2                 # replicate dim of size 1: a 1-rank all-reduce
    # same averaged gradient as the (2, 1) mesh, split in row halves
    full = hsdp[0]["n_1"]["grad0_local"]
    assert hsdp[0]["one_n"]["grad0_local"] + hsdp[1]["one_n"]["grad0_local"] == full


def test_ddp_bn_two_forwards_before_grad_work_on_2_13(ddpbn):
    for r in ddpbn:
        for k in ("now_default", "now_forward_sync_false", "now_broadcast_false"):
            assert r[k]["grad_first"] == "ok", k
            assert r[k]["running_var_version_bumped_by_second_forward"] == 0, k


def test_ddp_bn_without_the_version_counter_guard_raises_inplace_error(ddpbn):
    for r in ddpbn:
        old = r["old_default"]
        assert old["running_var_version_bumped_by_second_forward"] == 1
        assert old["grad_first"].startswith("one of the variables needed for gradient computation has been "
                                            "modified by an inplace operation: [torch.FloatTensor [2]]")
        # the workarounds for such releases: no per-forward sync
        assert r["old_forward_sync_false"]["grad_first"] == "ok"
        assert r["old_broadcast_false"]["grad_first"] == "ok"
        assert r["old_broadcast_false"]["future_warning"] and not r["old_forward_sync_false"]["future_warning"]
