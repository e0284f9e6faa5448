"""FSDP2 + activation checkpointing with two forwards before one backward (torch 2.13.0, 2 gloo ranks, CPU).

Runs _fsdp2_ac_multi_forward_job.py. Backs sub-skills/torch-distributed/references/fsdp2-and-dcp.md
"Activation checkpointing and several forwards before one backward" and the AC cause in catalog entry
torch-dtensor-mixed-with-tensor (set-21 miss s21-K1-01).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rank_job import run_rank_job  # noqa: E402

JOB = Path(__file__).with_name("_fsdp2_ac_multi_forward_job.py")
MIXED = "aten.addmm.default got mixed torch.Tensor and DTensor"


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("fsdp2_ac_multi_forward")
    out = run_rank_job(JOB, d, 2)
    return out


def test_pinned_torch_runs_two_forwards_then_one_backward_with_ac(ranks):
    for r in ranks:
        assert r["pinned"] == "ok", r.get("pinned_tb")


def test_old_early_return_raises_mixed_tensor_dtensor(ranks):
    """The second recomputation of block.fc1 finds its parameters resharded by the first one's post_backward."""
    for r in ranks:
        assert MIXED in r["old"]


def test_old_early_return_passes_without_the_ingredients(ranks):
    """One forward, AC off, or no separately sharded child inside the checkpointed region: no failure."""
    for r in ranks:
        assert r["old_one_forward"] == "ok"
        assert r["old_no_ac"] == "ok"
        assert r["old_no_child_shard"] == "ok"


def test_reshard_after_forward_false_does_not_help_the_old_code(ranks):
    """The child is resharded by post_backward, not post_forward, so this setting does not change it."""
    for r in ranks:
        assert MIXED in r["old_reshard_after_forward_false"]


def test_pinned_pre_forward_re_unshards_in_pre_backward():
    src = (Path(torch.__file__).parent / "distributed/fsdp/_fully_shard/_fsdp_state.py").read_text()
    body = src[src.index("    def _pre_forward("):]
    body = body[: body.index("state_first_in_pass")]
    assert "if self._training_state == TrainingState.PRE_BACKWARD:" in body
    assert "if not fsdp_param_group.is_unsharded:" in body
    assert "fsdp_param_group.unshard()" in body and "fsdp_param_group.wait_for_unshard()" in body
