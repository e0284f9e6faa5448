"""FSDP2 over TP (dp=2 x tp=2): _StridedShard, and DCP save + reshard on load (torch 2.13.0, 4 gloo ranks, CPU).

Runs tests/torch_distributed/_fsdp2_tp_dcp_job.py (real processes, FileStore rendezvous).
Backs sub-skills/torch-distributed/references/fsdp2-and-dcp.md#fsdp2-over-tp-2-d-strided-sharding-and-dcp.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rank_job import run_rank_job  # noqa: E402

JOB = Path(__file__).with_name("_fsdp2_tp_dcp_job.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("fsdp2_tp_dcp")
    out = run_rank_job(JOB, d, 4)
    for r in out:
        assert "error" not in r, r
    return out


def test_fsdp2_labels_the_tp_sharded_dim_with_strided_shard(ranks):
    for r in ranks:
        # Colwise (TP Shard(0)) + FSDP2 on the same dim 0: the DP dim becomes _StridedShard(sf = tp degree)
        assert r["w0_placements"] == "(_StridedShard(dim=0, sf=2), Shard(dim=0))"
        # Rowwise (TP Shard(1)): FSDP2 shards dim 0, a different dim, so no stride is needed
        assert r["w1_placements"] == "(Shard(dim=0), Shard(dim=1))"
        assert r["w0_local_shape"] == [2, 6]


def test_local_rows_are_tp_first_then_dp_and_only_strided_label_rebuilds_them(ranks):
    # mesh (dp, tp): rank = 2*dp + tp. TP splits rows 0-3 / 4-7 first, FSDP2 splits each TP piece by DP.
    assert [r["w0_local_rows"] for r in ranks] == [[0, 1], [4, 5], [2, 3], [6, 7]]
    for r in ranks:
        assert r["w0_full_matches"] and r["w1_full_matches"]
        # the same local rows labelled (Shard(0), Shard(0)) (DP-first order) rebuild a wrong tensor
        assert r["naive_full_matches"] is False


def test_dcp_saves_2d_and_reshards_into_plain_fsdp2(ranks):
    for r in ranks:
        assert r["save"] == "ok"
        assert r["load1d_placements"] == "(Shard(dim=0),)"
        assert r["load1d_matches"] is True


def test_torch_2_4_guard_text_is_gone_and_fsdp2_builds_strided_spec():
    root = Path(torch.__file__).parent / "distributed"
    hits = [p for p in root.rglob("*.py") if "2D state_dict is under development" in p.read_text(errors="ignore")]
    assert hits == []
    src = (root / "fsdp" / "_fully_shard" / "_fsdp_param.py").read_text()
    assert "def _init_sharding_spec_tp(" in src and "_StridedShard(shard_dim, split_factor=split_factor)" in src
