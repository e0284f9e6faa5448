"""Behaviour claims of sub-skills/torch-distributed/references/dtensor.md, shown by one run of
_dtensor_probe.py under torchrun with 2 gloo ranks on CPU (torch 2.13.0)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _torchrun import shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOC = REPO / "sub-skills" / "torch-distributed" / "references" / "dtensor.md"


def probe_run(tmp_path_factory):
    """This module's probe run (field_coverage/conftest.py may start it early, beside the others)."""
    out = tmp_path_factory.mktemp("dtensor") / "obs.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = torchrun(HERE / "_dtensor_probe.py", out, nproc=2, cwd=out.parent, env=env)
    assert proc.returncode == 0 and out.exists(), (proc.stdout + proc.stderr)[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def obs(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def test_uneven_shard_and_global_shape(obs):
    assert obs["shard_local_shapes"] == [[3, 2], [2, 2]] and obs["shard_global_shape"] == [5, 2]
    assert obs["full_tensor_equal"] == [True, True]
    assert obs["replicate_local_shapes"] == [[5, 2], [5, 2]]


def test_distribute_tensor_uses_rank0_data_and_overwrites_the_input(obs):
    assert obs["distribute_from_rank0"] == [[1.0] * 4, [1.0] * 4]
    assert obs["input_after_distribute"] == [[1.0] * 4, [1.0] * 4]  # rank 1 passed 2.0s


def test_from_local_trusts_each_rank(obs):
    assert obs["from_local_replicate"] == [[1.0] * 4, [2.0] * 4]
    assert obs["from_local_shard_global_shape"] == [8]  # 4 local rows x 2 ranks, not checked


def test_partial_is_a_pending_sum(obs):
    assert obs["partial_to_replicate"] == [[3.0, 3.0], [3.0, 3.0]]
    assert obs["partial_full_tensor"] == [[3.0, 3.0], [3.0, 3.0]]


def test_ops_keep_placements_and_reject_plain_tensors(obs):
    assert obs["op_placement"] == "(Shard(dim=0),)"
    assert obs["mixed_error"].startswith("aten.add.Tensor got mixed torch.Tensor and DTensor")


def test_reference_states_what_the_run_shows():
    text = DOC.read_text()
    for phrase in ["`src_data_rank`", "overwritten", "`run_check=True`", "`Partial()`", "got mixed torch.Tensor and DTensor",
                   "3 and 2 rows"]:
        assert phrase in text, phrase
