"""dcp.save(..., use_collectives=False): per-rank metadata, how it is read back, other world sizes.

torch 2.13.0, gloo on CPU, real processes (tests/torch_distributed/_dcp_rank_local_job.py):
2 ranks save, 2 ranks load, 3 ranks load, 1 rank loads, one process converts offline; the same state
saved collectively for comparison (which copy de-duplication keeps).
Backs sub-skills/torch-distributed/references/fsdp2-and-dcp.md#rank-local-checkpoints-use_collectivesfalse.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("_dcp_rank_local_job.py")


def _run(phase, outdir):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, str(JOB), phase, str(outdir)], env=env, capture_output=True,
                       text=True, timeout=180)
    ranks = sorted(outdir.glob(f"{phase}.rank*.json"))
    return [json.loads(f.read_text()) for f in ranks], p.stdout + p.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("dcp_rank_local")
    out = {}
    for phase in ("save", "load2", "load3", "load1", "offline", "collective"):
        out[phase] = _run(phase, d)
    return out


def test_rank_local_save_writes_per_rank_metadata_and_no_global_file(runs):
    save, _ = runs["save"]
    assert len(save) == 2
    assert save[0]["files"] == ["__0.metadata", "__0_0.distcp", "__1.metadata", "__1_0.distcp"]
    for r in save:
        assert r["read_metadata_global"]["type"] == "FileNotFoundError"
        assert r["read_metadata_global"]["msg"].endswith("ckpt/.metadata'")
    # each rank's metadata describes only what that rank wrote: its own key, its own shard
    assert "dl_rank0" in save[0]["own_metadata_keys"] and "dl_rank1" not in save[0]["own_metadata_keys"]
    assert "dl_rank1" in save[1]["own_metadata_keys"]
    assert save[0]["own_metadata_sharded_chunks"] == [[0, 3]] and save[1]["own_metadata_sharded_chunks"] == [[3, 3]]


def test_dcp_load_same_world_size_falls_back_to_rank_local_metadata(runs):
    load, log = runs["load2"]
    assert [r["load"] for r in load] == ["ok", "ok"]
    assert "Global metadata is not found. Falling back to rank local metadata." in log
    assert load[0]["values"]["sharded"] == [0.0, 1.0, 2.0] and load[1]["values"]["sharded"] == [3.0, 4.0, 5.0]
    # no de-duplication: a plain tensor with per-rank values comes back per rank
    # (a collective save keeps one copy for every rank: test_collective_save_keeps_one_copy_not_always_rank_0s)
    assert load[0]["values"]["per_rank_plain"] == [1.0, 1.0] and load[1]["values"]["per_rank_plain"] == [2.0, 2.0]
    assert load[1]["values"]["dl_rank1"] == [101.0] and load[0]["values"]["epoch"] == 3


def test_dcp_load_at_another_world_size_fails_on_every_rank(runs):
    load, _ = runs["load3"]
    assert len(load) == 3
    for r in load:
        assert r["load"]["type"] == "CheckpointException"
        assert "ranks:dict_keys([2])" in r["load"]["msg"]
        assert "rank local metadata read failed" in r["load"]["msg"] and "__2.metadata" in r["load"]["msg"]
        assert r["values"]["epoch"] == 0                     # nothing was loaded anywhere


def test_dcp_load_at_a_smaller_world_size_loads_rank_0s_part_without_error(runs):
    (r,), log = runs["load1"]
    assert r["load"] == "ok", r
    assert "Global metadata is not found. Falling back to rank local metadata." in log
    # full-size DTensor target on 1 rank: only rank 0's chunk is read, the rest keeps the target's -1
    assert r["values"]["sharded"] == [0.0, 1.0, 2.0, -1.0, -1.0, -1.0]
    assert r["values"]["per_rank_plain"] == [1.0, 1.0] and r["values"]["epoch"] == 3


def test_collective_save_keeps_one_copy_not_always_rank_0s(runs):
    coll, _ = runs["collective"]
    assert len(coll) == 2
    assert coll[0]["ckc"]["files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    # default planner: each duplicated item goes to the rank with the fewest bytes planned so far;
    # here rank 1 (rank 0 already holds its 12-byte shard), so both ranks get rank 1's value back
    assert [r["ckc"]["values"]["per_rank_plain"] for r in coll] == [[2.0, 2.0], [2.0, 2.0]]
    # DefaultSavePlanner(dedup_save_to_lowest_rank=True): rank 0's copy
    assert [r["ckc_low"]["values"]["per_rank_plain"] for r in coll] == [[1.0, 1.0], [1.0, 1.0]]


def test_offline_conversion_reads_only_rank_0_metadata(runs):
    (off,), log = runs["offline"]
    assert "error" not in off, off
    assert off["keys"] == ["dl_rank0", "epoch", "per_rank_plain", "replicated", "sharded"]   # no dl_rank1
    assert off["sharded_shape"] == [6] and off["sharded_first3"] == [0.0, 1.0, 2.0]          # rank 1's half not read
    assert off["sharded_last3"] != [3.0, 4.0, 5.0]                                           # torch.empty memory
    assert "Global metadata is not found. Falling back to rank local metadata." in log        # the only sign
