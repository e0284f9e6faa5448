"""ZeroRedundancyOptimizer checkpoint saved at 2 ranks and loaded at 3 (torch 2.13.0 CPU, gloo).

Job: _zero_resize_job.py. Reference: sub-skills/torch-distributed/references/checkpoints.md
#zeroredundancyoptimizer-consolidate-on-every-rank-save-on-one
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero_resize")
    r = subprocess.run([sys.executable, str(HERE / "_zero_resize_job.py"), str(out)], cwd=HERE, timeout=240,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-6000:]
    return ({k: json.loads((out / f"save_rank{k}.json").read_text()) for k in range(2)},
            {k: json.loads((out / f"load_rank{k}.json").read_text()) for k in range(3)})


def test_torch_version(job):
    saves, loads = job
    assert all(r["torch"].startswith("2.13.0") for r in [*saves.values(), *loads.values()])


def test_a_consolidated_dict_loads_at_another_world_size_and_is_re_partitioned(job):
    saves, loads = job
    # at 2 ranks the 6 tensors were split by size: rank 0 the two 4x4 weights 0 and 4
    assert sorted(saves[0]["held"]) == ["0", "4"] and sorted(saves[1]["held"]) == ["1", "2", "3", "5"]
    # at 3 ranks load_state_dict hands each rank the state of its new share, values equal to the saved ones
    assert [loads[k]["held_ids"] for k in range(3)] == [[0, 1], [2, 3], [4, 5]]
    for r in loads.values():
        assert r["matches_saved"] is True and r["lr"] == 0.1 and r["step_after_load"] is True


def test_the_inner_optimizer_dict_is_one_ranks_shard_renumbered_from_zero(job):
    saves, loads = job
    assert saves[0]["local_keys"] == [0, 1] and saves[1]["local_keys"] == [0, 1, 2, 3]
    for r in loads.values():
        assert r["local_shard_load"]["error"] == {
            "type": "ValueError",
            "msg": "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"}


def test_a_second_zero_load_of_the_same_dict_at_the_same_world_size_works(job):
    _saves, loads = job
    for k, r in loads.items():
        assert r["second_zero_load_same_dict"] == {"ok": r["held_ids"]}, k
