"""Stop together on uneven per-rank batch counts (torch 2.13.0 CPU, 2 gloo ranks: 3 and 5 batches).

Job: _stop_together_job.py. Reference: sub-skills/torch-distributed/references/data-loading.md#stop-together-without-join
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
    out = tmp_path_factory.mktemp("stop_together")
    r = subprocess.run([sys.executable, str(HERE / "_stop_together_job.py"), str(out)], cwd=HERE, timeout=240,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-6000:]
    return [json.loads((out / f"rank{k}.json").read_text()) for k in range(2)]


def test_torch_version(job):
    assert all(r["torch"].startswith("2.13.0") for r in job)


def test_the_flag_loop_stops_every_rank_after_the_shortest_ranks_batches(job):
    for r in job:
        assert r["flag"]["steps"] == 3
    assert job[0]["flag"]["weight_sum"] == job[1]["flag"]["weight_sum"]      # replicas still in sync


def test_the_async_flag_gives_the_same_steps_and_weights(job):
    for r in job:
        assert r["async_flag"] == r["flag"]


def test_join_with_throw_raises_on_every_rank_at_the_first_exhaustion(job):
    assert job[0]["join_throw"] == {"steps": 3, "raised": "RuntimeError: Rank 0 exhausted all inputs."}
    assert job[1]["join_throw"] == {
        "steps": 3, "raised": "RuntimeError: Detected at least one rank that exhausted inputs. Throwing across all ranks."}
