"""torch.compile with DDP: optimize_ddp is read in DDP.__init__; graphs per mode (torch 2.13.0 CPU, 1 gloo rank).

Job: _compile_ddp_job.py. Reference: sub-skills/torch-distributed/references/ddp.md#torchcompile-with-ddp
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
    out = tmp_path_factory.mktemp("compile_ddp") / "r.json"
    r = subprocess.run([sys.executable, str(HERE / "_compile_ddp_job.py"), str(out)], timeout=240,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-6000:]
    return json.loads(out.read_text())


def test_torch_version_and_default(job):
    assert job["torch"].startswith("2.13.0") and job["default"] is True


def test_ddp_reads_the_mode_at_construction(job):
    # a DDP built before the config changed keeps the C++ reducer; one built after uses the Python reducer
    assert job["built_before_set"] == {"use_python_reducer": False, "hooks": 0}
    assert job["built_after_set"] == {"use_python_reducer": True, "hooks": 8}     # one hook per parameter


def test_an_unknown_mode_fails_in_the_ddp_constructor(job):
    assert job["bogus"] == "AssertionError: Invalid dynamo config optimize_ddp value mode='bogus'"


def test_ddp_optimizer_splits_the_graph_at_buckets_and_no_optimization_does_not(job):
    # 4 layers of ~1.03 MB, bucket_cap_mb=1: one bucket per layer -> 4 graphs; no_optimization -> 1 graph
    assert job["graphs"] == {"True": 4, "ddp_optimizer": 4, "False": 1, "no_optimization": 1}


def test_a_bare_sequential_under_ddp_gives_the_backend_no_graph(job):
    # torch.nn's Sequential.forward is skipped as a top-level frame; DDP.forward itself is not traced
    assert job["sequential_graphs"] == 0


def test_ddp_optimizer_rejects_a_bucket_cap_below_the_first_bucket(job):
    assert job["small_cap"].startswith("AssertionError") and \
        "First bucket should be smaller/equal to other buckets to get comms warmed up ASAP" in job["small_cap"]
