"""FSDP1 use_orig_params=False + activation checkpointing through get/set_optimizer_state_dict (torch 2.13.0 CPU).

Job: _fsdp1_ac_optim_fqn_job.py (2 gloo ranks). "old" removes the one _get_fqns line that strips
_checkpoint_wrapped_module. (pytorch/pytorch#124698, cherry-picked for 2.3.1 as #126559; fixes #124546).
Reference: sub-skills/torch-distributed/references/fsdp1-to-fsdp2.md#fsdp1-state-dicts-if-you-stay-on-fsdp1
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ORIG = sorted(f"blocks.{b}.fc{i}.{p}" for b in (0, 1) for i in (1, 2) for p in ("weight", "bias"))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp1_ac_fqn")
    r = subprocess.run([sys.executable, str(HERE / "_fsdp1_ac_optim_fqn_job.py"), str(out)], timeout=240,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-6000:]
    return [json.loads((out / f"rank{k}.json").read_text()) for k in range(2)]


def test_the_flat_parameter_sits_under_the_checkpoint_wrapper(job):
    for r in job:
        assert r["torch"].startswith("2.13.0")
        assert r["now"]["flat_names"] == [
            f"_fsdp_wrapped_module.blocks.{b}._fsdp_wrapped_module._checkpoint_wrapped_module._flat_param" for b in (0, 1)]


def test_installed_get_and_set_round_trip_with_original_fqns(job):
    for r in job:
        assert r["now"]["osd_state_keys"] == ORIG and r["now"]["set"] == "ok"


def test_without_the_prefix_strip_set_sees_one_bogus_fqn_per_flat_param(job):
    for r in job:
        assert r["old"]["osd_state_keys"] == ORIG
        assert r["old"]["error"].startswith(
            "RuntimeError: Missing optimizer state for parameter 'blocks.0._flat_param' in checkpoint.")
