"""dcp.async_save copies (stages) CPU tensors before it returns (torch 2.13.0 CPU, one gloo rank), so the
training loop may change them at once. Job: _dcp_async_save_job.py. Field thread (writers' side):
pytorch/pytorch#145408 (CPU tensors were not copied at staging before that fix). Reference:
sub-skills/torch-distributed/references/fsdp2-and-dcp.md#distributed-checkpoint.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("async_save")
    r = subprocess.run([sys.executable, str(HERE / "_dcp_async_save_job.py"), str(out)], timeout=180,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads((out / "result.json").read_text())


def test_torch_version(result):
    assert result["torch"].startswith("2.13.0")


def test_async_save_returns_a_future(result):
    assert result["future_type"] == "Future"          # done_at_return is recorded, not asserted (timing)


def test_a_change_after_async_save_returns_does_not_reach_the_checkpoint(result):
    assert result["live_first"] == 2.0                     # the live tensor was changed in place
    assert result["loaded_first_last"] == [1.0, 1.0]       # the file has the value at the call
    assert result["loaded_step"] == 7
